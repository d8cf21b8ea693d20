package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/client"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/klique-ai/klique/graph"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/allocation"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// exampleTree puts the example's groups in a tree: research (40 GPUs,
// limit 64, weight 2) holds ml-research and vision and sits in company,
// which has no policy; nlp stays under the tenant.
const exampleTree = `apiVersion: klique/v1
kind: Estate
departments:
  - name: company
  - name: research
    parent: company
    description: Research labs
groups:
  - name: ml-research
    department: research
  - name: vision
    department: research
policies:
  - department: research
    reservation: 40
    limit: 64
    weight: 2
`

const departmentsQuery = `{
  departments {
    name description
    parent { name }
    departments { name }
    groups { name department { name } policy { weight limitGpus } }
    policy { reservationGpus limitGpus weight department { name } group { name } }
    reservedGpus effectiveLimitGpus
  }
}`

type departmentJSON struct {
	Name        string
	Description string
	Parent      *struct{ Name string }
	Departments []struct{ Name string }
	Groups      []struct {
		Name       string
		Department *struct{ Name string }
		Policy     *struct{ Weight, LimitGpus int }
	}
	Policy *struct {
		ReservationGpus, LimitGpus, Weight int
		Department                         *struct{ Name string }
		Group                              struct{ Name string }
	}
	ReservedGpus       int
	EffectiveLimitGpus *int
}

// query runs a GraphQL document through the executable schema as ctx's
// caller.
func query(t *testing.T, r graph.ResolverRoot, ctx context.Context, doc string, out any) {
	t.Helper()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: r}))
	srv.AddTransport(transport.POST{})
	c := client.New(srv, func(req *client.Request) { req.HTTP = req.HTTP.WithContext(ctx) })
	platformtest.Must(t, c.Post(doc, out))
}

func TestQueryDepartments(t *testing.T) {
	b, r := resolvers(t)
	b.Apply(t, []byte(exampleTree))

	t.Run("an admin reads the whole tree with each level's policy", func(t *testing.T) {
		var resp struct{ Departments []departmentJSON }
		query(t, r, b.Admin, departmentsQuery, &resp)
		got, _ := json.Marshal(resp)
		if len(resp.Departments) != 2 {
			t.Fatalf("departments %s", got)
		}
		company, research := resp.Departments[0], resp.Departments[1]
		if company.Name != "company" || company.Parent != nil || len(company.Departments) != 1 || company.Departments[0].Name != "research" ||
			len(company.Groups) != 0 || company.Policy != nil || company.ReservedGpus != 40 || company.EffectiveLimitGpus != nil {
			t.Errorf("company %s", got)
		}
		if research.Name != "research" || research.Description != "Research labs" || research.Parent == nil || research.Parent.Name != "company" ||
			len(research.Groups) != 2 || research.Groups[0].Name != "ml-research" || research.Groups[1].Name != "vision" {
			t.Errorf("research %s", got)
		}
		if p := research.Policy; p == nil || p.ReservationGpus != 40 || p.LimitGpus != 64 || p.Weight != 2 || p.Department == nil ||
			p.Department.Name != "research" || p.Group.Name != "research" {
			t.Errorf("research's policy %s", got)
		}
		if research.ReservedGpus != 40 || research.EffectiveLimitGpus == nil || *research.EffectiveLimitGpus != 64 {
			t.Errorf("research's view %s", got)
		}
		for _, g := range research.Groups {
			if g.Department == nil || g.Department.Name != "research" || g.Policy == nil || g.Policy.Weight != 1 {
				t.Errorf("group %s: %s", g.Name, got)
			}
		}
	})

	t.Run("a member sees the departments above their group and only their group in them", func(t *testing.T) {
		vic := b.User(t, "vic", model.RoleMember, "vision")
		var resp struct{ Departments []departmentJSON }
		query(t, r, vic, departmentsQuery, &resp)
		got, _ := json.Marshal(resp)
		if len(resp.Departments) != 2 || len(resp.Departments[1].Groups) != 1 || resp.Departments[1].Groups[0].Name != "vision" {
			t.Errorf("vic reads %s", got)
		}
		if strings.Contains(string(got), "ml-research") {
			t.Errorf("vic reads another group: %s", got)
		}
	})

	t.Run("groups lists teams, not departments", func(t *testing.T) {
		var resp struct {
			Groups struct {
				Edges []struct{ Node struct{ Name string } }
			}
		}
		query(t, r, b.Admin, `{ groups { edges { node { name } } } }`, &resp)
		var names []string
		for _, e := range resp.Groups.Edges {
			names = append(names, e.Node.Name)
		}
		if strings.Join(names, ",") != "ml-research,nlp,vision" {
			t.Errorf("groups %v", names)
		}
	})

	t.Run("department by name, and not found for one the caller cannot see", func(t *testing.T) {
		var resp struct{ Department *struct{ Name string } }
		query(t, r, b.Admin, `{ department(id: "research") { name } }`, &resp)
		if resp.Department == nil || resp.Department.Name != "research" {
			t.Errorf("department(research) = %+v", resp.Department)
		}
		nobody := b.User(t, "nod", model.RoleMember)
		_, err := r.Query().Department(nobody, "research")
		if err == nil {
			t.Error("a member of no group read department research")
		}
	})

	t.Run("a department head sees the teams below and splits the department's share through GraphQL", func(t *testing.T) {
		head := b.User(t, "hana", model.RoleMember, "lead:research")
		var resp struct{ Departments []departmentJSON }
		query(t, r, head, departmentsQuery, &resp)
		got, _ := json.Marshal(resp)
		if len(resp.Departments) != 2 || len(resp.Departments[1].Groups) != 2 || strings.Contains(string(got), `"nlp"`) {
			t.Errorf("the head reads %s", got)
		}
		var upd struct {
			UpdateResourcePolicy struct {
				ResourcePolicy struct{ ReservationGpus int }
			}
		}
		query(t, r, head, `mutation { updateResourcePolicy(id: "vision", input: {reservationGpus: 10}) { resourcePolicy { reservationGpus } } }`, &upd)
		if upd.UpdateResourcePolicy.ResourcePolicy.ReservationGpus != 10 {
			t.Errorf("vision reserves %d after the head's change", upd.UpdateResourcePolicy.ResourcePolicy.ReservationGpus)
		}
		if _, err := r.Mutation().UpdateResourcePolicy(head, "research", allocation.PolicyInput{LimitGPUs: ptrTo(100)}); err == nil {
			t.Error("the head changed the department's own policy")
		}
		if _, err := r.Mutation().UpdateResourcePolicy(head, "nlp", allocation.PolicyInput{LimitGPUs: ptrTo(1)}); err == nil {
			t.Error("the head changed nlp's policy, outside the department")
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestQueryPolicyTree: policyTree lists the tree depth first with each
// node's level, parent and figures, as platform.PolicyTree computes them.
func TestQueryPolicyTree(t *testing.T) {
	b, r := resolvers(t)
	b.Apply(t, []byte(exampleTree))
	type node struct {
		Name, Kind                       string
		Parent                           *string
		Level, ReservedGpus, Weight      int
		LimitGpus, EffectiveLimitGpus    *int
		HeldGpus, BorrowedGpus, LentGpus float64
		WaitingTasks                     int
	}
	doc := `{ policyTree { name kind parent level reservedGpus weight limitGpus effectiveLimitGpus heldGpus borrowedGpus lentGpus waitingTasks } }`
	var resp struct{ PolicyTree []node }
	query(t, r, b.Admin, doc, &resp)
	var got []string
	for _, n := range resp.PolicyTree {
		parent, limit, eff := "-", "-", "-"
		if n.Parent != nil {
			parent = *n.Parent
		}
		if n.LimitGpus != nil {
			limit = fmt.Sprint(*n.LimitGpus)
		}
		if n.EffectiveLimitGpus != nil {
			eff = fmt.Sprint(*n.EffectiveLimitGpus)
		}
		got = append(got, fmt.Sprintf("%d %s %s in %s reserved=%d weight=%d limit=%s/%s held=%g", n.Level, n.Kind, n.Name, parent,
			n.ReservedGpus, n.Weight, limit, eff, n.HeldGpus))
	}
	want := []string{
		"0 DEPARTMENT company in - reserved=40 weight=1 limit=-/- held=0",
		"1 DEPARTMENT research in company reserved=40 weight=2 limit=64/64 held=0",
		"2 GROUP ml-research in research reserved=16 weight=1 limit=48/48 held=0",
		"2 GROUP vision in research reserved=16 weight=1 limit=32/32 held=0",
		"0 GROUP nlp in - reserved=8 weight=1 limit=16/16 held=0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("policyTree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	resp.PolicyTree = nil
	query(t, r, b.Admin, `{ policyTree(department: "research") { name level } }`, &resp)
	if len(resp.PolicyTree) != 3 || resp.PolicyTree[0].Name != "research" || resp.PolicyTree[0].Level != 0 || resp.PolicyTree[2].Level != 1 {
		t.Errorf("research's subtree %+v", resp.PolicyTree)
	}
}
