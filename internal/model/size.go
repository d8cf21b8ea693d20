package model

import (
	"fmt"
	"strconv"
	"strings"
)

// MilliGPU counts GPUs in thousandths, so that fractions such as an eighth
// (125) add up exactly. Pools, reservations and limits are whole GPUs; only
// task sizes may be fractions.
type MilliGPU int64

// GPUs converts a whole number of GPUs.
func GPUs(n int) MilliGPU { return MilliGPU(n) * 1000 }

// Float returns the amount as a number of GPUs.
func (m MilliGPU) Float() float64 { return float64(m) / 1000 }

// String formats the amount as a decimal number of GPUs without trailing zeros.
func (m MilliGPU) String() string {
	return strconv.FormatFloat(m.Float(), 'f', -1, 64)
}

// AllowedFractions are the fractions of one GPU a profile or task may ask for.
// They match memory-capped shares and the common MIG layouts, down to an
// eighth of a GPU.
var AllowedFractions = []MilliGPU{125, 250, 500}

// Limits on sizes, generous enough for any real estate and small enough that
// no arithmetic on them can overflow.
const (
	MaxGPUsPerNode = 1024
	MaxNodes       = 4096
)

// Size is the GPU allocation of one task: Nodes × PerNode GPUs. A fraction or
// a single-node size has Nodes == 1; multi-node work is placed whole or not at
// all.
type Size struct {
	Nodes   int
	PerNode MilliGPU
}

// Total is the number of GPUs the size counts against pools, reservations and
// limits.
func (s Size) Total() MilliGPU { return MilliGPU(s.Nodes) * s.PerNode }

// IsZero reports whether s is unset.
func (s Size) IsZero() bool { return s.Nodes == 0 && s.PerNode == 0 }

// MultiNode reports whether the size spans several nodes.
func (s Size) MultiNode() bool { return s.Nodes > 1 }

// Fraction reports whether the size is a share of one GPU.
func (s Size) Fraction() bool { return s.Nodes == 1 && s.PerNode < 1000 }

// String formats the size the way ParseSize reads it: "0.125", "1", "8", "2x8".
func (s Size) String() string {
	if s.Nodes > 1 {
		return fmt.Sprintf("%dx%s", s.Nodes, s.PerNode)
	}
	return s.PerNode.String()
}

// GPUsPerNode returns the GPUs on each node, as a number.
func (s Size) GPUsPerNode() float64 { return s.PerNode.Float() }

// TotalGPUs returns Total as a number.
func (s Size) TotalGPUs() float64 { return s.Total().Float() }

// Text is String, for GraphQL.
func (s Size) Text() string { return s.String() }

// ParseSize reads a GPU size: a fraction of one GPU (0.125, 0.25 or 0.5),
// a whole number of GPUs on one node ("1", "8"), or nodes × GPUs per node
// ("2x8"). The error says what forms are accepted.
func ParseSize(text string) (Size, error) {
	t := strings.TrimSpace(strings.ToLower(text))
	if t == "" {
		return Size{}, fmt.Errorf("GPU size is empty: give a fraction (0.125, 0.25, 0.5), whole GPUs (1, 8) or nodes x GPUs per node (2x8)")
	}
	if nodesText, perText, ok := strings.Cut(t, "x"); ok {
		nodes, err := strconv.Atoi(strings.TrimSpace(nodesText))
		if err != nil || nodes < 1 {
			return Size{}, fmt.Errorf("GPU size %q: the node count before 'x' must be a whole number of at least 1", text)
		}
		per, err := strconv.Atoi(strings.TrimSpace(perText))
		if err != nil || per < 1 {
			return Size{}, fmt.Errorf("GPU size %q: the GPUs per node after 'x' must be a whole number of at least 1 (fractions cannot span nodes)", text)
		}
		return NewSize(nodes, GPUs(per))
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return Size{}, fmt.Errorf("GPU size %q is not a number: give a fraction (0.125, 0.25, 0.5), whole GPUs (1, 8) or nodes x GPUs per node (2x8)", text)
	}
	return SizeFromFloat(f)
}

// SizeFromFloat reads a single-node size given as a number of GPUs.
func SizeFromFloat(f float64) (Size, error) {
	if f != f || f <= 0 {
		return Size{}, fmt.Errorf("GPU size %v must be greater than 0", f)
	}
	if f > MaxGPUsPerNode {
		return Size{}, fmt.Errorf("GPU size %v is more than %d GPUs on one node; use nodes x GPUs per node", f, MaxGPUsPerNode)
	}
	milli := MilliGPU(f*1000 + 0.5)
	if float64(milli)/1000 != f {
		return Size{}, fmt.Errorf("GPU size %v is not an allowed size: give a fraction (0.125, 0.25, 0.5) or whole GPUs", f)
	}
	return NewSize(1, milli)
}

// NewSize checks and builds a size of nodes × perNode.
func NewSize(nodes int, perNode MilliGPU) (Size, error) {
	s := Size{Nodes: nodes, PerNode: perNode}
	if nodes < 1 || nodes > MaxNodes {
		return Size{}, fmt.Errorf("GPU size %s: the node count must be between 1 and %d", s, MaxNodes)
	}
	if perNode <= 0 {
		return Size{}, fmt.Errorf("GPU size %s: GPUs per node must be greater than 0", s)
	}
	if perNode > GPUs(MaxGPUsPerNode) {
		return Size{}, fmt.Errorf("GPU size %s: at most %d GPUs per node", s, MaxGPUsPerNode)
	}
	if perNode%1000 != 0 {
		if nodes > 1 {
			return Size{}, fmt.Errorf("GPU size %s: a fraction of a GPU cannot span several nodes", s)
		}
		allowed := false
		for _, f := range AllowedFractions {
			if perNode == f {
				allowed = true
			}
		}
		if !allowed {
			return Size{}, fmt.Errorf("GPU size %s is not an allowed fraction: use 0.125, 0.25 or 0.5 of a GPU, or whole GPUs", s)
		}
	}
	return s, nil
}
