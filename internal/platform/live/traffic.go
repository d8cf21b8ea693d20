package live

import (
	"context"
	"sort"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/store"
)

// trafficTick is how often a gatewayTraffic subscription gets fresh rates:
// often enough that a call shows on the dashboard within moments, seldom
// enough that one ledger read every tick per tenant costs nothing.
const trafficTick = 2 * time.Second

// trafficWindow is the trailing window the rates are counted over: a
// minute, so that the calls in it are the calls per minute.
const trafficWindow = time.Minute

// GatewayTraffic is the gateway's recent traffic by alias as one
// subscriber may see it: calls and tokens of the last minute.
type GatewayTraffic struct {
	TenantID      string
	At            time.Time
	WindowSeconds int
	// Aliases holds the aliases with calls the subscriber may see in the
	// window, by name.
	Aliases         []*AliasTraffic
	CallsPerMinute  int
	TokensPerMinute float64
	Missed          int
	// rows are the tenant's calls in the window by alias, group, project
	// and user, shared by every subscriber of the tenant; each gets its
	// own sum of what it may see (see SubscribeGatewayTraffic).
	rows []store.ModelUsageRow
}

// AliasTraffic is one alias's calls and tokens of the last minute.
type AliasTraffic struct {
	Alias                 string
	CallsPerMinute        int
	InputTokensPerMinute  float64
	OutputTokensPerMinute float64
	TokensPerMinute       float64
}

// SubscribeGatewayTraffic follows the gateway's calls per minute and
// tokens per minute by alias, every two seconds, counted on the ledger
// over the last minute (so every replica's calls count). One read of the
// ledger per tick serves all of a tenant's subscribers; each update is cut
// down, when it is sent, to the calls its subscriber may see now: admins
// the tenant's, others their groups' (the llm domain's rule, as for
// usage).
func (s *Live) SubscribeGatewayTraffic(ctx context.Context) (<-chan *GatewayTraffic, error) {
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	read := func(ctx context.Context) (*GatewayTraffic, error) {
		now := s.k.Now()
		rows, err := s.reads.TenantModelTraffic(ctx, tenantID, now.Add(-trafficWindow), now.Add(time.Microsecond))
		if err != nil {
			return nil, err
		}
		return &GatewayTraffic{TenantID: tenantID, At: now, WindowSeconds: int(trafficWindow / time.Second), rows: rows}, nil
	}
	tick := func(ctx context.Context) []*GatewayTraffic {
		u, err := read(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.k.Log.Warn("gateway traffic subscription: read the ledger", "tenant", tenantID, "err", err)
			}
			return nil
		}
		return []*GatewayTraffic{u}
	}
	r := s.subs.traffic.Join("traffic|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(events.Event) bool { return false }, func(context.Context, []events.Event) []*GatewayTraffic { return nil },
		trafficTick, tick))
	first, err := read(ctx)
	if err != nil {
		return nil, s.failSubscription(ctx, err, r.Close, release)
	}
	return pump(ctx, s, r, release, []*GatewayTraffic{first},
		func(p *identity.Principal, u *GatewayTraffic) (*GatewayTraffic, bool) {
			if p.TenantID != u.TenantID {
				return nil, false
			}
			return s.visibleTraffic(p, u), true
		}), nil
}

// visibleTraffic sums, by alias, the rows of u that p may see.
func (s *Live) visibleTraffic(p *identity.Principal, u *GatewayTraffic) *GatewayTraffic {
	out := &GatewayTraffic{TenantID: u.TenantID, At: u.At, WindowSeconds: u.WindowSeconds, Missed: u.Missed, Aliases: []*AliasTraffic{}}
	by := map[string]*AliasTraffic{}
	for _, r := range u.rows {
		if len(r.Keys) != 4 {
			continue
		}
		alias, group, project, user := r.Keys[0].ID, r.Keys[1].ID, r.Keys[2].ID, r.Keys[3].ID
		if !s.reads.SeesModelCall(p, group, project, user) {
			continue
		}
		a := by[alias]
		if a == nil {
			a = &AliasTraffic{Alias: alias}
			by[alias] = a
			out.Aliases = append(out.Aliases, a)
		}
		a.CallsPerMinute += int(r.Calls)
		a.InputTokensPerMinute += float64(r.InputTokens)
		a.OutputTokensPerMinute += float64(r.OutputTokens)
		a.TokensPerMinute += float64(r.InputTokens + r.OutputTokens)
		out.CallsPerMinute += int(r.Calls)
		out.TokensPerMinute += float64(r.InputTokens + r.OutputTokens)
	}
	sort.Slice(out.Aliases, func(i, j int) bool { return out.Aliases[i].Alias < out.Aliases[j].Alias })
	return out
}
