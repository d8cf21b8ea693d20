package estate_test

import (
	"reflect"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/model"
)

// changeKey names a change for comparisons: "update pool k8s".
func changeKey(c estate.Change) string { return string(c.Action) + " " + c.Kind + " " + c.ID }

func indexOf(cs []estate.Change, action estate.Action, id string) int {
	for i, c := range cs {
		if c.Action == action && c.ID == id {
			return i
		}
	}
	return -1
}

func TestDiff(t *testing.T) {
	t.Parallel()

	t.Run("an estate compared with its clone has no changes", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		if cs := estate.Diff(e, e.Clone()); len(cs) != 0 {
			t.Fatalf("changes:%s", estatetest.ChangeList(cs))
		}
	})

	t.Run("bookkeeping fields and empty versus nil collections are not changes", func(t *testing.T) {
		t.Parallel()
		from := baseEstate()
		to := from.Clone()
		to.Pools[1].Labels = map[string]string{}
		to.Pools[1].ProfileOrder = []string{}
		to.Pools[1].UpdatedAt = estatetest.Now
		to.ComputeResources[0].Env = map[string]string{}
		to.ComputeResources[0].Mounts = []string{}
		to.Profiles[0].TenantID = "other"
		to.Groups[0].CreatedAt = estatetest.Now
		if cs := estate.Diff(from, to); len(cs) != 0 {
			t.Fatalf("changes:%s", estatetest.ChangeList(cs))
		}
	})

	t.Run("creates, updates and deletes are listed with the changed fields", func(t *testing.T) {
		t.Parallel()
		from := baseEstate()
		to := from.Clone()
		to.GPUClasses = append(to.GPUClasses, &model.GPUClass{ID: "c-b200", Name: "b200", Currency: "USD"})
		k8s := to.PoolByName("k8s")
		k8s.CapacityGPUs = 24
		k8s.Description = "bigger"
		k8s.Labels["rack"] = "r2"
		to.ProfileByName("eight").GPUClassID = ""
		to.ProfileByName("eight").MinGPUMemoryGB = 80
		policyOf(to, "vision").Budget = nil
		to.ComputeResource("cr-r1").Env = map[string]string{"HF_HOME": "/data/hf"}
		to.ComputeResource("cr-r1").Mounts = []string{"/data/hf:/data/hf"}
		to.ComputeResource("cr-v1").Image = "python:3.12"
		to.Projects = to.Projects[:1]

		cs := estate.Diff(from, to)
		got := map[string][]string{}
		for _, c := range cs {
			got[changeKey(c)] = c.Fields
		}
		want := map[string][]string{
			"create gpu_class c-b200":           nil,
			"update pool p-k8s":                 {"description", "capacityGPUs", "labels"},
			"update profile pr-eight":           {"gpuClassID", "minGPUMemoryGB"},
			"update resource_policy pol-vision": {"budget"},
			"update compute_resource cr-r1":     {"env", "mounts"},
			"update compute_resource cr-v1":     {"image"},
			"delete project prj-shared":         nil,
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("changes %v\nwant %v", got, want)
		}
		for _, c := range cs {
			switch c.ID {
			case "p-k8s":
				if s := c.String(); s != "update pool k8s (description, capacityGPUs, labels)" {
					t.Errorf("String() = %q", s)
				}
				if c.Object.(*model.Pool).CapacityGPUs != 24 {
					t.Errorf("an update's Object is the object after the change")
				}
			case "prj-shared":
				if c.Object.(*model.Project).Name != "shared" {
					t.Errorf("a delete's Object is the object before it")
				}
			case "pol-vision":
				if c.Name != "of group vision" || c.String() != "update resource policy of group vision (budget)" {
					t.Errorf("policy change named %q, String() %q", c.Name, c.String())
				}
			}
		}
	})

	t.Run("compute resources are named with their group", func(t *testing.T) {
		t.Parallel()
		from := baseEstate()
		to := from.Clone()
		to.ComputeResource("cr-v1").Description = "for vision"
		cs := estate.Diff(from, to)
		if len(cs) != 1 || cs[0].String() != `update compute resource "1 GPU" of group vision (description)` {
			t.Fatalf("changes:%s", estatetest.ChangeList(cs))
		}
	})

	t.Run("created objects come after what they refer to", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		cs := estate.Diff(&estate.Estate{}, e)
		if len(cs) != 2+3+4+2+2+4+2 {
			t.Fatalf("%d changes, want one create per object:%s", len(cs), estatetest.ChangeList(cs))
		}
		before := [][2]string{
			{"c-h100", "p-k8s"},        // a class before a pool of its GPUs
			{"c-h100", "pr-eight"},     // a class before a profile asking for it
			{"p-k8s", "pr-one"},        // a pool before a profile linking it
			{"g-vision", "pol-vision"}, // a group before its policy
			{"pol-vision", "cr-v1"},    // a policy before its compute resources
			{"pr-one", "cr-v1"},        // a profile before its compute resources
			{"g-research", "prj-fraud"},
		}
		for _, b := range before {
			i, j := indexOf(cs, estate.Create, b[0]), indexOf(cs, estate.Create, b[1])
			if i < 0 || j < 0 || i > j {
				t.Errorf("create %s at %d, create %s at %d: want the first before the second", b[0], i, b[1], j)
			}
		}
	})

	t.Run("deletes put compute resources first and referenced objects last", func(t *testing.T) {
		t.Parallel()
		from := baseEstate()
		cs := estate.Diff(from, &estate.Estate{})
		if len(cs) != 19 {
			t.Fatalf("%d changes, want 19:%s", len(cs), estatetest.ChangeList(cs))
		}
		for i := range 4 {
			if cs[i].Kind != estate.KindComputeResource {
				t.Fatalf("change %d is %s; compute resources are deleted first:%s", i, cs[i], estatetest.ChangeList(cs))
			}
		}
		before := [][2]string{
			{"cr-v1", "pol-vision"},
			{"cr-r1", "pr-one"},
			{"prj-fraud", "g-research"},
			{"pol-research", "g-research"},
			{"pr-one", "p-k8s"},
			{"pr-eight", "c-h100"},
			{"p-metal", "c-a100"},
		}
		for _, b := range before {
			i, j := indexOf(cs, estate.Delete, b[0]), indexOf(cs, estate.Delete, b[1])
			if i < 0 || j < 0 || i > j {
				t.Errorf("delete %s at %d, delete %s at %d: want the first before the second", b[0], i, b[1], j)
			}
		}
	})

	t.Run("a pool is deleted after the profile that linked it is updated", func(t *testing.T) {
		t.Parallel()
		from := baseEstate()
		to := from.Clone()
		to.ProfileByName("one-gpu").Pools = []string{"p-k8s"}
		to.Pools = []*model.Pool{to.PoolByName("k8s"), to.PoolByName("cloud")}
		cs := estate.Diff(from, to)
		u, d := indexOf(cs, estate.Update, "pr-one"), indexOf(cs, estate.Delete, "p-metal")
		if u < 0 || d < 0 || u > d {
			t.Fatalf("update pr-one at %d, delete p-metal at %d:%s", u, d, estatetest.ChangeList(cs))
		}
	})

	t.Run("a class created for a pool moved to it comes before the pool's update", func(t *testing.T) {
		t.Parallel()
		from := baseEstate()
		to := from.Clone()
		to.GPUClasses = append(to.GPUClasses, &model.GPUClass{ID: "c-b200", Name: "b200", Currency: "USD"})
		to.PoolByName("metal").GPUClassID = "c-b200"
		cs := estate.Diff(from, to)
		c, u := indexOf(cs, estate.Create, "c-b200"), indexOf(cs, estate.Update, "p-metal")
		if c < 0 || u < 0 || c > u {
			t.Fatalf("create c-b200 at %d, update p-metal at %d:%s", c, u, estatetest.ChangeList(cs))
		}
	})
}

func TestOrders(t *testing.T) {
	t.Parallel()

	names := func(ps []*model.Profile) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}

	t.Run("profiles on a pool come in the pool's order, then by name", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		e.PoolByName("k8s").ProfileOrder = []string{"pr-multi", "pr-gone", "pr-one", "pr-multi"}
		got := names(e.ProfilesOnPool("p-k8s"))
		if want := []string{"multi", "one-gpu", "big-mem", "eight"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("ProfilesOnPool = %v, want %v", got, want)
		}
	})

	t.Run("profiles on a pool without an order come by name", func(t *testing.T) {
		t.Parallel()
		got := names(baseEstate().ProfilesOnPool("p-k8s"))
		if want := []string{"big-mem", "eight", "multi", "one-gpu"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("ProfilesOnPool = %v, want %v", got, want)
		}
	})

	t.Run("a pool nothing links has no profiles", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		e.Pools = append(e.Pools, &model.Pool{ID: "p-new", Name: "new"})
		if got := e.ProfilesOnPool("p-new"); len(got) != 0 {
			t.Fatalf("ProfilesOnPool = %v", names(got))
		}
		if got := e.ProfilesOnPool("p-unknown"); len(got) != 0 {
			t.Fatalf("ProfilesOnPool of an unknown pool = %v", names(got))
		}
	})

	t.Run("compute resources of a profile come in its queuing order, then by group name", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		e.Groups = append(e.Groups, &model.Group{ID: "g-alpha", Name: "alpha"}, &model.Group{ID: "g-zeta", Name: "zeta"})
		e.Policies = append(e.Policies,
			&model.ResourcePolicy{ID: "pol-alpha", GroupID: "g-alpha", LimitGPUs: 4, AlertThresholdPercent: 80},
			&model.ResourcePolicy{ID: "pol-zeta", GroupID: "g-zeta", LimitGPUs: 4, AlertThresholdPercent: 80})
		e.ComputeResources = append(e.ComputeResources,
			&model.ComputeResource{ID: "cr-z1", Name: "1 GPU", PolicyID: "pol-zeta", ProfileID: "pr-one"},
			&model.ComputeResource{ID: "cr-a1", Name: "1 GPU", PolicyID: "pol-alpha", ProfileID: "pr-one"})
		e.ProfileByName("one-gpu").QueuingOrder = []string{"pol-zeta", "pol-gone", "pol-vision"}
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, cr := range e.ComputeResourcesOfProfile("pr-one") {
			got = append(got, e.PolicyGroupName(cr.PolicyID))
		}
		if want := []string{"zeta", "vision", "alpha", "research"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("ComputeResourcesOfProfile = %v, want %v", got, want)
		}
	})

	t.Run("Normalize drops order entries that point at nothing", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		// metal is linked only from one-gpu; multi does not list metal; pr-gone
		// does not exist; one-gpu is listed twice.
		e.PoolByName("metal").ProfileOrder = []string{"pr-gone", "pr-multi", "pr-one", "pr-one"}
		// research and vision are connected to one-gpu; the research policy
		// is listed twice and a deleted policy once.
		e.ProfileByName("one-gpu").QueuingOrder = []string{"pol-research", "pol-gone", "pol-vision", "pol-research"}
		// eight has only research connected.
		e.ProfileByName("eight").QueuingOrder = []string{"pol-vision", "pol-research"}
		e.Normalize()
		if got := e.PoolByName("metal").ProfileOrder; !reflect.DeepEqual(got, []string{"pr-one"}) {
			t.Errorf("metal order %v, want [pr-one]", got)
		}
		if got := e.ProfileByName("one-gpu").QueuingOrder; !reflect.DeepEqual(got, []string{"pol-research", "pol-vision"}) {
			t.Errorf("one-gpu order %v, want [pol-research pol-vision]", got)
		}
		if got := e.ProfileByName("eight").QueuingOrder; !reflect.DeepEqual(got, []string{"pol-research"}) {
			t.Errorf("eight order %v, want [pol-research]", got)
		}
	})

	t.Run("Normalize drops a profile from a pool's order once it is unlinked", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		e.PoolByName("k8s").ProfileOrder = []string{"pr-one", "pr-eight"}
		e.ProfileByName("one-gpu").Pools = []string{"p-metal"}
		e.Normalize()
		if got := e.PoolByName("k8s").ProfileOrder; !reflect.DeepEqual(got, []string{"pr-eight"}) {
			t.Fatalf("k8s order %v, want [pr-eight]", got)
		}
	})

	t.Run("PoolsOfGroup lists every pool a group can reach once", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		got := e.PoolsOfGroup("g-research")
		// research: "1 GPU" (k8s, metal), "8 GPUs" (k8s, cloud), "multi-node" (k8s), by compute resource name.
		if want := []string{"p-k8s", "p-metal", "p-cloud"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("PoolsOfGroup = %v, want %v", got, want)
		}
		if got := e.PoolsOfGroup("g-gone"); got != nil {
			t.Fatalf("PoolsOfGroup of an unknown group = %v", got)
		}
	})
}

func TestClone(t *testing.T) {
	t.Parallel()
	e := baseEstate()
	e.ComputeResource("cr-r1").Env = map[string]string{"HF_HOME": "/data/hf"}
	e.ComputeResource("cr-r1").Mounts = []string{"/data/hf:/data/hf"}
	orig := e.Clone()
	c := e.Clone()
	c.ComputeResource("cr-r1").Env["HF_HOME"] = "/elsewhere"
	c.ComputeResource("cr-r1").Mounts[0] = "/elsewhere:/elsewhere"
	c.PoolByName("k8s").Labels["site"] = "dc2"
	c.PoolByName("k8s").ProfileOrder = append(c.PoolByName("k8s").ProfileOrder, "x")
	c.ProfileByName("one-gpu").Pools[0] = "p-cloud"
	policyOf(c, "vision").Budget.MilliHours = 1
	c.Groups[0].Name = "renamed"
	if cs := estate.Diff(orig, e); len(cs) != 0 {
		t.Fatalf("changing a clone changed the original:%s", estatetest.ChangeList(cs))
	}
	if got := e.ComputeResource("cr-r1"); got.Env["HF_HOME"] != "/data/hf" || got.Mounts[0] != "/data/hf:/data/hf" {
		t.Fatalf("changing a clone changed the original's run settings: %+v", got)
	}
}
