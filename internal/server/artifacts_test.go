package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/store/pgtest"
)

// artifactMax is the stored limit of these tests' servers: more than
// their KLIQUE_MAX_BODY_BYTES (1 MiB), so an artifact between the two
// shows uploads are bounded by the artifact limit alone.
const artifactMax = 2 << 20

func withArtifactMax(n int64) serverOption {
	return func(c *config.Config) { c.Artifacts.MaxBytes = n }
}

// Artifacts over the public endpoint and GraphQL on loopback, on SQLite
// and PostgreSQL: round trip with hash, refusals that keep nothing,
// replacement, pointers, who may read and publish, inputs at enqueue.
func TestArtifacts(t *testing.T) {
	t.Parallel()
	t.Run("on SQLite", func(t *testing.T) {
		t.Parallel()
		runArtifacts(t, startServer(t, withArtifactMax(artifactMax)))
	})
	t.Run("on PostgreSQL", func(t *testing.T) {
		t.Parallel()
		runArtifacts(t, startServer(t, withArtifactMax(artifactMax), withDatabaseURL(pgtest.RequirePostgresURL(t))))
	})
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// blobFiles counts the stored blobs under the server's data directory.
func blobFiles(t *testing.T, ts *testServer) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(ts.cfg.ArtifactDir(), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

func runArtifacts(t *testing.T, ts *testServer) {
	f := newFixture(t, ts)
	task := f.id(t, "task")
	url := func(name string) string { return ts.url + "/api/v1/tasks/" + task + "/artifacts/" + name }
	put := func(t *testing.T, cred, name string, body io.Reader, headers map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, url(name), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+cred)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		return ts.send(t, req)
	}
	want := func(t *testing.T, resp *http.Response, body string, status int, words ...string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
		}
		for _, w := range words {
			if !strings.Contains(body, w) {
				t.Fatalf("answer lacks %q: %s", w, body)
			}
		}
	}
	weights := bytes.Repeat([]byte("weights!"), 1000)

	t.Run("an upload comes back byte for byte with its hash", func(t *testing.T) {
		resp, body := put(t, f.alice, "model/weights.bin", bytes.NewReader(weights),
			map[string]string{"Content-Type": "application/x-safetensors", "X-Klique-SHA256": sum(weights)})
		want(t, resp, body, http.StatusCreated, sum(weights), `"size":8000`)
		resp, got := ts.get(t, "/api/v1/tasks/"+task+"/artifacts/model/weights.bin", f.alice)
		want(t, resp, "", http.StatusOK)
		if got != string(weights) {
			t.Fatalf("downloaded %d bytes that differ from the %d uploaded", len(got), len(weights))
		}
		h := resp.Header
		if h.Get("X-Klique-SHA256") != sum(weights) || h.Get("ETag") != `"`+sum(weights)+`"` || h.Get("Content-Length") != "8000" ||
			h.Get("Content-Type") != "application/x-safetensors" || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") ||
			!strings.Contains(h.Get("Content-Disposition"), "weights.bin") {
			t.Fatalf("headers %v", h)
		}
	})

	t.Run("a Content-Digest header is checked like X-Klique-SHA256", func(t *testing.T) {
		report := []byte(`{"auc": 0.93}`)
		d := sha256.Sum256(report)
		resp, body := put(t, f.alice, "report.json", bytes.NewReader(report),
			map[string]string{"Content-Digest": "sha-256=:" + base64.StdEncoding.EncodeToString(d[:]) + ":"})
		want(t, resp, body, http.StatusCreated)
	})

	t.Run("a body whose hash differs is refused and nothing is kept", func(t *testing.T) {
		before := blobFiles(t, ts)
		resp, body := put(t, f.alice, "bad.bin", strings.NewReader("what arrived"), map[string]string{"X-Klique-SHA256": sum([]byte("what was sent"))})
		want(t, resp, body, http.StatusBadRequest, "nothing was kept", sum([]byte("what arrived")))
		resp, _ = ts.get(t, "/api/v1/tasks/"+task+"/artifacts/bad.bin", f.alice)
		want(t, resp, "", http.StatusNotFound)
		if after := blobFiles(t, ts); after != before {
			t.Fatalf("%d blobs after a refused upload, %d before", after, before)
		}
	})

	t.Run("an artifact over the limit is refused, saying to publish a pointer, and nothing is kept", func(t *testing.T) {
		before := blobFiles(t, ts)
		big := bytes.Repeat([]byte("x"), artifactMax+1)
		resp, body := put(t, f.alice, "huge.bin", bytes.NewReader(big), nil)
		want(t, resp, body, http.StatusRequestEntityTooLarge, "KLIQUE_ARTIFACT_MAX_BYTES", "as a pointer")
		// Without a declared length the limit holds as the bytes arrive.
		resp, body = put(t, f.alice, "huge.bin", io.MultiReader(bytes.NewReader(big)), nil)
		want(t, resp, body, http.StatusRequestEntityTooLarge, "as a pointer")
		resp, _ = ts.get(t, "/api/v1/tasks/"+task+"/artifacts/huge.bin", f.alice)
		want(t, resp, "", http.StatusNotFound)
		if after := blobFiles(t, ts); after != before {
			t.Fatalf("%d blobs after refused uploads, %d before", after, before)
		}
		// Larger than KLIQUE_MAX_BODY_BYTES, within the artifact limit.
		mid := bytes.Repeat([]byte("m"), 3<<19)
		resp, body = put(t, f.alice, "mid.bin", bytes.NewReader(mid), nil)
		want(t, resp, body, http.StatusCreated, sum(mid))
	})

	t.Run("a second upload of a name replaces the first and its bytes", func(t *testing.T) {
		before := blobFiles(t, ts)
		v2 := []byte("weights, version two")
		resp, body := put(t, f.alice, "model/weights.bin", bytes.NewReader(v2), nil)
		want(t, resp, body, http.StatusCreated, sum(v2))
		resp, got := ts.get(t, "/api/v1/tasks/"+task+"/artifacts/model/weights.bin", f.alice)
		want(t, resp, got, http.StatusOK)
		if got != string(v2) {
			t.Fatalf("downloaded %q", got)
		}
		if after := blobFiles(t, ts); after != before {
			t.Fatalf("%d blobs after a replacement, %d before: the old bytes were not removed", after, before)
		}
		d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { artifacts { name } } }`, map[string]any{"id": task})
		if names := artifactNames(d); strings.Join(names, ",") != "mid.bin,model/weights.bin,report.json" {
			t.Fatalf("artifacts %v", names)
		}
	})

	t.Run("a pointer is listed with where it is and is not downloaded", func(t *testing.T) {
		d := ts.mustGQL(t, f.alice, `mutation($in: PublishArtifactPointerInput!) { publishArtifactPointer(input: $in) { name pointer size downloadUrl } }`,
			map[string]any{"in": map[string]any{"task": task, "name": "checkpoints", "url": "s3://ml-research-artifacts/fraud-models/ckpt", "size": 5 << 30}})
		if str(d, "publishArtifactPointer", "pointer") != "s3://ml-research-artifacts/fraud-models/ckpt" || path(d, "publishArtifactPointer", "downloadUrl") != nil {
			t.Fatalf("pointer %v", d)
		}
		resp, _ := ts.get(t, "/api/v1/tasks/"+task+"/artifacts/checkpoints", f.alice)
		want(t, resp, "", http.StatusNoContent)
		if resp.Header.Get("X-Klique-Pointer") != "s3://ml-research-artifacts/fraud-models/ckpt" {
			t.Fatalf("headers %v", resp.Header)
		}
		res := ts.gql(t, gqlRequest{Credential: f.alice, Query: `mutation { publishArtifactPointer(input: {task: "` + task + `", name: "x", url: "not a url"}) { name } }`})
		if res.code() != "BAD_USER_INPUT" {
			t.Fatalf("a bad pointer: %s %s", res.code(), res.Raw)
		}
	})

	t.Run("the GraphQL list gives size, hash and a download link that works", func(t *testing.T) {
		d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { artifacts { name size sha256 contentType pointer downloadUrl createdAt } } }`,
			map[string]any{"id": task})
		for _, v := range path(d, "task", "artifacts").([]any) {
			a := v.(map[string]any)
			if a["name"] != "report.json" {
				continue
			}
			if a["sha256"] != sum([]byte(`{"auc": 0.93}`)) || a["size"] != float64(13) || a["pointer"] != nil {
				t.Fatalf("report.json %v", a)
			}
			resp, got := ts.get(t, a["downloadUrl"].(string), f.alice)
			want(t, resp, got, http.StatusOK)
			if got != `{"auc": 0.93}` {
				t.Fatalf("downloaded %q", got)
			}
			return
		}
		t.Fatalf("report.json not listed: %v", d)
	})

	t.Run("another group's member, another tenant and a stranger find nothing", func(t *testing.T) {
		for who, cred := range map[string]string{"victor (vision)": f.victor, "oscar (other tenant)": f.oscar, "olga (other tenant's admin)": f.olga} {
			resp, body := ts.get(t, "/api/v1/tasks/"+task+"/artifacts/report.json", cred)
			want(t, resp, body, http.StatusNotFound)
			if strings.Contains(body, "auc") {
				t.Fatalf("%s read the artifact", who)
			}
			resp, body = ts.get(t, "/api/v1/tasks/"+task+"/artifacts", cred)
			want(t, resp, body, http.StatusNotFound)
			resp, body = put(t, cred, "report.json", strings.NewReader("overwritten"), nil)
			want(t, resp, body, http.StatusNotFound)
			res := ts.gql(t, gqlRequest{Credential: cred, Query: `query($id: ID!) { task(id: $id) { artifacts { name } } }`, Vars: map[string]any{"id": task}})
			if strings.Contains(res.Raw, "report.json") || path(res.Data, "task") != nil {
				t.Fatalf("%s listed the artifacts: %s", who, res.Raw)
			}
		}
		resp, _ := ts.get(t, "/api/v1/tasks/"+task+"/artifacts/report.json", "")
		want(t, resp, "", http.StatusUnauthorized)
	})

	t.Run("only the run's owner publishes; who may see the run reads", func(t *testing.T) {
		for _, cred := range []string{f.viewer, f.admin} {
			resp, body := put(t, cred, "other.bin", strings.NewReader("x"), nil)
			want(t, resp, body, http.StatusForbidden)
			resp, body = ts.get(t, "/api/v1/tasks/"+task+"/artifacts/report.json", cred)
			want(t, resp, body, http.StatusOK, "auc")
		}
	})

	t.Run("bad names are refused", func(t *testing.T) {
		for _, name := range []string{"a%5Cb", "a/%2E%2E/b", "dir/"} {
			resp, body := put(t, f.alice, name, strings.NewReader("x"), nil)
			if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
				t.Fatalf("name %q: %d %s", name, resp.StatusCode, body)
			}
		}
	})

	t.Run("inputs by reference are checked at enqueue against the enqueuer", func(t *testing.T) {
		enqueue := func(cred, cr, project, artifact string) *gqlResult {
			return ts.gql(t, gqlRequest{Credential: cred, Query: `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id spec { inputs { name taskId artifact } } } }`,
				Vars: map[string]any{"in": map[string]any{"name": "evaluate", "project": project, "computeResource": cr, "command": []any{"python", "eval.py"},
					"inputs": []any{map[string]any{"name": "model", "taskId": task, "artifact": artifact}}}}})
		}
		res := enqueue(f.alice, "1 GPU", "fraud-models", "model/weights.bin")
		if len(res.Errors) > 0 || str(res.Data, "enqueueTask", "spec", "inputs", 0, "artifact") != "model/weights.bin" {
			t.Fatalf("enqueue with an input: %s", res.Raw)
		}
		res = enqueue(f.alice, "1 GPU", "fraud-models", "missing.bin")
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "missing.bin") || !strings.Contains(res.message(), task) {
			t.Fatalf("an input the run does not have: %s", res.Raw)
		}
		res = enqueue(f.victor, "1 GPU", "vision-detect", "model/weights.bin")
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "that you may read") || strings.Contains(res.Raw, "train-fraud") {
			t.Fatalf("an input of a run victor may not read: %s", res.Raw)
		}
		res = ts.gql(t, gqlRequest{Credential: f.alice, Query: `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`,
			Vars: map[string]any{"in": map[string]any{"name": "evaluate", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"true"},
				"inputs": []any{map[string]any{"name": "m", "taskId": task, "artifact": "report.json"}, map[string]any{"name": "M", "taskId": task, "artifact": "report.json"}}}}})
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "named twice") {
			t.Fatalf("two inputs of one variable: %s", res.Raw)
		}
		clone := ts.mustGQL(t, f.alice, `mutation($id: ID!) { cloneTask(id: $id) { spec { inputs { name } } } }`,
			map[string]any{"id": str(enqueue(f.alice, "1 GPU", "fraud-models", "report.json").Data, "enqueueTask", "id")})
		if str(clone, "cloneTask", "spec", "inputs", 0, "name") != "model" {
			t.Fatalf("a clone lost its inputs: %v", clone)
		}
	})
}

func artifactNames(d map[string]any) []string {
	var out []string
	for _, v := range path(d, "task", "artifacts").([]any) {
		out = append(out, v.(map[string]any)["name"].(string))
	}
	return out
}
