package graph

import (
	"net/url"
	"strings"

	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/model"
)

// ArtifactPath is where a stored artifact is downloaded, relative to the
// server: each segment of its name escaped, its '/' kept.
func ArtifactPath(taskID, name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/api/v1/tasks/" + url.PathEscape(taskID) + "/artifacts/" + strings.Join(segs, "/")
}

func taskInputs(in []*gqlmodel.TaskInputRef) []model.ArtifactInput {
	var out []model.ArtifactInput
	for _, i := range in {
		if i != nil {
			out = append(out, model.ArtifactInput{Name: i.Name, TaskID: i.TaskID, Artifact: i.Artifact})
		}
	}
	return out
}

// optional is nil for "", else a pointer to s.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
