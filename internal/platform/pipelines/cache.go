package pipelines

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
)

// cacheInput is an input as the cache compares it: by content hash where
// the artifact's is known, else by the run and name it comes from.
type cacheInput struct {
	Name     string `json:"name"`
	SHA256   string `json:"sha256,omitempty"`
	TaskID   string `json:"taskId,omitempty"`
	Artifact string `json:"artifact,omitempty"`
}

// cacheKey digests what decides a step's result: its code state (command,
// repository, commit, diff, entry point, working directory, packages,
// image), its parameters and environment after templating, and its
// inputs. Two steps of the same name and pipeline with the same key would
// compute the same thing.
func (s *Pipelines) cacheKey(ctx context.Context, tenantID string, spec model.TaskSpec) (string, error) {
	var ins []cacheInput
	for _, in := range spec.Inputs {
		ci := cacheInput{Name: in.Name, TaskID: in.TaskID, Artifact: in.Artifact}
		if s.hashes != nil {
			h, ok, err := s.hashes(ctx, tenantID, in.TaskID, in.Artifact)
			if err != nil {
				return "", fmt.Errorf("read the hash of artifact %s of task %s: %w", in.Artifact, in.TaskID, err)
			}
			if ok && h != "" {
				ci = cacheInput{Name: in.Name, SHA256: h}
			}
		}
		ins = append(ins, ci)
	}
	spec.Inputs = nil
	b, err := json.Marshal(struct {
		Spec   model.TaskSpec `json:"spec"`
		Inputs []cacheInput   `json:"inputs"`
	}{spec, ins})
	if err != nil {
		return "", fmt.Errorf("digest a step: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
