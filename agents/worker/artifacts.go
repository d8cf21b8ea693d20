package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/model"
)

// Environment variables of artifacts and inputs (docs/worker.md).
const (
	// EnvArtifactsDir is a directory whose files the worker uploads as
	// the run's artifacts when the attempt ends (name: the path under it).
	EnvArtifactsDir = "KLIQUE_ARTIFACTS_DIR"
	// EnvArtifactsURL takes PUT <url>/<name> with the bytes, uploaded
	// through the worker at once (the SDK's run.upload_artifact).
	EnvArtifactsURL = "KLIQUE_ARTIFACTS_URL"
	// EnvInputsFile is a JSON object: input name → path (or, for a
	// pointer input, its URL).
	EnvInputsFile = "KLIQUE_INPUTS_FILE"
)

// InputEnvName is the variable of an input (model.InputEnvName).
func InputEnvName(name string) string { return model.InputEnvName(name) }

// fetchInputs downloads the task's inputs into its directory before it
// starts, checking each one's hash, and returns their variables and the
// inputs file. A pointer input is passed as its URL, not downloaded.
func (t *task) fetchInputs() (map[string]string, error) {
	env := map[string]string{}
	paths := map[string]string{}
	for _, in := range t.a.Inputs {
		base := path.Base(in.Artifact)
		dst := filepath.Join(t.dir, "inputs", safeName(in.Name), safeName(base))
		pointer, err := t.w.cfg.Client.FetchInput(t.ctx, t.a.TaskID, t.a.Attempt, in.Name, dst)
		if err != nil {
			return nil, fmt.Errorf("input %s (artifact %s of run %s): %w", in.Name, in.Artifact, in.TaskID, err)
		}
		v := dst
		if pointer != "" {
			v = pointer
			t.workerLine("input %s is a pointer: %s", in.Name, pointer)
		} else {
			t.workerLine("input %s: artifact %s of run %s fetched to %s", in.Name, in.Artifact, in.TaskID, dst)
		}
		env[InputEnvName(in.Name)] = v
		paths[in.Name] = v
	}
	file := filepath.Join(t.dir, "inputs.json")
	b, err := json.MarshalIndent(paths, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	env[EnvInputsFile] = file
	env[EnvArtifactsDir] = t.artifactsDir()
	return env, os.MkdirAll(t.artifactsDir(), 0o755)
}

func (t *task) artifactsDir() string { return filepath.Join(t.dir, "artifacts") }

// uploadArtifacts uploads every regular file under the task's artifacts
// directory when the attempt ends, in name order. A file that cannot be
// uploaded is said in the task's log; the others still go.
func (t *task) uploadArtifacts() {
	dir := t.artifactsDir()
	var names []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err == nil {
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(names)
	for _, name := range names {
		ctype := mime.TypeByExtension(path.Ext(name))
		res, err := t.w.cfg.Client.PutArtifact(t.ctx, t.a.TaskID, t.a.Attempt, name, filepath.Join(dir, filepath.FromSlash(name)), ctype)
		if err != nil {
			t.workerLine("artifact %s was not uploaded: %v", name, err)
			continue
		}
		t.workerLine("artifact %s uploaded (%d bytes, sha256 %s)", name, res.Size, res.SHA256)
	}
}

// artifactHandler is the task's local upload endpoint: the body is spooled
// into the task's directory and uploaded through the agent API before the
// answer, so the SDK learns at once whether it was kept.
func (t *task) artifactHandler(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if msg := model.ArtifactNameProblem(name); msg != "" {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	spool, err := os.CreateTemp(t.dir, ".upload-*")
	if err != nil {
		http.Error(w, "spool the upload: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer os.Remove(spool.Name())
	_, err = io.Copy(spool, r.Body)
	if cerr := spool.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		http.Error(w, "read the upload: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := t.w.cfg.Client.PutArtifact(r.Context(), t.a.TaskID, t.a.Attempt, name, spool.Name(), r.Header.Get("Content-Type"))
	if err != nil {
		status := http.StatusBadGateway
		var e *client.Error
		if errors.As(err, &e) && e.Status >= 400 && e.Status < 500 {
			status = e.Status
		}
		http.Error(w, strings.TrimSpace(err.Error()), status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(res)
}

// uploads routes PUT /artifacts/{token}/{name...} of the local endpoint to
// the task whose token it is.
type uploads struct {
	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
}

func (u *uploads) set(token string, h http.HandlerFunc) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.handlers == nil {
		u.handlers = map[string]http.HandlerFunc{}
	}
	if h == nil {
		delete(u.handlers, token)
		return
	}
	u.handlers[token] = h
}

func (u *uploads) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	h := u.handlers[r.PathValue("token")]
	u.mu.Unlock()
	if h == nil {
		http.Error(w, "no running task has this artifacts URL", http.StatusNotFound)
		return
	}
	h(w, r)
}
