// Package pysdk holds the Python SDK's sources (the package klique beside
// this file) in the control plane's binary, and builds from them the wheel
// the control plane serves at /sdk/python/. A script that calls
// klique.init records that URL among its packages, so a worker on any host
// installs the SDK from the control plane it already reaches, instead of
// from a path on the user's machine (docs/experiments.md, "The Python
// SDK").
package pysdk

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Name is the distribution's name.
const Name = "klique"

// Path is where the control plane serves the SDK: Path lists the wheel,
// Path + WheelName() is the wheel.
const Path = "/sdk/python/"

// Requirement is the pip requirement that installs this version of the SDK
// from the control plane at server (the Python SDK's sdk_requirement
// writes the same).
func Requirement(server string) string {
	return Name + " @ " + strings.TrimRight(server, "/") + Path + WheelName()
}

//go:embed README.md klique/*.py
var sources embed.FS

var versionRE = regexp.MustCompile(`(?m)^__version__ = "([^"]+)"`)

// Version is the SDK's version, as klique/__init__.py says it ("" when it
// says none, which the package's test refuses).
func Version() string {
	b, _ := sources.ReadFile(Name + "/__init__.py")
	if m := versionRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// WheelName is the file name of the wheel, as pip expects it.
func WheelName() string { return fmt.Sprintf("%s-%s-py3-none-any.whl", Name, Version()) }

var (
	once  sync.Once
	wheel []byte
	werr  error
)

// Wheel is the SDK as a wheel: built once, byte for byte the same from the
// same sources, so that its SHA-256 is stable.
func Wheel() ([]byte, error) {
	once.Do(func() { wheel, werr = build() })
	return wheel, werr
}

// build writes the wheel as sdk/python/_build/klique_build.py does: the
// package's modules, then METADATA, WHEEL, top_level.txt and RECORD.
func build() ([]byte, error) {
	if Version() == "" {
		return nil, fmt.Errorf("the embedded klique/__init__.py sets no __version__")
	}
	names, err := fs.Glob(sources, Name+"/*.py")
	if err != nil {
		return nil, fmt.Errorf("list the SDK's modules: %w", err)
	}
	sort.Strings(names)
	readme, err := sources.ReadFile("README.md")
	if err != nil {
		return nil, fmt.Errorf("read the SDK's README: %w", err)
	}
	type entry struct {
		name string
		data []byte
	}
	var files []entry
	for _, n := range names {
		b, err := sources.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		files = append(files, entry{n, b})
	}
	dist := fmt.Sprintf("%s-%s.dist-info", Name, Version())
	metadata := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"+
		"Summary: Track a script's runs on Klique and send them to a GPU (standard library only)\n"+
		"Requires-Python: >=3.9\nLicense: Apache-2.0\nDescription-Content-Type: text/markdown\n\n%s", Name, Version(), readme)
	files = append(files,
		entry{dist + "/METADATA", []byte(metadata)},
		entry{dist + "/WHEEL", []byte("Wheel-Version: 1.0\nGenerator: klique serve\nRoot-Is-Purelib: true\nTag: py3-none-any\n")},
		entry{dist + "/top_level.txt", []byte(Name + "\n")})
	var record bytes.Buffer
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.data))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", dist)
	files = append(files, entry{dist + "/RECORD", record.Bytes()})

	var out bytes.Buffer
	z := zip.NewWriter(&out)
	// A fixed time: the same sources give the same bytes.
	modified := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range files {
		w, err := z.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: modified})
		if err != nil {
			return nil, fmt.Errorf("write %s to the wheel: %w", f.name, err)
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, fmt.Errorf("write %s to the wheel: %w", f.name, err)
		}
	}
	if err := z.Close(); err != nil {
		return nil, fmt.Errorf("close the wheel: %w", err)
	}
	return out.Bytes(), nil
}
