package platform_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

func TestSecrets(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		who := b.people(t)
		scoped := b.Key(t, "rita", "fraud-models")
		const value = "hf_0123456789abcdefghijklmnopqrstuvwxyz"

		t.Run("who may change which vault", func(t *testing.T) {
			cases := []struct {
				name        string
				as          context.Context
				scope, ref  string
				code        platform.Code
				wantInError string
			}{
				{"the admin sets a tenant secret", b.Admin, model.ScopeTenant, "", "", ""},
				{"a lead sets their group's secret", who.lead, model.ScopeGroup, "ml-research", "", ""},
				{"a lead sets a secret of their group's project", who.lead, model.ScopeProject, "fraud-models", "", ""},
				{"a member cannot set a tenant secret", who.rita, model.ScopeTenant, "", platform.CodeForbidden, "only a tenant admin"},
				{"a member cannot set their group's secret", who.rita, model.ScopeGroup, "ml-research", platform.CodeForbidden, "lead of group ml-research"},
				{"a member cannot set their project's secret", who.rita, model.ScopeProject, "fraud-models", platform.CodeForbidden, "lead of the project's group"},
				{"another group is not found", who.lead, model.ScopeGroup, "vision", platform.CodeNotFound, "no group"},
				{"another group's project is not found", who.vic, model.ScopeProject, "fraud-models", platform.CodeNotFound, "no project"},
				{"a project-scoped key cannot change secrets", scoped, model.ScopeProject, "fraud-models", platform.CodeForbidden, "scoped to a project"},
				{"an unknown scope is refused", b.Admin, "cluster", "", platform.CodeInvalid, "use tenant, group or project"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := b.snapshot(t)
					info, err := b.Svc.SetSecret(tc.as, tc.scope, tc.ref, "HF_TOKEN", value)
					if tc.code == "" {
						platformtest.Must(t, err)
						if info.Name != "HF_TOKEN" || info.Scope != tc.scope {
							t.Fatalf("info %+v", info)
						}
						return
					}
					platformtest.WantError(t, err, tc.code, tc.wantInError)
					b.unchanged(t, before)
				})
			}
		})

		t.Run("bad names and values are refused", func(t *testing.T) {
			before := b.snapshot(t)
			_, err := b.Svc.SetSecret(b.Admin, model.ScopeTenant, "", "HF-TOKEN", value)
			platformtest.WantError(t, err, platform.CodeInvalid, "letters, digits and '_'", "environment variable")
			_, err = b.Svc.SetSecret(b.Admin, model.ScopeTenant, "", "EMPTY", "")
			platformtest.WantError(t, err, platform.CodeInvalid, "1 to 65536 bytes")
			_, err = b.Svc.SetSecret(b.Admin, model.ScopeTenant, "", "HUGE", strings.Repeat("x", platform.MaxSecretBytes+1))
			platformtest.WantError(t, err, platform.CodeInvalid, "1 to 65536 bytes")
			b.unchanged(t, before)
		})

		t.Run("values are sealed at rest and never logged, audited or listed", func(t *testing.T) {
			e, _ := b.Svc.Estate(b.Admin)
			sec, err := b.Store.GetSecret(context.Background(), b.Tenant, model.ScopeGroup, e.GroupByName("ml-research").ID, "HF_TOKEN")
			platformtest.Must(t, err)
			if len(sec.Ciphertext) == 0 || bytes.Contains(sec.Ciphertext, []byte(value)) {
				t.Fatalf("the stored secret holds its value in the clear")
			}
			for _, a := range b.AuditLog(t) {
				if strings.Contains(a.Detail+a.ObjectName+a.ObjectID, value) {
					t.Fatalf("audit entry %+v holds the value", a)
				}
			}
			for _, l := range b.Logs.All() {
				if strings.Contains(l, value) {
					t.Fatalf("log %q holds the value", l)
				}
			}
			list, err := b.Svc.Secrets(who.rita, model.ScopeProject, "fraud-models")
			platformtest.Must(t, err)
			if len(list) != 1 || list[0].Name != "HF_TOKEN" || list[0].UpdatedBy != "lena" {
				t.Fatalf("rita lists %+v", list)
			}
			_, err = b.Svc.Secrets(who.vic, model.ScopeGroup, "ml-research")
			platformtest.WantError(t, err, platform.CodeNotFound, "no group")
		})

		t.Run("a task may name only secrets its project, group or tenant holds", func(t *testing.T) {
			spec := model.TaskSpec{Command: []string{"python", "train.py"}, Secrets: []string{"HF_TOKEN"}}
			task, err := b.Svc.EnqueueTask(who.rita, platform.EnqueueInput{Name: "t", Project: "fraud-models", ComputeResource: "1 GPU", Spec: spec})
			platformtest.Must(t, err)
			if len(task.Spec.Secrets) != 1 || task.Spec.Env["HF_TOKEN"] != "" {
				t.Fatalf("task spec %+v", task.Spec)
			}
			spec.Secrets = []string{"WANDB_API_KEY"}
			before := b.snapshot(t)
			_, err = b.Svc.EnqueueTask(who.rita, platform.EnqueueInput{Name: "t", Project: "fraud-models", ComputeResource: "1 GPU", Spec: spec})
			platformtest.WantError(t, err, platform.CodeInvalid, "secret WANDB_API_KEY is in none of the vaults of project fraud-models, group ml-research or the tenant", "klique secret set WANDB_API_KEY --project fraud-models")
			b.unchanged(t, before)
		})

		t.Run("credentials passed as parameters or variables are refused with a pointer to the vault", func(t *testing.T) {
			for _, spec := range []model.TaskSpec{
				{Command: []string{"x"}, Env: map[string]string{"HF_TOKEN": value}},
				{Command: []string{"x"}, Parameters: map[string]string{"db_password": "hunter2"}},
				{Command: []string{"x"}, Parameters: map[string]string{"note": "AKIAIOSFODNN7EXAMPLE"}},
			} {
				before := b.snapshot(t)
				_, err := b.Svc.EnqueueTask(who.rita, platform.EnqueueInput{Name: "t", Project: "fraud-models", ComputeResource: "1 GPU", Spec: spec})
				platformtest.WantError(t, err, platform.CodeInvalid, "looks like a credential", "klique secret set")
				if strings.Contains(err.Error(), value) || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error repeats the credential: %v", err)
				}
				b.unchanged(t, before)
			}
		})

		t.Run("deleting a secret", func(t *testing.T) {
			platformtest.WantError(t, b.Svc.DeleteSecret(who.rita, model.ScopeGroup, "ml-research", "HF_TOKEN"), platform.CodeForbidden)
			platformtest.Must(t, b.Svc.DeleteSecret(who.lead, model.ScopeGroup, "ml-research", "HF_TOKEN"))
			platformtest.WantError(t, b.Svc.DeleteSecret(who.lead, model.ScopeGroup, "ml-research", "HF_TOKEN"), platform.CodeNotFound, "group ml-research has no secret HF_TOKEN")
		})
	})
}

func TestCredentialLookingInputs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key, value string
		refused    bool
	}{
		{"HF_TOKEN", "x", true},
		{"db_password", "x", true},
		{"AWS_SECRET_ACCESS_KEY", "x", true},
		{"openai_api_key", "x", true},
		{"privateKey", "x", true},
		{"ssh_private_key", "x", true},
		{"max_tokens", "256", false},
		{"tokenizer", "bpe", false},
		{"secret_sauce", "", false}, // an empty value carries nothing
		{"note", "sk-abcdefghijklmnopqrstuvwxyz0123", true},
		{"note", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", true},
		{"note", "-----BEGIN RSA PRIVATE KEY-----\nMIIE...", true},
		{"note", "a plain sentence about tokens", false},
		{"lr", "0.001", false},
	}
	for _, tc := range cases {
		spec := model.TaskSpec{Command: []string{"x"}, Parameters: map[string]string{tc.key: tc.value}}
		ps := platform.ValidateTaskSpec("t", &spec)
		if got := len(ps) > 0; got != tc.refused {
			t.Errorf("parameter %s=%q: refused %v, want %v (%q)", tc.key, tc.value, got, tc.refused, ps)
		}
	}
}
