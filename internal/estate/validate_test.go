package estate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/model"
)

func TestValidate(t *testing.T) {
	t.Parallel()

	t.Run("the base estate has no problems and no warnings", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		if err := e.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if ws := e.Warnings(); len(ws) > 0 {
			t.Fatalf("warnings on the base estate:%s", warningList(ws))
		}
	})

	t.Run("the example estate has no problems", func(t *testing.T) {
		t.Parallel()
		if err := exampleEstate(t).Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	t.Run("a limit of 0 pauses a group whatever its profiles' sizes, and is accepted", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		pol := policyOf(e, "research") // connected to 1-, 8- and 2x8-GPU profiles
		pol.ReservationGPUs, pol.LimitGPUs = 0, 0
		if err := e.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	t.Run("singleTenant is for bare_metal pools, whose tasks share a host", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		e.Pool("p-metal").SingleTenant = true
		if err := e.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		e.Pool("p-k8s").SingleTenant = true
		err := e.Validate()
		if err == nil || !strings.Contains(err.Error(), "singleTenant applies to bare_metal pools") {
			t.Fatalf("Validate = %v, want singleTenant refused on a kubernetes pool", err)
		}
	})

	t.Run("a limit of 0 keeps the group's reservation for when it is raised", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		policyOf(e, "research").LimitGPUs = 0 // its reservation stays 4
		if err := e.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	t.Run("a compute resource with an image, variables and mounts has no problems", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		cr := e.ComputeResource("cr-r1")
		cr.Image = "nvcr.io/nvidia/pytorch:24.05-py3"
		cr.Env = map[string]string{"HF_HOME": "/data/hf-cache", "NCCL_DEBUG": "WARN", "MAX_TOKENS": "4096", "_X": ""}
		cr.Mounts = []string{"/data/hf-cache:/data/hf-cache", "/datasets:/datasets:ro", "/scratch:/scratch:rw"}
		if err := e.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	t.Run("an empty estate has no problems", func(t *testing.T) {
		t.Parallel()
		if err := (&estate.Estate{}).Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	long := strings.Repeat("x", basis.MaxNameLength+1)
	tests := []struct {
		name   string
		mutate func(e *estate.Estate)
		// want are the words one problem must hold: the object and what to
		// change.
		want []string
		// problems is how many problems the change makes; 0 means one.
		problems int
	}{
		// Names.
		{
			name: "two GPU classes with one name are refused",
			mutate: func(e *estate.Estate) {
				e.GPUClasses = append(e.GPUClasses, &model.GPUClass{ID: "c-2", Name: "h100", Currency: "USD"})
			},
			want: []string{`GPU class "h100"`, "same name", "unique"},
		},
		{
			name: "two pools with one name are refused",
			mutate: func(e *estate.Estate) {
				p := *e.PoolByName("metal")
				p.ID = "p-2"
				e.Pools = append(e.Pools, &p)
			},
			want: []string{`pool "metal"`, "another pool has the same name"},
		},
		{
			name: "two profiles with one name are refused",
			mutate: func(e *estate.Estate) {
				p := *e.ProfileByName("one-gpu")
				p.ID = "pr-2"
				e.Profiles = append(e.Profiles, &p)
			},
			want: []string{`profile "one-gpu"`, "another profile has the same name"},
		},
		{
			name:   "two groups with one name are refused",
			mutate: func(e *estate.Estate) { e.Groups = append(e.Groups, &model.Group{ID: "g-2", Name: "vision"}) },
			want:   []string{`group "vision"`, "another group has the same name"},
		},
		{
			name:   "two projects with one name are refused",
			mutate: func(e *estate.Estate) { e.Projects = append(e.Projects, &model.Project{ID: "prj-2", Name: "shared"}) },
			want:   []string{`project "shared"`, "another project has the same name"},
		},
		{
			name:   "an empty pool name is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("cloud").Name = "" },
			want:   []string{`pool ""`, "name is empty"},
		},
		{
			name:   "a group name with a trailing space is refused",
			mutate: func(e *estate.Estate) { e.GroupByName("vision").Name = "vision " },
			want:   []string{`group "vision "`, "starts or ends with a space"},
		},
		{
			name:   "a profile name with a control character is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("big-mem").Name = "big\tmem" },
			want:   []string{`profile "big\tmem"`, "control or invalid character"},
		},
		{
			name:   "a project name longer than the limit is refused",
			mutate: func(e *estate.Estate) { e.ProjectByName("shared").Name = long },
			want:   []string{"project", "longer than 100 characters"},
		},
		{
			name:   "a compute resource name that is not valid UTF-8 is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-v1").Name = "1 GPU\xff" },
			want:   []string{"compute resource", `of group "vision"`, "control or invalid character"},
		},
		{
			name: "a description longer than the limit is refused",
			mutate: func(e *estate.Estate) {
				e.GroupByName("research").Description = strings.Repeat("d", basis.MaxDescriptionLength+1)
			},
			want: []string{`group "research"`, "description is longer than 2000 characters"},
		},

		// GPU classes.
		{
			name:   "a GPU class with a negative memory is refused",
			mutate: func(e *estate.Estate) { e.GPUClassByName("a100").MemoryGB = -1 },
			want:   []string{`GPU class "a100"`, "memory -1 GB", "between 0 and 10000"},
		},
		{
			name:   "a GPU class with a negative price is refused",
			mutate: func(e *estate.Estate) { e.GPUClassByName("a100").PriceMicros = -1 },
			want:   []string{`GPU class "a100"`, "price per GPU-hour must be 0 or more"},
		},
		{
			name:   "a GPU class with a currency that is not an ISO code is refused",
			mutate: func(e *estate.Estate) { e.GPUClassByName("a100").Currency = "euro" },
			want:   []string{`GPU class "a100"`, `currency "euro"`, "three-letter ISO code"},
		},

		// Pools.
		{
			name:   "a pool of an unknown kind is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").Kind = "openstack" },
			want:   []string{`pool "metal"`, `kind "openstack" is not known`, "kubernetes, bare_metal, slurm, pbs, lsf, cloud, neocloud"},
		},
		{
			name:   "a pool with a negative capacity is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").CapacityGPUs = -1 },
			want:   []string{`pool "metal"`, "capacity -1", "whole number of GPUs between 0 and"},
		},
		{
			name:   "a pool with a capacity beyond the bound is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").CapacityGPUs = estate.MaxCapacityGPUs + 1 },
			want:   []string{`pool "metal"`, "capacity 1000001"},
		},
		{
			name:   "a pool without a GPU class is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").GPUClassID = "" },
			want:   []string{`pool "metal"`, "GPU class is missing or unknown", "every pool needs the GPU class"},
		},
		{
			name:   "a pool with an unknown GPU class is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").GPUClassID = "c-gone" },
			want:   []string{`pool "metal"`, "GPU class is missing or unknown"},
		},
		{
			name:   "a pool with no GPU memory is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").GPUMemoryGB = 0 },
			want:   []string{`pool "metal"`, "GPU memory 0 GB must be between 1 and 10000", "set it on the pool or on its GPU class"},
		},
		{
			name:   "a pool with more GPU memory than the bound is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").GPUMemoryGB = estate.MaxGPUMemoryGB + 1 },
			want:   []string{`pool "metal"`, "GPU memory 10001 GB"},
		},
		{
			name:   "a pool with a region longer than the limit is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("metal").Region = long },
			want:   []string{`pool "metal"`, "region is longer than 100 characters"},
		},
		{
			name:   "a label key that starts with a dash is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("k8s").Labels["-site"] = "x" },
			want:   []string{`pool "k8s"`, `label key "-site"`, "starting with a letter or digit"},
		},
		{
			name:   "a label key with a space is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("k8s").Labels["data centre"] = "x" },
			want:   []string{`pool "k8s"`, `label key "data centre"`},
		},
		{
			name:   "a label value longer than 256 characters is refused",
			mutate: func(e *estate.Estate) { e.PoolByName("k8s").Labels["site"] = strings.Repeat("v", 257) },
			want:   []string{`pool "k8s"`, `label "site" has a value longer than 256 characters`},
		},
		{
			name: "more than 64 labels are refused",
			mutate: func(e *estate.Estate) {
				for i := range estate.MaxLabels {
					e.PoolByName("cloud").Labels = setLabel(e.PoolByName("cloud").Labels, fmt.Sprintf("k%d", i), "v")
				}
				e.PoolByName("cloud").Labels["extra"] = "v"
			},
			want: []string{`pool "cloud"`, "more than 64 labels"},
		},

		// Profiles.
		{
			name:   "a fraction that is not an eighth, a quarter or a half is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").Size = model.Size{Nodes: 1, PerNode: 300} },
			want:   []string{`profile "one-gpu"`, "0.3 is not an allowed fraction", "0.125, 0.25 or 0.5"},
		},
		{
			name:   "a size without nodes is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").Size = model.Size{Nodes: 0, PerNode: 1000} },
			want:   []string{`profile "one-gpu"`, "node count must be between 1 and 4096"},
		},
		{
			name:   "a fraction spread over several nodes is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("multi").Size = model.Size{Nodes: 2, PerNode: 500} },
			want:   []string{`profile "multi"`, "a fraction of a GPU cannot span several nodes"},
		},
		{
			name:   "a size parameter name starting with a digit is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").SizeParameter = "1gpus" },
			want:   []string{`profile "one-gpu"`, `size parameter: parameter name "1gpus"`, "must start with a letter or '_'"},
		},
		{
			name:   "a size parameter name with a space is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").SizeParameter = "gpu count" },
			want:   []string{`profile "one-gpu"`, `parameter name "gpu count"`},
		},
		{
			name:   "a profile with both a GPU class and a minimum memory is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("eight").MinGPUMemoryGB = 80 },
			want:   []string{`profile "eight"`, "give a GPU class or a minimum GPU memory, not both"},
		},
		{
			name:   "a profile with an unknown GPU class is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").GPUClassID = "c-gone" },
			want:   []string{`profile "one-gpu"`, "GPU class is unknown"},
		},
		{
			name:   "a profile with a negative minimum memory is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").MinGPUMemoryGB = -8 },
			want:   []string{`profile "one-gpu"`, "minimum GPU memory -8 GB must be between 0 and 10000"},
		},
		{
			name:   "a profile linked to a pool of another GPU class is refused",
			mutate: func(e *estate.Estate) { pr := e.ProfileByName("eight"); pr.Pools = append(pr.Pools, "p-metal") },
			want:   []string{`profile "eight"`, `cannot use pool "metal"`, "its GPUs are a100", "the profile asks for h100"},
		},
		{
			name:   "a profile linked to a pool with less memory than its minimum is refused",
			mutate: func(e *estate.Estate) { pr := e.ProfileByName("big-mem"); pr.Pools = append(pr.Pools, "p-metal") },
			want:   []string{`profile "big-mem"`, `cannot use pool "metal"`, "its GPUs have 40 GB", "needs at least 80 GB"},
		},
		{
			name:   "a multi-node profile linked to a bare-metal pool is refused",
			mutate: func(e *estate.Estate) { pr := e.ProfileByName("multi"); pr.Pools = append(pr.Pools, "p-metal") },
			want:   []string{`profile "multi"`, `cannot use pool "metal"`, "multi-node work (2x8)", "kubernetes, neocloud, slurm, pbs or lsf pool", "it is bare_metal"},
		},
		{
			name:   "a multi-node profile linked to a cloud pool is refused",
			mutate: func(e *estate.Estate) { pr := e.ProfileByName("multi"); pr.Pools = append(pr.Pools, "p-cloud") },
			want:   []string{`profile "multi"`, `cannot use pool "cloud"`, "it is cloud"},
		},
		{
			name:   "a negative time weight is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").TimeWeightMilli = -500 },
			want:   []string{`profile "one-gpu"`, "time weight -0.5 must be between 0 (exempt) and 1000"},
		},
		{
			name:   "a time weight above the bound is refused",
			mutate: func(e *estate.Estate) { e.ProfileByName("one-gpu").TimeWeightMilli = estate.MaxTimeWeightMilli + 1 },
			want:   []string{`profile "one-gpu"`, "time weight 1000.001"},
		},
		{
			name:   "a pool listed twice in a profile is refused",
			mutate: func(e *estate.Estate) { pr := e.ProfileByName("one-gpu"); pr.Pools = append(pr.Pools, "p-k8s") },
			want:   []string{`profile "one-gpu"`, `lists pool "k8s" twice`, "each pool appears once"},
		},
		{
			name:   "a profile linked to a pool that does not exist is refused",
			mutate: func(e *estate.Estate) { pr := e.ProfileByName("one-gpu"); pr.Pools = append(pr.Pools, "p-gone") },
			want:   []string{`profile "one-gpu"`, "links a pool that does not exist"},
		},

		// Resource policies.
		{
			name:   "a reservation above the limit is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "research").ReservationGPUs = 20 },
			want:   []string{`resource policy of group "research"`, "reservation 20 GPUs is above the limit 16 GPUs", "raise the limit or lower the reservation"},
		},
		{
			name:   "a negative reservation is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "research").ReservationGPUs = -1 },
			want:   []string{`resource policy of group "research"`, "reservation -1 must be a whole number of GPUs, 0 or more"},
		},
		{
			name: "a negative limit is refused",
			mutate: func(e *estate.Estate) {
				pol := policyOf(e, "vision")
				pol.ReservationGPUs, pol.LimitGPUs = -2, -1
			},
			want: []string{`resource policy of group "vision"`, "limit -1 must be a whole number of GPUs, 0 or more"},
			// The negative reservation is reported too (a profile is held
			// to a limit only once the limit is a valid one above 0).
			problems: 2,
		},
		{
			name:   "a time budget of zero hours is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "vision").Budget.MilliHours = 0 },
			want:   []string{`resource policy of group "vision"`, "time budget of 0 hours must be more than 0", "remove the budget instead"},
		},
		{
			name:   "a negative time budget is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "vision").Budget.MilliHours = -1500 },
			want:   []string{`resource policy of group "vision"`, "time budget of -1.5 hours"},
		},
		{
			name:   "a time budget per year is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "vision").Budget.Period = "year" },
			want:   []string{`resource policy of group "vision"`, `time budget period "year" must be day, week or month`},
		},
		{
			name:   "a negative low watermark is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "vision").LowWatermark = -time.Minute },
			want:   []string{`resource policy of group "vision"`, "low watermark -1m0s must be between 0 and 31 days"},
		},
		{
			name:   "an alert threshold of 0 % is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "vision").AlertThresholdPercent = 0 },
			want:   []string{`resource policy of group "vision"`, "alert threshold 0% must be between 1 and 100"},
		},
		{
			name:   "an alert threshold above 100 % is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "vision").AlertThresholdPercent = 101 },
			want:   []string{`resource policy of group "vision"`, "alert threshold 101% must be between 1 and 100"},
		},
		{
			name: "a second policy for one group is refused",
			mutate: func(e *estate.Estate) {
				e.Policies = append(e.Policies, &model.ResourcePolicy{ID: "pol-2", GroupID: "g-vision", LimitGPUs: 1, AlertThresholdPercent: 80})
			},
			want: []string{`resource policy of group "vision"`, "already has a resource policy", "a group has one policy"},
		},
		{
			name: "a policy of a group that does not exist is refused",
			mutate: func(e *estate.Estate) {
				e.Policies = append(e.Policies, &model.ResourcePolicy{ID: "pol-2", GroupID: "g-gone", LimitGPUs: 1, AlertThresholdPercent: 80})
			},
			want: []string{"resource policy", "belongs to a group that does not exist"},
		},

		// Compute resources.
		{
			name: "two compute resources of one group with one name are refused",
			mutate: func(e *estate.Estate) {
				e.ComputeResources = append(e.ComputeResources, &model.ComputeResource{ID: "cr-2", Name: "1 GPU", PolicyID: "pol-research", ProfileID: "pr-bigmem"})
			},
			want: []string{`compute resource "1 GPU" of group "research"`, "another compute resource with this name", "unique within a group"},
		},
		{
			name: "a profile connected twice to one policy is refused",
			mutate: func(e *estate.Estate) {
				e.ComputeResources = append(e.ComputeResources, &model.ComputeResource{ID: "cr-2", Name: "one more GPU", PolicyID: "pol-research", ProfileID: "pr-one"})
			},
			want: []string{`compute resource "one more GPU" of group "research"`, `profile "one-gpu" is already connected`, "connects each profile once"},
		},
		{
			name: "a profile larger than the group's limit is refused",
			mutate: func(e *estate.Estate) {
				e.ComputeResources = append(e.ComputeResources, &model.ComputeResource{ID: "cr-2", Name: "multi-node", PolicyID: "pol-vision", ProfileID: "pr-multi"})
			},
			want: []string{`compute resource "multi-node" of group "vision"`, `profile "multi" (16 GPUs) is larger than group "vision"'s limit of 8 GPUs`, "raise the limit or connect a smaller profile"},
		},
		{
			name:   "lowering a limit below a connected profile is refused",
			mutate: func(e *estate.Estate) { policyOf(e, "research").LimitGPUs = 8 },
			want:   []string{`compute resource "multi-node" of group "research"`, `profile "multi" (16 GPUs) is larger than group "research"'s limit of 8 GPUs`},
		},
		{
			name: "a compute resource of a policy that does not exist is refused",
			mutate: func(e *estate.Estate) {
				e.ComputeResources = append(e.ComputeResources, &model.ComputeResource{ID: "cr-2", Name: "lost", PolicyID: "pol-gone", ProfileID: "pr-one"})
			},
			want: []string{`compute resource "lost"`, "belongs to a resource policy that does not exist"},
		},
		{
			name: "a compute resource on a profile that does not exist is refused",
			mutate: func(e *estate.Estate) {
				e.ComputeResources = append(e.ComputeResources, &model.ComputeResource{ID: "cr-2", Name: "lost", PolicyID: "pol-vision", ProfileID: "pr-gone"})
			},
			want: []string{`compute resource "lost" of group "vision"`, "uses a profile that does not exist"},
		},

		// How the tasks of a compute resource run.
		{
			name:   "an image with a space is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Image = "pytorch/pytorch 2.3" },
			want:   []string{`compute resource "1 GPU" of group "research"`, "image", "without spaces"},
		},
		{
			name:   "an environment variable name that starts with a digit is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Env = map[string]string{"1CACHE": "/data"} },
			want:   []string{`compute resource "1 GPU" of group "research"`, `env: variable name "1CACHE"`, "not starting with a digit"},
		},
		{
			name:   "an environment variable name with a dash is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Env = map[string]string{"HF-HOME": "/data"} },
			want:   []string{`env: variable name "HF-HOME"`, "letters, digits and '_'"},
		},
		{
			name: "a variable named like a credential is refused with a pointer to the group's vault",
			mutate: func(e *estate.Estate) {
				e.ComputeResource("cr-v1").Env = map[string]string{"HF_HOME": "/data/hf", "HF_TOKEN": "anything"}
			},
			want: []string{`compute resource "1 GPU" of group "vision"`, "env: HF_TOKEN looks like a credential", "vault",
				"klique secret set HF_TOKEN --group vision"},
		},
		{
			name: "a value shaped like a credential is refused whatever the variable's name, without repeating it",
			mutate: func(e *estate.Estate) {
				e.ComputeResource("cr-r1").Env = map[string]string{"GH": "ghp_" + strings.Repeat("a", 36)}
			},
			want: []string{"env: GH looks like a credential", "keep it in a vault instead"},
		},
		{
			name: "a value longer than the bound is refused",
			mutate: func(e *estate.Estate) {
				e.ComputeResource("cr-r1").Env = map[string]string{"A": strings.Repeat("v", 8193)}
			},
			want: []string{"env: the value of A is longer than 8192 bytes"},
		},
		{
			name: "more than 256 variables are refused",
			mutate: func(e *estate.Estate) {
				env := map[string]string{}
				for i := range 257 {
					env[fmt.Sprintf("V%d", i)] = "x"
				}
				e.ComputeResource("cr-r1").Env = env
			},
			want: []string{"env sets 257 variables, more than 256"},
		},
		{
			name:   "a relative host path is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"data/hf:/data/hf"} },
			want:   []string{`compute resource "1 GPU" of group "research"`, "mounts:", `host path "data/hf" must be absolute`},
		},
		{
			name:   "a relative container path is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"/data/hf:hf"} },
			want:   []string{`container path "hf" must be absolute`},
		},
		{
			name:   "a path with a '..' component is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"/data/../etc:/etc-copy:ro"} },
			want:   []string{`host path "/data/../etc" must not hold a '..' component`},
		},
		{
			name:   "a mode other than ro or rw is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"/data:/data:rx"} },
			want:   []string{`ends in "rx"`, "ro (read-only) or rw (read-write)"},
		},
		{
			name:   "a mount without a container path is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"/data"} },
			want:   []string{"must be /host/path:/container/path, optionally followed by :ro or :rw"},
		},
		{
			name:   "a mount with a comma is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"/data:/data,readonly"} },
			want:   []string{"holds a comma"},
		},
		{
			name:   "a mount onto the container's root is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"/srv/root:/"} },
			want:   []string{"the container path cannot be /"},
		},
		{
			name:   "one container path mounted twice is refused",
			mutate: func(e *estate.Estate) { e.ComputeResource("cr-r1").Mounts = []string{"/a:/data", "/b:/data/:ro"} },
			want:   []string{"container path /data is mounted twice"},
		},
		{
			name: "more than 32 mounts are refused",
			mutate: func(e *estate.Estate) {
				for i := range 33 {
					e.ComputeResource("cr-r1").Mounts = append(e.ComputeResource("cr-r1").Mounts, fmt.Sprintf("/d%d:/d%d", i, i))
				}
			},
			want: []string{"mounts lists 33 mounts, more than 32"},
		},

		// Projects.
		{
			name:   "a project of a group that does not exist is refused",
			mutate: func(e *estate.Estate) { e.ProjectByName("fraud").GroupID = "g-gone" },
			want:   []string{`project "fraud"`, "belongs to a group that does not exist"},
		},
		{
			name:   "an output destination with spaces is refused",
			mutate: func(e *estate.Estate) { e.ProjectByName("fraud").OutputDestination = "s3://research/fraud models" },
			want:   []string{`project "fraud"`, "output destination must be a directory path or bucket URL without spaces"},
		},
		{
			name: "an output destination longer than 1000 characters is refused",
			mutate: func(e *estate.Estate) {
				e.ProjectByName("fraud").OutputDestination = "s3://" + strings.Repeat("b", 1000)
			},
			want: []string{`project "fraud"`, "at most 1000 characters"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := baseEstate()
			tc.mutate(e)
			ps := estatetest.Problems(t, e.Validate())
			if len(ps) == 0 {
				t.Fatal("Validate found no problem")
			}
			if _, ok := estatetest.FindProblem(ps, tc.want...); !ok {
				t.Fatalf("no problem holds %q; problems:%s", tc.want, estatetest.ProblemList(ps))
			}
			want := tc.problems
			if want == 0 {
				want = 1
			}
			if len(ps) != want {
				t.Fatalf("%d problems, want %d:%s", len(ps), want, estatetest.ProblemList(ps))
			}
		})
	}

	t.Run("several problems are all reported at once", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		e.PoolByName("metal").Kind = "openstack"
		e.ProfileByName("one-gpu").TimeWeightMilli = -1
		policyOf(e, "vision").AlertThresholdPercent = 0
		e.ProjectByName("fraud").OutputDestination = "a b"
		err := e.Validate()
		ps := estatetest.Problems(t, err)
		if len(ps) != 4 {
			t.Fatalf("%d problems, want 4:%s", len(ps), estatetest.ProblemList(ps))
		}
		for _, want := range []string{`pool "metal"`, `profile "one-gpu"`, `resource policy of group "vision"`, `project "fraud"`} {
			if _, ok := estatetest.FindProblem(ps, want); !ok {
				t.Errorf("no problem about %s:%s", want, estatetest.ProblemList(ps))
			}
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "4 problems: ") || strings.Count(msg, "; ") != 3 {
			t.Errorf("Error() = %q, want the 4 problems joined with '; '", msg)
		}
	})

	t.Run("a single problem reads as the object and its message", func(t *testing.T) {
		t.Parallel()
		e := baseEstate()
		e.PoolByName("metal").CapacityGPUs = -4
		err := e.Validate()
		want := `pool "metal": capacity -4 must be a whole number of GPUs between 0 and 1000000`
		if err == nil || err.Error() != want {
			t.Fatalf("Error() = %v, want %q", err, want)
		}
	})
}

func setLabel(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// A static route may name a serving app of the catalogue (built-in or the
// tenant's) instead of, or beside, its endpoints; an unknown app or one
// that serves no model is refused with what to name instead.
func TestValidateRouteApps(t *testing.T) {
	t.Parallel()
	route := func(e *estate.Estate) *model.Route {
		for _, r := range e.Gateway.Routes {
			if r.Name == "llama-70b" {
				return r
			}
		}
		t.Fatal("the example estate has no route llama-70b")
		return nil
	}
	e := exampleEstate(t)
	route(e).App, route(e).Endpoints = "vllm", nil
	if err := e.Validate(); err != nil {
		t.Fatalf("a route of app vllm without endpoints: %v", err)
	}
	route(e).Endpoints = []string{"http://10.0.3.17:8000/v1"}
	if err := e.Validate(); err != nil {
		t.Fatalf("a route with both endpoints and an app: %v", err)
	}
	for app, want := range map[string][]string{
		"nope":       {`route "llama-70b"`, `app "nope" is not in the app catalogue`, "klique app ls"},
		"jupyterlab": {`route "llama-70b"`, `app "jupyterlab" is a session app`, "name a serving app"},
	} {
		e := exampleEstate(t)
		route(e).App = app
		err := e.Validate()
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("route of app %s: %v, want %q", app, err, w)
			}
		}
	}
}
