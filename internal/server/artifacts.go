package server

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// The artifact endpoints (docs/experiments.md, "Artifacts and output
// destinations"): raw bodies in and out, so that a model of hundreds of
// megabytes streams rather than passing through GraphQL. Their bodies are
// bounded by the artifact limit the platform applies, not by
// KLIQUE_MAX_BODY_BYTES, and may take longer than the server's read
// timeout to arrive.
func (h *Handler) artifactRoutes() {
	api := func(fn http.HandlerFunc) http.Handler { return h.authenticated(identity.ChannelAPI, fn) }
	h.routeStream("PUT /api/v1/tasks/{id}/artifacts/{name...}", "artifact_put", api(h.putArtifact))
	h.route("GET /api/v1/tasks/{id}/artifacts/{name...}", "artifact_get", api(h.getArtifact))
	h.route("GET /api/v1/tasks/{id}/artifacts", "artifact_list", api(h.listArtifacts))
	h.routeStream("PUT "+agentapi.PathTasks+"{id}/"+agentapi.PathArtifacts+"/{name...}", "agent_artifact_put", h.workerAuth(h.agentPutArtifact))
	h.route("POST "+agentapi.PathTasks+"{id}/"+agentapi.PathPointers, "agent_artifact_pointer", h.workerAuth(h.agentPointer))
	h.route("GET "+agentapi.PathTasks+"{id}/"+agentapi.PathInputs+"/{name}", "agent_input", h.workerAuth(h.agentInput))
}

// uploadTimeout is how long an artifact's body may take to arrive.
const uploadTimeout = 30 * time.Minute

// upload reads what a PUT says of its body.
func upload(w http.ResponseWriter, r *http.Request) (platform.ArtifactUpload, error) {
	// The server's read timeout is for API calls; an artifact may be
	// larger. Without a deadline to change (a test's server), go on.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadTimeout))
	sum, err := bodyDigest(r.Header)
	if err != nil {
		return platform.ArtifactUpload{}, err
	}
	return platform.ArtifactUpload{Name: r.PathValue("name"), ContentType: r.Header.Get("Content-Type"), SHA256: sum,
		Size: r.ContentLength, Body: r.Body}, nil
}

// bodyDigest reads the SHA-256 a publisher sent: X-Klique-SHA256 (hex),
// Content-Digest (RFC 9530: sha-256=:base64:) or Digest (RFC 3230:
// SHA-256=base64). Other algorithms are ignored; a malformed value is an
// error.
func bodyDigest(hd http.Header) (string, error) {
	if v := strings.TrimSpace(hd.Get(agentapi.HeaderSHA256)); v != "" {
		return v, nil
	}
	for _, name := range []string{"Content-Digest", "Digest"} {
		for _, field := range strings.Split(hd.Get(name), ",") {
			algo, val, ok := strings.Cut(strings.TrimSpace(field), "=")
			if !ok || !strings.EqualFold(algo, "sha-256") {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(strings.Trim(val, ":"))
			if err != nil || len(b) != 32 {
				return "", fmt.Errorf("%s: sha-256 value %q is not the base64 of 32 bytes", name, val)
			}
			return hex.EncodeToString(b), nil
		}
	}
	return "", nil
}

func artifactJSON(a *model.Artifact) agentapi.ArtifactResponse {
	return agentapi.ArtifactResponse{Name: a.Name, Size: a.Size, SHA256: a.SHA256, ContentType: a.ContentType, Pointer: a.Pointer}
}

func writeArtifactError(w http.ResponseWriter, r *http.Request, err error) {
	var big *platform.ArtifactTooLarge
	if errors.As(err, &big) {
		writeError(w, r, http.StatusRequestEntityTooLarge, string(platform.CodeInvalid), big.Error())
		return
	}
	writePlatformError(w, r, err)
}

func (h *Handler) putArtifact(w http.ResponseWriter, r *http.Request) {
	up, err := upload(w, r)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, string(platform.CodeInvalid), err.Error())
		return
	}
	a, err := h.d.Platform.Artifacts.PublishArtifact(r.Context(), r.PathValue("id"), up)
	if err != nil {
		writeArtifactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, artifactJSON(a))
}

func (h *Handler) listArtifacts(w http.ResponseWriter, r *http.Request) {
	t, err := h.d.Platform.Tasks.Task(r.Context(), r.PathValue("id"))
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	list, err := h.d.Platform.Artifacts.TaskArtifacts(r.Context(), t)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	out := make([]agentapi.ArtifactResponse, 0, len(list))
	for _, a := range list {
		out = append(out, artifactJSON(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"artifacts": out})
}

func (h *Handler) getArtifact(w http.ResponseWriter, r *http.Request) {
	a, body, err := h.d.Platform.Artifacts.OpenArtifact(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	serveArtifact(w, a, body)
}

// serveArtifact streams a stored artifact, or answers a pointer with 204
// and where it is.
func serveArtifact(w http.ResponseWriter, a *model.Artifact, body io.ReadCloser) {
	hd := w.Header()
	hd.Set("Cache-Control", "private, no-store")
	if a.SHA256 != "" {
		hd.Set(agentapi.HeaderSHA256, a.SHA256)
		hd.Set("ETag", `"`+a.SHA256+`"`)
	}
	if body == nil {
		hd.Set(agentapi.HeaderPointer, a.Pointer)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	defer body.Close()
	hd.Set("Content-Type", a.ContentType)
	hd.Set("Content-Length", strconv.FormatInt(a.Size, 10))
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(a.Name)}))
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, body)
}

// attemptOf reads ?attempt=N.
func attemptOf(w http.ResponseWriter, r *http.Request) (int, bool) {
	attempt, err := strconv.Atoi(r.URL.Query().Get("attempt"))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, string(platform.CodeInvalid), "give the attempt number of the claim: ?attempt=N")
		return 0, false
	}
	return attempt, true
}

func (h *Handler) agentPutArtifact(w http.ResponseWriter, r *http.Request) {
	attempt, ok := attemptOf(w, r)
	if !ok {
		return
	}
	up, err := upload(w, r)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, string(platform.CodeInvalid), err.Error())
		return
	}
	a, err := h.d.Platform.Artifacts.WorkerPublishArtifact(r.Context(), r.PathValue("id"), attempt, up)
	if err != nil {
		writeArtifactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, artifactJSON(a))
}

func (h *Handler) agentPointer(w http.ResponseWriter, r *http.Request) {
	var req agentapi.PointerRequest
	if !decode(w, r, &req) {
		return
	}
	a, err := h.d.Platform.Artifacts.WorkerPublishPointer(r.Context(), r.PathValue("id"), req.Attempt, platform.ArtifactPointer{
		Name: req.Name, URL: req.URL, Size: req.Size, SHA256: req.SHA256, ContentType: req.ContentType})
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, artifactJSON(a))
}

func (h *Handler) agentInput(w http.ResponseWriter, r *http.Request) {
	attempt, ok := attemptOf(w, r)
	if !ok {
		return
	}
	a, body, err := h.d.Platform.Artifacts.WorkerOpenInput(r.Context(), r.PathValue("id"), attempt, r.PathValue("name"))
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	serveArtifact(w, a, body)
}
