package platform_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// TestOnlyTheGatewayWritesModelCallsToTheLedger: RecordModelCalls was the
// one service method with no caller check. A user's context (even an
// admin's, on any channel) and a context of another channel are refused
// and write nothing; the gateway's meter, with no user on channel
// gateway, writes.
func TestOnlyTheGatewayWritesModelCallsToTheLedger(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		call := func(id string) []*model.ModelCall {
			return []*model.ModelCall{{ID: id, TenantID: b.Tenant, At: b.Svc.Now(), UserName: "rita",
				Model: "m", Alias: "chat", InputTokens: 1000, OutputTokens: 1000}}
		}
		refused := map[string]context.Context{
			"an admin on GraphQL":     identity.WithChannel(b.Admin, identity.ChannelGraphQL),
			"an admin on the gateway": identity.WithChannel(b.Admin, identity.ChannelGateway),
			"no user, channel mcp":    identity.WithChannel(context.Background(), identity.ChannelMCP),
			"no user, no channel":     context.Background(),
		}
		for name, ctx := range refused {
			if err := b.Svc.RecordModelCalls(ctx, call("c-"+name)); kernel.ErrorCode(err) != kernel.CodeForbidden {
				t.Errorf("%s wrote model calls: %v", name, err)
			}
		}
		gw := identity.WithChannel(context.Background(), identity.ChannelGateway)
		if err := b.Svc.RecordModelCalls(gw, []*model.ModelCall{{ID: "x", At: b.Svc.Now()}}); kernel.ErrorCode(err) != kernel.CodeInvalid {
			t.Errorf("a call with no tenant: %v", err)
		}
		if err := b.Svc.RecordModelCalls(gw, call("ok")); err != nil {
			t.Fatalf("the gateway's write: %v", err)
		}
		rows, err := b.Store.SumModelCalls(context.Background(), b.Tenant, store.ModelUsageQuery{From: b.Svc.Now().Add(-time.Hour), To: b.Svc.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		var tokens int64
		for _, r := range rows {
			tokens += r.InputTokens + r.OutputTokens
		}
		if tokens != 2000 {
			t.Errorf("the ledger holds %d tokens; want the gateway's one call (2000), none of the refused ones", tokens)
		}
	})
}
