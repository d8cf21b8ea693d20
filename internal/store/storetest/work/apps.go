package work

import (
	"reflect"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Apps checks a tenant's app catalogue.
func Apps(t *testing.T, setup harness.Setup) {
	setup.Run(t, "a tenant's app catalogue is stored whole and read back per tenant", func(t *testing.T, b *harness.Bundle) {
		c, err := b.Store.GetApps(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if c == nil || len(c.Apps) != 0 || c.Settings.Running != 0 {
			t.Fatalf("empty catalogue %+v", c)
		}
		c = &model.AppCatalogue{
			Apps: []*model.App{{Name: "echo", Kind: model.AppSession, Port: 8000, Run: model.AppRun{Process: "serve {port}", Args: []string{"a"}},
				Form: `{"type":"object"}`, Secrets: []string{"tok"}, IdleMinutes: 30, Locked: true}},
			Settings: model.AppSettings{LaunchesDisabled: true, Running: 20, Groups: []*model.AppGroupQuota{{Group: "ml", Running: 5}}},
		}
		harness.Must(t, b.Store.PutApps(b.Ctx, b.Tenant.ID, c, b.Now))
		got, err := b.Store.GetApps(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("read back %s\nwant %s", harness.Show(got), harness.Show(c))
		}
		other, err := b.Store.GetApps(b.Ctx, b.Other.ID)
		harness.Must(t, err)
		if len(other.Apps) != 0 || other.Settings.Running != 0 {
			t.Fatalf("another tenant reads %s", harness.Show(other))
		}
		c.Apps = nil
		harness.Must(t, b.Store.PutApps(b.Ctx, b.Tenant.ID, c, b.Now))
		got, err = b.Store.GetApps(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(got.Apps) != 0 || got.Settings.Running != 20 {
			t.Fatalf("replaced %s", harness.Show(got))
		}
	})
}
