// Package gpu finds a host's GPUs and samples how busy they are, through
// nvidia-smi when it is installed, or from what the operator declares.
package gpu

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// SMI runs nvidia-smi.
type SMI struct {
	// Path is the nvidia-smi executable (default: "nvidia-smi" on PATH).
	Path string
}

func (s SMI) path() string {
	if s.Path == "" {
		return "nvidia-smi"
	}
	return s.Path
}

// Available reports whether nvidia-smi can be found.
func (s SMI) Available() bool {
	_, err := exec.LookPath(s.path())
	return err == nil
}

func (s SMI) query(ctx context.Context, fields string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.path(), "--query-gpu="+fields, "--format=csv,noheader,nounits").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("nvidia-smi: %w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return out, nil
}

// List returns the host's GPUs: index, UUID and memory.
func (s SMI) List(ctx context.Context) ([]agentapi.GPU, error) {
	out, err := s.query(ctx, "index,uuid,memory.total")
	if err != nil {
		return nil, err
	}
	return ParseList(string(out))
}

// Utilization returns each GPU's utilization in percent, by index.
func (s SMI) Utilization(ctx context.Context) (map[int]float64, error) {
	out, err := s.query(ctx, "index,utilization.gpu")
	if err != nil {
		return nil, err
	}
	return ParseUtilization(string(out))
}

// ParseList reads `nvidia-smi --query-gpu=index,uuid,memory.total
// --format=csv,noheader,nounits`.
func ParseList(out string) ([]agentapi.GPU, error) {
	var gpus []agentapi.GPU
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := splitCSV(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("nvidia-smi line %d %q: want index, uuid, memory.total", n+1, line)
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: index %q: %w", n+1, f[0], err)
		}
		g := agentapi.GPU{Index: idx, UUID: f[1]}
		// "[N/A]" or "[Not Supported]" on some boards: memory unknown.
		if mb, err := strconv.ParseFloat(f[2], 64); err == nil {
			g.MemoryMB = int(mb)
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return nil, errors.New("nvidia-smi lists no GPUs")
	}
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	return gpus, nil
}

// ParseUtilization reads `nvidia-smi --query-gpu=index,utilization.gpu
// --format=csv,noheader,nounits`; GPUs that report no number are left out.
func ParseUtilization(out string) (map[int]float64, error) {
	util := map[int]float64{}
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := splitCSV(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("nvidia-smi line %d %q: want index, utilization.gpu", n+1, line)
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: index %q: %w", n+1, f[0], err)
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			util[idx] = v
		}
	}
	return util, nil
}

func splitCSV(line string) []string {
	f := strings.Split(line, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// Declare parses a declared GPU list, "0,1,2,3" or a range "0-3", each with
// memoryMB (0: unknown).
func Declare(spec string, memoryMB int) ([]agentapi.GPU, error) {
	seen := map[int]bool{}
	var gpus []agentapi.GPU
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi := part, part
		if a, b, ok := strings.Cut(part, "-"); ok {
			lo, hi = a, b
		}
		from, err1 := strconv.Atoi(strings.TrimSpace(lo))
		to, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || from < 0 || to < from {
			return nil, fmt.Errorf("--gpus %q: write GPU indices as 0,1,2,3 or 0-3", spec)
		}
		for i := from; i <= to; i++ {
			if seen[i] {
				return nil, fmt.Errorf("--gpus %q: GPU %d is listed twice", spec, i)
			}
			seen[i] = true
			gpus = append(gpus, agentapi.GPU{Index: i, MemoryMB: memoryMB})
		}
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("--gpus %q lists no GPU", spec)
	}
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	return gpus, nil
}

// Resolve returns the GPUs a worker owns: the declared ones (spec, with
// details from nvidia-smi when it knows them, and memoryMB when given), or
// every GPU nvidia-smi lists when nothing is declared.
func Resolve(ctx context.Context, smi SMI, spec string, memoryMB int) ([]agentapi.GPU, error) {
	var found []agentapi.GPU
	if smi.Available() {
		var err error
		if found, err = smi.List(ctx); err != nil && spec == "" {
			return nil, err
		}
	}
	if spec == "" {
		if found == nil {
			return nil, errors.New("nvidia-smi was not found: declare the GPUs with --gpus 0,1,2,3")
		}
		if memoryMB > 0 {
			for i := range found {
				found[i].MemoryMB = memoryMB
			}
		}
		return found, nil
	}
	gpus, err := Declare(spec, memoryMB)
	if err != nil {
		return nil, err
	}
	byIndex := map[int]agentapi.GPU{}
	for _, g := range found {
		byIndex[g.Index] = g
	}
	for i, g := range gpus {
		if f, ok := byIndex[g.Index]; ok {
			gpus[i].UUID = f.UUID
			if memoryMB == 0 {
				gpus[i].MemoryMB = f.MemoryMB
			}
		} else if len(found) > 0 {
			return nil, fmt.Errorf("--gpus: nvidia-smi lists no GPU %d", g.Index)
		}
	}
	return gpus, nil
}
