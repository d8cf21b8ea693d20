package platform_test

import (
	"math"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// A call's cost is its tokens at the model's prices, in millionths of the
// currency, rounded up; no count of tokens can wrap it around to a
// negative cost, and a negative count costs nothing.
func TestCostRoundsUpAndSaturates(t *testing.T) {
	frontier := &model.LLMModel{InputPriceMicros: 2_500_000, OutputPriceMicros: 10_000_000} // 2.50 and 10.00 a million
	dearest := &model.LLMModel{InputPriceMicros: 1_000_000_000_000, OutputPriceMicros: 1_000_000_000_000}
	cases := []struct {
		name          string
		m             *model.LLMModel
		input, output int64
		want          int64
	}{
		{"nothing", frontier, 0, 0, 0},
		{"a token rounds up", frontier, 1, 0, 3},
		{"whole millions", frontier, 1_000_000, 1_000_000, 12_500_000},
		{"input and output together", frontier, 12, 3, (12*2_500_000 + 3*10_000_000 + 999_999) / 1_000_000},
		{"free", &model.LLMModel{}, 1 << 40, 1 << 40, 0},
		{"the dearest price on a large prompt", dearest, 8 << 20, 1 << 24, (8<<20 + 1<<24) * 1_000_000},
		{"past int64 saturates", dearest, math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{"just past int64 saturates", dearest, math.MaxInt64 / 1_000_000, 1_000_000, math.MaxInt64},
		{"negative counts cost nothing", frontier, -1 << 62, -5, 0},
	}
	for _, tc := range cases {
		if got := platform.Cost(tc.m, tc.input, tc.output); got != tc.want {
			t.Errorf("%s: Cost(%d, %d) = %d, want %d", tc.name, tc.input, tc.output, got, tc.want)
		}
	}
}
