package hpc

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/agentapi"
)

func TestTemplates(t *testing.T) {
	tpl, err := NewTemplates(Slurm{}, "", map[string]string{"8 GPUs": "#!/bin/sh\n#SBATCH --gpus-per-node={{.GPUsPerNode}} -p {{.Param \"partition\"}}\nexec {{.Command}} # {{quote .Name}}\n"})
	if err != nil {
		t.Fatal(err)
	}
	d := ScriptData{Name: "it's big", JobName: jobName("it's big"), Nodes: 2, GPUsPerNode: 8, Dir: "/shared/j", Command: "klique task-run --job /shared/j/job.json",
		Params: map[string]string{"partition": "a100", "time_limit": "1:00:00"}}

	t.Run("a compute resource with its own template gets it", func(t *testing.T) {
		d := d
		d.ComputeResource = "8 GPUs"
		out, err := tpl.Render(d)
		if err != nil || out != "#!/bin/sh\n#SBATCH --gpus-per-node=8 -p a100\nexec klique task-run --job /shared/j/job.json # 'it'\\''s big'\n" {
			t.Fatalf("%q %v", out, err)
		}
	})
	t.Run("others get the built-in one, with the parameters given", func(t *testing.T) {
		out, err := tpl.Render(d)
		for _, want := range []string{"#SBATCH --job-name=klique-it_s_big\n", "#SBATCH --nodes=2\n", "#SBATCH --gres=gpu:8\n", "#SBATCH --time=1:00:00\n",
			"#SBATCH --partition=a100\n", "#SBATCH --output=/shared/j/job-%j.out\n"} {
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("lacks %q: %v\n%s", want, err, out)
			}
		}
		if strings.Contains(out, "--account") {
			t.Errorf("a parameter not given left a directive:\n%s", out)
		}
	})
	t.Run("a parameter with a line break is refused, not written as a line of the script", func(t *testing.T) {
		d := d
		d.Params = map[string]string{"partition": "a100\ntouch /tmp/pwned"}
		out, err := tpl.Render(d)
		if err == nil || !strings.Contains(err.Error(), "parameter partition holds a line break or another control character") || strings.Contains(out, "touch") {
			t.Fatalf("%q %v", out, err)
		}
	})
	t.Run("a template that does not parse is refused, naming it", func(t *testing.T) {
		if _, err := NewTemplates(PBS{}, "{{.Nodes", nil); err == nil || !strings.Contains(err.Error(), `batch template "default"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("container wrappers", func(t *testing.T) {
		a := &agentapi.Assignment{Image: "nvcr.io/nvidia/pytorch:24.01", Mounts: []string{"/data:/data:ro"}}
		for c, want := range map[string]string{
			"pyxis":       "srun --ntasks=1 --container-image=nvcr.io/nvidia/pytorch:24.01 --container-mounts=/data:/data:ro",
			"singularity": "singularity exec --nv --bind /data:/data:ro nvcr.io/nvidia/pytorch:24.01",
			"none":        "",
		} {
			r := &Runner{o: Options{Container: c}}
			if got := strings.Join(r.wrapper(a), " "); got != want {
				t.Errorf("%s: %q, want %q", c, got, want)
			}
		}
	})
}
