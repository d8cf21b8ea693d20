package estate

import (
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate/llmconf"
)

// FollowRenames carries the renames of groups and projects from cur to e
// into the gateway's configuration, which names them: an alias rule of
// group "vision" follows the group when it becomes "computer-vision". It is
// a method of the estate because telling a rename from a deletion and a
// creation takes the ids of both estates' groups and projects.
func (e *Estate) FollowRenames(cur *Estate) {
	groups, projects := map[string]string{}, map[string]string{}
	for _, g := range cur.Groups {
		if n := e.Group(g.ID); n != nil && n.Name != g.Name {
			groups[g.Name] = n.Name
		}
	}
	for _, p := range cur.Projects {
		if n := e.Project(p.ID); n != nil && n.Name != p.Name {
			projects[p.Name] = n.Name
		}
	}
	llmconf.Rename(&e.Gateway, groups, projects)
}

// formatDuration writes a duration the shortest way Go reads it back:
// 60s as 1m, 90s as 1m30s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
