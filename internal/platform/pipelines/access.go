package pipelines

import (
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// sees reports whether p may see a run: admins all, others their own and
// their groups' runs; a project-scoped credential only its project's. The
// same rule as a task's (kernel.SeesTask).
func sees(p *identity.Principal, r *model.PipelineRun) bool {
	if p.TenantID != r.TenantID || (p.ProjectID != "" && r.ProjectID != p.ProjectID) {
		return false
	}
	return p.IsAdmin() || r.OwnerID == p.UserID || (r.GroupID != "" && p.InGroup(r.GroupID))
}

// mayAbort: its owner, a lead of its group, or an admin (as a task's).
func mayAbort(p *identity.Principal, r *model.PipelineRun) bool {
	if !p.CanWrite() || !sees(p, r) {
		return false
	}
	return p.IsAdmin() || r.OwnerID == p.UserID || (r.GroupID != "" && p.LeadOf(r.GroupID))
}
