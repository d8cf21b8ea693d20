package llmconf_test

import (
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
)

// baseEstate is a valid estate holding what the gateway's objects name:
// groups research and vision, projects fraud (of research) and shared. The
// gateway's rules are tested as people meet them: through an estate file
// applied to such an estate, the estate's validation and its diff, with the
// steps estate's own tests take (estatetest's).
func baseEstate() *estate.Estate {
	return &estate.Estate{
		Groups: []*model.Group{
			{ID: "g-research", TenantID: "t", Name: "research"},
			{ID: "g-vision", TenantID: "t", Name: "vision"},
		},
		Projects: []*model.Project{
			{ID: "prj-fraud", TenantID: "t", Name: "fraud", GroupID: "g-research"},
			{ID: "prj-shared", TenantID: "t", Name: "shared"},
		},
	}
}
