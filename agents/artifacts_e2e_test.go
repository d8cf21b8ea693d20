package agents_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArtifactsPassFromOneRunToTheNext runs a real control plane and a
// process-mode worker on loopback: a task writes a file into
// $KLIQUE_ARTIFACTS_DIR and publishes another through the worker's local
// endpoint (as the SDK does); both appear on its run with the right hash.
// A second task takes the first's artifact as an input by reference and
// reads it from $KLIQUE_INPUT_WEIGHTS, and writes to its pool's output
// destination (before its project's); a member of another group cannot
// enqueue with that input.
func TestArtifactsPassFromOneRunToTheNext(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, twoGroups().bareMetalWith(", outputDestination: s3://pool-bucket/out").
		project("{name: fraud-models, outputDestination: s3://project-bucket/fraud}").String())
	vic := e.member(t, "vic", "vision")
	_, logs := e.startWorker(t, "gpu-host-artifacts", "0,1")
	marker := filepath.Join(t.TempDir(), "go")

	first := e.enqueue(t, e.alice, "train", `mkdir -p "$KLIQUE_ARTIFACTS_DIR/model"
printf 'trained weights' > "$KLIQUE_ARTIFACTS_DIR/model/weights.txt"
echo "upload to $KLIQUE_ARTIFACTS_URL"
while [ ! -f `+marker+` ]; do sleep 0.05; done`)
	var d map[string]any
	d = e.waitTask(t, e.alice, first, "the task to print its upload URL", func(d map[string]any) bool {
		return strings.Contains(logText(d), "upload to http://127.0.0.1:")
	})
	uploadURL := regexp.MustCompile(`upload to (http://\S+)`).FindStringSubmatch(logText(d))[1]
	req, _ := http.NewRequest(http.MethodPut, uploadURL+"/notes/summary.txt", strings.NewReader("published while running"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), hexSum("published while running")) {
		t.Fatalf("the local upload: %d %s\nworker log:\n%s", resp.StatusCode, body, logs)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d = e.waitTask(t, e.alice, first, "the first task to complete", func(d map[string]any) bool {
		return str(d, "task", "status") == "COMPLETED"
	})
	if !strings.Contains(logText(d), "worker: artifact model/weights.txt uploaded (15 bytes") {
		t.Fatalf("the worker did not say it uploaded the artifact:\n%s", logText(d))
	}
	arts := gql(t, e.url, e.alice, `query($id: ID!) { task(id: $id) { artifacts { name size sha256 contentType downloadUrl } } }`, map[string]any{"id": first})
	got := map[string]map[string]any{}
	for _, a := range get(arts, "task", "artifacts").([]any) {
		got[str(a, "name")] = a.(map[string]any)
	}
	if w := got["model/weights.txt"]; w == nil || w["sha256"] != hexSum("trained weights") || w["size"] != 15.0 {
		t.Fatalf("artifacts %v", got)
	}
	if n := got["notes/summary.txt"]; n == nil || n["sha256"] != hexSum("published while running") || n["contentType"] != "text/plain" {
		t.Fatalf("artifacts %v", got)
	}
	dl, _ := http.NewRequest(http.MethodGet, e.url+str(got["model/weights.txt"], "downloadUrl"), nil)
	dl.Header.Set("Authorization", "Bearer "+e.alice)
	resp, err = http.DefaultClient.Do(dl)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "trained weights" {
		t.Fatalf("download: %d %q", resp.StatusCode, body)
	}

	input := map[string]any{"name": "weights", "taskId": first, "artifact": "model/weights.txt"}
	d = gql(t, e.url, e.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "evaluate", "project": "fraud-models", "computeResource": "1 GPU", "inputs": []any{input},
		"command": []any{"sh", "-c", `echo "read: $(cat "$KLIQUE_INPUT_WEIGHTS")"; cat "$KLIQUE_INPUTS_FILE"; echo "destination: $KLIQUE_OUTPUT_DESTINATION"`},
	}})
	second := str(d, "enqueueTask", "id")
	d = e.waitTask(t, e.alice, second, "the second task to read its input", func(d map[string]any) bool {
		return str(d, "task", "status") == "COMPLETED" || str(d, "task", "status") == "FAILED"
	})
	if lt := logText(d); str(d, "task", "status") != "COMPLETED" || !strings.Contains(lt, "stdout: read: trained weights") ||
		!strings.Contains(lt, `"weights": "`) || !strings.Contains(lt, "stdout: destination: s3://pool-bucket/out") {
		t.Fatalf("the second task:\n%s\nworker log:\n%s", lt, logs)
	}

	// Vic, of vision, may not read alice's run: the enqueue is refused,
	// saying why, and nothing is enqueued.
	raw := gqlRaw(t, e.url, vic, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "steal", "project": "fraud-models", "computeResource": "1 GPU", "inputs": []any{input}, "command": []any{"true"},
	}})
	if !strings.Contains(raw, "BAD_USER_INPUT") || !strings.Contains(raw, "input weights: no run") || strings.Contains(raw, `"id"`) {
		t.Fatalf("vic's enqueue with alice's artifact: %s", raw)
	}
}

func hexSum(s string) string { b := sha256.Sum256([]byte(s)); return hex.EncodeToString(b[:]) }
