package pysdk

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWheelHoldsEveryModuleOfTheCheckout: the wheel the control plane
// serves is the package beside this file, module for module, with the
// version pyproject.toml gives and a RECORD pip accepts.
func TestWheelHoldsEveryModuleOfTheCheckout(t *testing.T) {
	b, err := Wheel()
	if err != nil {
		t.Fatal(err)
	}
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("the wheel is not a zip: %v", err)
	}
	in := map[string][]byte{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(r); err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
		in[f.Name] = buf.Bytes()
	}
	onDisk, _ := filepath.Glob("klique/*.py")
	if len(onDisk) < 5 {
		t.Fatalf("found %d modules in klique/", len(onDisk))
	}
	for _, p := range onDisk {
		want, _ := os.ReadFile(p)
		if got, ok := in[filepath.ToSlash(p)]; !ok || !bytes.Equal(got, want) {
			t.Errorf("the wheel's %s differs from the checkout's (in the wheel: %v)", p, ok)
		}
	}
	entries, _ := os.ReadDir("klique")
	for _, e := range entries {
		if e.IsDir() && e.Name() != "__pycache__" {
			t.Errorf("klique/%s is a subpackage the embed pattern (klique/*.py) leaves out: add it to embed.go", e.Name())
		}
	}
	pyproject, _ := os.ReadFile("pyproject.toml")
	m := regexp.MustCompile(`(?m)^version = "([^"]+)"`).FindSubmatch(pyproject)
	if m == nil || string(m[1]) != Version() {
		t.Fatalf("klique/__init__.py says version %q, pyproject.toml %q: make them the same", Version(), m)
	}
	dist := fmt.Sprintf("klique-%s.dist-info/", Version())
	if !strings.Contains(string(in[dist+"METADATA"]), "Name: klique\nVersion: "+Version()+"\n") {
		t.Errorf("METADATA: %q", in[dist+"METADATA"])
	}
	record := string(in[dist+"RECORD"])
	for name, data := range in {
		if name == dist+"RECORD" {
			continue
		}
		sum := sha256.Sum256(data)
		line := fmt.Sprintf("%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(data))
		if !strings.Contains(record, line) {
			t.Errorf("RECORD lacks %q", line)
		}
	}
	if WheelName() != "klique-"+Version()+"-py3-none-any.whl" {
		t.Errorf("WheelName() = %q", WheelName())
	}
	again, _ := build()
	if !bytes.Equal(again, b) {
		t.Error("two builds of the same sources differ: the wheel's SHA-256 would change between replicas")
	}
}
