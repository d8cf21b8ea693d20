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

// ProjectRequired is the refusal of work that names no project when the
// caller has no default project. Its reason (ReasonProjectRequired) lets
// a channel whose way of naming the project differs (the CLI's --project
// flag) say it in its own words.
func ProjectRequired(what string) *Error {
	e := Invalid("say which project %s: give the project field, or set your default project with 'klique project use NAME'", what)
	e.Reason = ReasonProjectRequired
	return e
}
