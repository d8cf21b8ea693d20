package gpu

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/agentapi"
)

// Recorded on a host with four A100 80 GB GPUs.
const listOutput = `0, GPU-3f1c2b8e-5a2d-4e1f-9c3b-1a2b3c4d5e6f, 81920
1, GPU-7d9e0f1a-2b3c-4d5e-8f9a-0b1c2d3e4f5a, 81920
2, GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d, 81920
3, GPU-9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0, 81920
`

const utilOutput = `0, 97
1, 0
2, [N/A]
3, 45
`

func TestParse(t *testing.T) {
	t.Parallel()
	gpus, err := ParseList(listOutput)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 4 || gpus[3] != (agentapi.GPU{Index: 3, UUID: "GPU-9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0", MemoryMB: 81920}) {
		t.Fatalf("gpus %+v", gpus)
	}
	util, err := ParseUtilization(utilOutput)
	if err != nil {
		t.Fatal(err)
	}
	if len(util) != 3 || util[0] != 97 || util[1] != 0 || util[3] != 45 {
		t.Fatalf("util %v (GPU 2 reports no number and is left out)", util)
	}
	for _, bad := range []string{"", "0, GPU-x", "x, GPU-x, 1"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) accepted it", bad)
		}
	}
}

func TestDeclare(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{"0,1,2,3": "0,1,2,3", "0-3": "0,1,2,3", "4-5,1": "1,4,5", " 2 ": "2"} {
		gpus, err := Declare(spec, 24576)
		if err != nil {
			t.Fatalf("Declare(%q): %v", spec, err)
		}
		var got []string
		for _, g := range gpus {
			got = append(got, strconv.Itoa(g.Index))
			if g.MemoryMB != 24576 {
				t.Fatalf("memory %d", g.MemoryMB)
			}
		}
		if strings.Join(got, ",") != want {
			t.Errorf("Declare(%q) = %v, want %s", spec, got, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "0,0", "-1"} {
		if _, err := Declare(bad, 0); err == nil {
			t.Errorf("Declare(%q) accepted it", bad)
		}
	}
}

// The fake nvidia-smi on PATH changes the environment: not parallel.
func TestResolveWithNvidiaSMI(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\ncase \"$*\" in\n*memory.total*) cat <<'EOF'\n" + listOutput + "EOF\n;;\n*utilization.gpu*) cat <<'EOF'\n" + utilOutput + "EOF\n;;\nesac\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ctx := context.Background()
	smi := SMI{}
	if !smi.Available() {
		t.Fatal("the fake nvidia-smi is not found")
	}

	t.Run("every GPU nvidia-smi lists, when none are declared", func(t *testing.T) {
		gpus, err := Resolve(ctx, smi, "", 0)
		if err != nil || len(gpus) != 4 || gpus[0].UUID == "" || gpus[0].MemoryMB != 81920 {
			t.Fatalf("%+v, %v", gpus, err)
		}
	})
	t.Run("declared GPUs get their details from nvidia-smi", func(t *testing.T) {
		gpus, err := Resolve(ctx, smi, "2,3", 0)
		if err != nil || len(gpus) != 2 || gpus[0].Index != 2 || gpus[0].UUID != "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d" {
			t.Fatalf("%+v, %v", gpus, err)
		}
	})
	t.Run("a declared GPU nvidia-smi does not list is refused", func(t *testing.T) {
		if _, err := Resolve(ctx, smi, "0,7", 0); err == nil || !strings.Contains(err.Error(), "no GPU 7") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("utilization is sampled", func(t *testing.T) {
		util, err := smi.Utilization(ctx)
		if err != nil || util[0] != 97 {
			t.Fatalf("%v, %v", util, err)
		}
	})
	t.Run("without nvidia-smi the GPUs must be declared", func(t *testing.T) {
		none := SMI{Path: filepath.Join(bin, "absent")}
		if _, err := Resolve(ctx, none, "", 0); err == nil || !strings.Contains(err.Error(), "--gpus") {
			t.Fatalf("err = %v", err)
		}
		gpus, err := Resolve(ctx, none, "0,1", 40960)
		if err != nil || len(gpus) != 2 || gpus[1].MemoryMB != 40960 {
			t.Fatalf("%+v, %v", gpus, err)
		}
	})
}
