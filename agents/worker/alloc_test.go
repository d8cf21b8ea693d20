package worker

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/internal/agentapi"
)

func fourGPUs() []agentapi.GPU {
	return []agentapi.GPU{{Index: 0, MemoryMB: 80000}, {Index: 1, MemoryMB: 80000}, {Index: 2, MemoryMB: 80000}, {Index: 3, MemoryMB: 80000}}
}

func TestAllocator(t *testing.T) {
	t.Parallel()

	t.Run("whole-GPU tasks never share a GPU", func(t *testing.T) {
		a := NewAllocator(fourGPUs(), true)
		g1, _, err := a.Allocate("a", 2000)
		if err != nil || len(g1) != 2 || g1[0].Index != 0 || g1[1].Index != 1 {
			t.Fatalf("a = %v, %v", g1, err)
		}
		g2, _, err := a.Allocate("b", 1000)
		if err != nil || len(g2) != 1 || g2[0].Index != 2 {
			t.Fatalf("b = %v, %v", g2, err)
		}
		if _, _, err := a.Allocate("c", 2000); !errors.Is(err, ErrNoCapacity) {
			t.Fatalf("c: %v, want no capacity (one GPU idle)", err)
		}
		if idle, share := a.Free(); idle != 1 || share != 1000 {
			t.Fatalf("Free = %d, %d", idle, share)
		}
	})

	t.Run("fractions pack onto one GPU up to 1000 thousandths", func(t *testing.T) {
		a := NewAllocator(fourGPUs(), true)
		for i := 0; i < 4; i++ {
			g, share, err := a.Allocate(fmt.Sprintf("q%d", i), 250)
			if err != nil || len(g) != 1 || g[0].Index != 0 || share != 250 {
				t.Fatalf("quarter %d = %v, %d, %v: want GPU 0", i, g, share, err)
			}
		}
		// GPU 0 is full; the next fraction opens GPU 1.
		g, _, err := a.Allocate("half", 500)
		if err != nil || g[0].Index != 1 {
			t.Fatalf("half = %v, %v", g, err)
		}
		// An eighth goes to the fullest GPU it fits on: GPU 1, not 2.
		g, _, _ = a.Allocate("eighth", 125)
		if g[0].Index != 1 {
			t.Fatalf("eighth on GPU %d, want 1", g[0].Index)
		}
		if idle, share := a.Free(); idle != 2 || share != 1000 {
			t.Fatalf("Free = %d, %d", idle, share)
		}
		// A whole task cannot take a GPU that holds fractions.
		g, _, err = a.Allocate("whole", 3000)
		if !errors.Is(err, ErrNoCapacity) {
			t.Fatalf("whole = %v, %v", g, err)
		}
	})

	t.Run("capacity frees when a task ends", func(t *testing.T) {
		a := NewAllocator(fourGPUs()[:1], true)
		if _, _, err := a.Allocate("x", 1000); err != nil {
			t.Fatal(err)
		}
		if idle, share := a.Free(); idle != 0 || share != 0 {
			t.Fatalf("Free = %d, %d", idle, share)
		}
		a.Release("x")
		if idle, share := a.Free(); idle != 1 || share != 1000 {
			t.Fatalf("after release Free = %d, %d", idle, share)
		}
		a.Allocate("h1", 500)
		a.Allocate("h2", 500)
		a.Release("h1")
		if idle, share := a.Free(); idle != 0 || share != 500 {
			t.Fatalf("after one half left Free = %d, %d", idle, share)
		}
	})

	t.Run("without fractions a share is refused", func(t *testing.T) {
		a := NewAllocator(fourGPUs(), false)
		if _, _, err := a.Allocate("q", 250); !errors.Is(err, ErrNoFractions) {
			t.Fatalf("err = %v", err)
		}
		if _, share := a.Free(); share != 0 {
			t.Fatalf("a worker without fractions offers a share of %d", share)
		}
	})

	t.Run("a task without GPUs holds none", func(t *testing.T) {
		a := NewAllocator(fourGPUs(), false)
		g, _, err := a.Allocate("cpu", 0)
		if err != nil || len(g) != 0 {
			t.Fatalf("= %v, %v", g, err)
		}
		if idle, _ := a.Free(); idle != 4 {
			t.Fatalf("idle %d", idle)
		}
	})
}

// TestAllocatorProperties drives the allocator with random tasks and checks
// its invariants after every step.
func TestAllocatorProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "gpus")
		var gpus []agentapi.GPU
		for i := 0; i < n; i++ {
			gpus = append(gpus, agentapi.GPU{Index: i * 2, MemoryMB: 1000})
		}
		a := NewAllocator(gpus, true)
		held := map[string][]agentapi.GPU{}
		share := map[string]int64{}
		sizes := []int64{125, 250, 500, 1000, 2000, 3000}
		for step := 0; step < 60; step++ {
			if len(held) > 0 && rapid.Bool().Draw(t, "release") {
				keys := make([]string, 0, len(held))
				for k := range held {
					keys = append(keys, k)
				}
				k := rapid.SampledFrom(keys).Draw(t, "which")
				a.Release(k)
				delete(held, k)
				delete(share, k)
			} else {
				size := rapid.SampledFrom(sizes).Draw(t, "size")
				key := fmt.Sprintf("t%d", step)
				idle, maxShare := a.Free()
				g, s, err := a.Allocate(key, size)
				// What Free promised is what Allocate gives.
				fits := size <= max(int64(idle)*1000, maxShare)
				if (err == nil) != fits {
					t.Fatalf("size %d: Free said idle %d, share %d; Allocate: %v", size, idle, maxShare, err)
				}
				if err == nil {
					held[key], share[key] = g, s
				}
			}
			use := map[int]int64{}
			whole := map[int]int{}
			for k, g := range held {
				for _, x := range g {
					use[x.Index] += share[k]
					if share[k] == 1000 {
						whole[x.Index]++
					}
				}
			}
			for idx, u := range use {
				if u > 1000 {
					t.Fatalf("GPU %d holds %d thousandths", idx, u)
				}
				if whole[idx] > 0 && u != 1000 {
					t.Fatalf("GPU %d is shared by a whole-GPU task", idx)
				}
				if whole[idx] > 1 {
					t.Fatalf("GPU %d is held by %d whole-GPU tasks", idx, whole[idx])
				}
			}
		}
	})
}

func TestAllocateSlotsCountsNodesAndTakesWhatIsIdle(t *testing.T) {
	a := NewAllocator([]agentapi.GPU{{Index: 0}, {Index: 1}, {Index: 2}, {Index: 3}}, false)
	got, share, err := a.AllocateSlots("a", 1000, 2)
	if err != nil || len(got) != 2 || share != 1000 {
		t.Fatalf("1 GPU × 2 nodes: got %v share %d err %v, want 2 slots", got, share, err)
	}
	// 2 GPUs × 2 nodes is more than the 2 idle slots: it takes both.
	if got, _, err := a.AllocateSlots("b", 2000, 2); err != nil || len(got) != 2 {
		t.Fatalf("larger than idle: got %v err %v, want the 2 idle slots", got, err)
	}
	if idle, _ := a.Free(); idle != 0 {
		t.Fatalf("idle = %d, want 0", idle)
	}
	if _, _, err := a.AllocateSlots("c", 1000, 1); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("nothing idle: err %v, want ErrNoCapacity", err)
	}
	a.Release("a")
	if idle, _ := a.Free(); idle != 2 {
		t.Fatalf("after release idle = %d, want 2", idle)
	}
}
