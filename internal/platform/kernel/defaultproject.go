package kernel

import (
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// DefaultProject is the project a caller's model call or task is for when
// they name none, on every channel: the project their credential is scoped
// to; else the default they set ('klique project use', setDefaultProject),
// while they may still use it; else their groups' only project, when their
// groups have exactly one. Projects open to every group do not count
// towards "only": they are no one's in particular, and a member with one
// group project and an open one means the group's. nil when none of these
// decides: the caller must say which.
func DefaultProject(e *estate.Estate, p *identity.Principal) *model.Project {
	if p.ProjectID != "" {
		return e.Project(p.ProjectID)
	}
	if p.DefaultProjectID != "" {
		if pr := e.Project(p.DefaultProjectID); pr != nil && UsesProject(p, pr) {
			return pr
		}
	}
	var only *model.Project
	for _, pr := range e.Projects {
		if pr.GroupID == "" || !p.InGroup(pr.GroupID) {
			continue
		}
		if only != nil {
			return nil
		}
		only = pr
	}
	return only
}

// GiveTheProject is how a refusal for want of a project tells the caller
// to name one, in the words of the API's inputs; a channel whose way of
// naming it differs (the CLI's --project flag) puts its own in its place.
const GiveTheProject = "give the project field"
