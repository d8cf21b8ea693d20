package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"time"

	pysdk "github.com/klique-ai/klique/sdk/python"
)

// sdkRoutes serve the Python SDK the binary carries, as a wheel, without
// authentication: the SDK is the open source of this repository, and the
// one who installs it is a worker's pip, which holds no key. A script that
// calls klique.init records the wheel's URL among its packages, so the
// worker that runs it, on whatever host, installs the SDK from here.
func (h *Handler) sdkRoutes() {
	h.route("GET "+pysdk.Path+"{$}", "sdk_python_index", http.HandlerFunc(h.sdkIndex))
	h.route("GET "+pysdk.Path+"{file}", "sdk_python_file", http.HandlerFunc(h.sdkFile))
}

// sdkIndex lists the wheel with its digest, a page pip reads with
// --find-links (pip install --find-links URL klique).
func (h *Handler) sdkIndex(w http.ResponseWriter, r *http.Request) {
	b, err := pysdk.Wheel()
	if err != nil {
		h.log.ErrorContext(r.Context(), "build the Python SDK's wheel", "err", err)
		writeError(w, r, http.StatusInternalServerError, "INTERNAL", "this control plane could not build the Python SDK: its log says why")
		return
	}
	sum := sha256.Sum256(b)
	name := html.EscapeString(pysdk.WheelName())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><title>Klique Python SDK</title></head><body>\n"+
		"<a href=\"%s#sha256=%s\">%s</a>\n</body></html>\n", name, hex.EncodeToString(sum[:]), name)
}

// sdkFile serves the wheel; any other name is refused with the one this
// control plane has.
func (h *Handler) sdkFile(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("file") != pysdk.WheelName() {
		writeError(w, r, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf(
			"this control plane serves the Python SDK version %s, as %s%s: install that (a script recorded with another version of the SDK needs the control plane of that version, or klique.init(packages=[...]) naming the SDK)",
			pysdk.Version(), pysdk.Path, pysdk.WheelName()))
		return
	}
	b, err := pysdk.Wheel()
	if err != nil {
		h.log.ErrorContext(r.Context(), "build the Python SDK's wheel", "err", err)
		writeError(w, r, http.StatusInternalServerError, "INTERNAL", "this control plane could not build the Python SDK: its log says why")
		return
	}
	sum := sha256.Sum256(b)
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	w.Header().Set("Cache-Control", "public, max-age=300")
	http.ServeContent(w, r, pysdk.WheelName(), time.Time{}, bytes.NewReader(b))
}
