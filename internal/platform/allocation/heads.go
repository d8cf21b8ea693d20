package allocation

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// A department head's share of the allocation model (issue 32): the
// policies of the teams and departments below the department, within what
// the department is granted. The head changes what splits the
// department's share among them (reservation, limit, time budget,
// weight); the rest of a policy, the department's own policy and anything
// outside the subtree stay an admin's (or a higher head's). The change is
// validated against the whole estate, as an admin's is, so children's
// reservations that no longer fit in the department's are refused with
// the numbers; and a child's limit may not exceed what the department
// above it may hold.

// headsAny reports whether the caller is not an admin and heads a
// department (a viewer who heads one included, to be told why not).
func (s *Allocation) headsAny(ctx context.Context) bool {
	p, err := kernel.Caller(ctx)
	if err != nil || p.IsAdmin() {
		return false
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	return err == nil && kernel.HeadsAny(p, e)
}

// headUpdatePolicy is UpdatePolicy for a caller who is not an admin.
// The result is cut to what the head sees: the estate as VisibleEstate
// gives it, and only the warnings that estate states too, so that the
// reply names nothing outside the head's view.
func (s *Allocation) headUpdatePolicy(ctx context.Context, ref string, in PolicyInput) (*kernel.EstateResult, error) {
	res, err := s.headChangePolicy(ctx, ref, in)
	if err != nil || res.Estate == nil {
		return res, err
	}
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	res.Estate = kernel.VisibleEstate(p, res.Estate)
	seen := map[string]bool{}
	for _, w := range res.Estate.Warnings() {
		seen[w.String()] = true
	}
	var kept []estate.Warning
	for _, w := range res.Warnings {
		if seen[w.String()] {
			kept = append(kept, w)
		}
	}
	res.Warnings = kept
	return res, nil
}

func (s *Allocation) headChangePolicy(ctx context.Context, ref string, in PolicyInput) (*kernel.EstateResult, error) {
	return s.k.ChangeDelegatedEstate(ctx, "change resource policies", func(t *kernel.Txn, cur, next *estate.Estate, by *string) (string, error) {
		p := t.P
		if p.ProjectID != "" {
			return "", kernel.Forbidden("this credential is scoped to one project and cannot change resource policies; use an unscoped API key")
		}
		// What the caller may not see is not found, as for a read.
		seen, err := kernel.FindPolicy(kernel.VisibleEstate(p, cur), ref)
		if err != nil {
			return "", err
		}
		pol := next.Policy(seen.ID)
		label := cur.GroupLabel(pol.GroupID)
		head, ok := kernel.ManagesPolicyOf(p, cur, pol.GroupID)
		if !ok {
			return "", kernel.Forbidden("only a tenant admin can change the resource policy of %s (or the head of a department above it, who may write)", label)
		}
		if in.LowWatermarkMinutes != nil || in.AlertThresholdPercent != nil {
			return "", kernel.Forbidden("a department head changes a policy's reservation, limit, time budget and weight; ask a tenant admin to change the low watermark or alert threshold of %s", label)
		}
		if in.Group != nil {
			if g, err := kernel.FindGroup(next, *in.Group); err != nil || g.ID != pol.GroupID {
				return "", kernel.Invalid("a resource policy cannot move to another group; delete it and create one for the other group")
			}
		}
		if err := applyPolicy(next, pol, in); err != nil {
			return "", err
		}
		if in.LimitGPUs != nil {
			parent := next.Group(pol.GroupID).ParentID
			if max, ok := next.EffectiveLimit(parent); ok && pol.LimitGPUs > max {
				return "", kernel.Invalid("the limit of %s would be %d GPUs, more than the %d GPUs its department %s may hold (its effective limit): give at most %d",
					label, pol.LimitGPUs, max, next.GroupName(parent), max)
			}
		}
		*by = fmt.Sprintf("by %s, head of department %s", p.UserName, head.Name)
		return pol.ID, nil
	})
}
