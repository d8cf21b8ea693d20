package live

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/view"
)

// TestBudgetAlertNamesTheBudgetAsSet: an alert names the budget exactly as
// it was set, never rounded to two decimals (0.015 h is not 0.01 h, and
// 0.001 h is not 0 h).
func TestBudgetAlertNamesTheBudgetAsSet(t *testing.T) {
	reset := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		budget *view.BudgetView
		want   string
	}{
		{&view.BudgetView{Total: 15_000, Used: 15_000, UsedUp: true, ResetsAt: reset},
			"group vision has used up its time budget of 0.015 h; it resets 2026-11-30T00:00:00Z"},
		{&view.BudgetView{Total: 1_000, Used: 900, Alert: true, ResetsAt: reset},
			"group vision has used 90% of its time budget of 0.001 h; it resets 2026-11-30T00:00:00Z"},
		{&view.BudgetView{Total: 2000_000_000, Used: 1700_000_000, Alert: true, ResetsAt: reset},
			"group vision has used 85% of its time budget of 2000 h; it resets 2026-11-30T00:00:00Z"},
	} {
		if got := budgetAlertText(&view.PolicyView{Group: &model.Group{Name: "vision"}, Budget: tc.budget}); got != tc.want {
			t.Errorf("alert %q, want %q", got, tc.want)
		}
	}
}
