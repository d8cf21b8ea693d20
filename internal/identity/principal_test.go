package identity

import (
	"context"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

func TestPrincipalMethods(t *testing.T) {
	p := &Principal{
		Role: model.RoleMember,
		Groups: []GroupGrant{
			{GroupID: "g1", GroupName: "alpha", Role: model.GroupRoleLead},
			{GroupID: "g2", GroupName: "beta", Role: model.GroupRoleMember},
		},
	}
	if p.IsAdmin() {
		t.Error("member is admin")
	}
	if !p.InGroup("g1") || !p.InGroup("g2") || p.InGroup("g3") || p.InGroup("") {
		t.Error("InGroup wrong")
	}
	if !p.LeadOf("g1") || p.LeadOf("g2") || p.LeadOf("g3") {
		t.Error("LeadOf wrong")
	}
	if ids := p.GroupIDs(); len(ids) != 2 || ids[0] != "g1" || ids[1] != "g2" {
		t.Errorf("GroupIDs = %v", ids)
	}
	if !p.CanWrite() {
		t.Error("member cannot write")
	}
	c := p.Clone()
	c.Groups[0].Role = model.GroupRoleMember
	if !p.LeadOf("g1") {
		t.Error("Clone shares groups")
	}

	for _, tc := range []struct {
		role         model.Role
		admin, write bool
	}{
		{model.RolePlatformAdmin, true, true},
		{model.RoleTenantAdmin, true, true},
		{model.RoleMember, false, true},
		{model.RoleViewer, false, false},
		{"", false, false},
		{"root", false, false},
	} {
		p := &Principal{Role: tc.role}
		if p.IsAdmin() != tc.admin || p.CanWrite() != tc.write {
			t.Errorf("role %q: IsAdmin=%v CanWrite=%v, want %v %v", tc.role, p.IsAdmin(), p.CanWrite(), tc.admin, tc.write)
		}
	}

	var nilP *Principal
	if nilP.IsAdmin() || nilP.CanWrite() || nilP.InGroup("g1") || nilP.LeadOf("g1") || nilP.GroupIDs() != nil {
		t.Error("nil principal must fail closed")
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := PrincipalFrom(ctx); ok {
		t.Error("principal in empty context")
	}
	if got := ChannelFrom(ctx); got != ChannelSystem {
		t.Errorf("default channel = %q", got)
	}
	if got := RequestIDFrom(ctx); got != "" {
		t.Errorf("default request id = %q", got)
	}
	if _, ok := PrincipalFrom(WithPrincipal(ctx, nil)); ok {
		t.Error("nil principal reported as present")
	}

	p := &Principal{UserID: "u1"}
	ctx = WithRequestID(WithChannel(WithPrincipal(ctx, p), ChannelCLI), "req-1")
	if got, ok := PrincipalFrom(ctx); !ok || got != p {
		t.Error("principal not carried")
	}
	if got := ChannelFrom(ctx); got != ChannelCLI {
		t.Errorf("channel = %q", got)
	}
	if got := RequestIDFrom(ctx); got != "req-1" {
		t.Errorf("request id = %q", got)
	}
}
