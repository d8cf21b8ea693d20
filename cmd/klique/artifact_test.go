package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestArtifactCommands: put a file and a pointer on a run, list them, get
// the file back (its hash checked), take it as an input by reference with
// --input, and the refusals: another group's member finds nothing, a
// malformed --input is a usage error.
func TestArtifactCommands(t *testing.T) {
	const key = "klique-artifact-test-bootstrap-key-0123456789abcdefgh"
	ctx, app := startControlPlane(t, key, 120*time.Second)
	klique, ok := cliAs(t, ctx, app.URL())
	ok(key, "apply", "-f", "../../examples/estate.yaml")
	ok(key, "create", "user", "rita", "--group", "ml-research")
	ok(key, "create", "user", "vic", "--group", "vision")
	rita := strings.TrimSpace(ok(key, "create", "apikey", "--user", "rita"))
	vic := strings.TrimSpace(ok(key, "create", "apikey", "--user", "vic"))
	run := strings.TrimSpace(ok(rita, "enqueue", "-q", "--resource", "1 GPU", "--project", "fraud-models", "--", "python", "train.py"))

	dir := t.TempDir()
	src := filepath.Join(dir, "weights.bin")
	if err := os.WriteFile(src, []byte("model weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := ok(rita, "artifact", "put", run, "model/weights.bin", src); !strings.Contains(out, "13 bytes") {
		t.Fatalf("put:\n%s", out)
	}
	ok(rita, "artifact", "put", run, "checkpoints", "--pointer", "s3://bucket/ckpt", "--size", "1000000")
	out := ok(rita, "artifact", "ls", run)
	if !strings.Contains(out, "model/weights.bin") || !strings.Contains(out, "s3://bucket/ckpt") {
		t.Fatalf("ls:\n%s", out)
	}
	dst := filepath.Join(dir, "back.bin")
	ok(rita, "artifact", "get", run, "model/weights.bin", "-f", dst)
	if b, err := os.ReadFile(dst); err != nil || string(b) != "model weights" {
		t.Fatalf("get: %q %v", b, err)
	}
	if out := ok(rita, "artifact", "get", run, "checkpoints"); !strings.Contains(out, "is a pointer: s3://bucket/ckpt") {
		t.Fatalf("get of a pointer:\n%s", out)
	}

	eval := strings.TrimSpace(ok(rita, "enqueue", "-q", "--resource", "1 GPU", "--project", "fraud-models", "--input", "weights="+run+"/model/weights.bin", "--", "python", "eval.py"))
	if out = ok(rita, "get", "task", eval, "-o", "json"); !strings.Contains(out, `"artifact": "model/weights.bin"`) {
		t.Fatalf("enqueue --input:\n%s", out)
	}
	if _, errOut, code := klique(vic, "artifact", "get", run, "model/weights.bin", "-f", filepath.Join(dir, "stolen")); code != 1 || !strings.Contains(errOut, "no task") {
		t.Fatalf("vic's get: exit %d %q", code, errOut)
	}
	if _, errOut, code := klique(vic, "enqueue", "--resource", "1 GPU", "--project", "vision-detect", "--input", "w="+run+"/model/weights.bin", "--", "true"); code != 1 ||
		!strings.Contains(errOut, "input w: no run") {
		t.Fatalf("vic's enqueue with rita's artifact: exit %d %q", code, errOut)
	}
	if _, errOut, code := klique(rita, "enqueue", "--resource", "1 GPU", "--project", "fraud-models", "--input", "weights", "--", "true"); code != 2 ||
		!strings.Contains(errOut, "NAME=RUN/ARTIFACT") {
		t.Fatalf("a malformed --input: exit %d %q", code, errOut)
	}
}
