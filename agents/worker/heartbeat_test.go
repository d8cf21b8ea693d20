package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
)

// TestAHeartbeatNeverListsMoreTasksThanTheServerTakes: a worker holding
// more tasks than one heartbeat may list sends them in several, and every
// task's lease is extended.
func TestAHeartbeatNeverListsMoreTasksThanTheServerTakes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.HeartbeatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		sizes = append(sizes, len(req.Tasks))
		for _, tk := range req.Tasks {
			seen[tk.TaskID] = true
		}
		mu.Unlock()
		if len(req.Tasks) > agentapi.MaxHeartbeatTasks {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"BAD_USER_INPUT","message":"too many tasks"}}`))
			return
		}
		resp := agentapi.HeartbeatResponse{LeaseSeconds: 60}
		if len(req.Tasks) > 0 {
			resp.Commands = []agentapi.Command{{TaskID: req.Tasks[0].TaskID, Attempt: 1, Action: agentapi.ActionStop}}
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	defer srv.Close()
	const held = 2*agentapi.MaxHeartbeatTasks + 1
	tasks := make([]agentapi.TaskHeartbeat, held)
	for i := range tasks {
		tasks[i] = agentapi.TaskHeartbeat{TaskID: fmt.Sprintf("t%06d", i), Attempt: 1}
	}
	resp, err := heartbeatAll(context.Background(), client.New(srv.URL, "kqw_test"), "w1", tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 3 || len(seen) != held || len(resp.Commands) != 3 {
		t.Fatalf("heartbeats of %v tasks, %d tasks seen, %d commands: want 3 heartbeats of at most %d covering all %d tasks",
			sizes, len(seen), len(resp.Commands), agentapi.MaxHeartbeatTasks, held)
	}
	sizes = nil
	if _, err := heartbeatAll(context.Background(), client.New(srv.URL, "kqw_test"), "w1", nil); err != nil || len(sizes) != 1 {
		t.Fatalf("with no tasks: %v heartbeats, %v", sizes, err)
	}
}
