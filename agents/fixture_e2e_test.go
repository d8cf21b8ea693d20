package agents_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The fixture the end-to-end tests share: the estates they apply, the one
// GraphQL request under every helper that sends one, and the members they
// add to the control plane startControlPlane starts.

// estateFile builds the small estates of these tests. Every one has the
// A100 class and the two-GPU bare-metal pool that startControlPlane makes
// a worker credential for (and the in-process workers serve); a test adds
// its profiles, groups with their policies, projects and other pools.
type estateFile struct {
	bareMetal                                   string
	pools, profiles, groups, policies, projects []string
}

// newEstate's bare-metal pool is declared local: its workers run on this
// machine and report their app instances on loopback, which the router's
// address rule refuses for any other pool (docs/apps.md).
func newEstate() *estateFile {
	return &estateFile{bareMetal: "{name: bare-metal, kind: bare_metal, capacity: 2, gpuClass: a100-80gb, local: true}"}
}

// bareMetalWith adds fields to the bare-metal pool (", outputDestination: …").
func (f *estateFile) bareMetalWith(fields string) *estateFile {
	f.bareMetal = strings.TrimSuffix(f.bareMetal, "}") + fields + "}"
	return f
}

// pool adds a pool, written as a YAML flow mapping.
func (f *estateFile) pool(flow string) *estateFile { f.pools = append(f.pools, flow); return f }

func (f *estateFile) profile(name string, pools ...string) *estateFile {
	f.profiles = append(f.profiles, fmt.Sprintf("{name: %s, size: 1, timeWeight: 1, pools: [%s]}", name, strings.Join(pools, ", ")))
	return f
}

// group adds a group with no policy.
func (f *estateFile) group(name string) *estateFile {
	f.groups = append(f.groups, "{name: "+name+"}")
	return f
}

// policy adds a group and its policy; each resource is "NAME=PROFILE", a
// compute resource it opens.
func (f *estateFile) policy(group string, reservation, limit int, resources ...string) *estateFile {
	f.group(group)
	var crs []string
	for _, r := range resources {
		name, profile, _ := strings.Cut(r, "=")
		crs = append(crs, fmt.Sprintf("{name: %s, profile: %s}", name, profile))
	}
	f.policies = append(f.policies, fmt.Sprintf("{group: %s, reservation: %d, limit: %d, computeResources: [%s]}",
		group, reservation, limit, strings.Join(crs, ", ")))
	return f
}

// project adds a project, written as a YAML flow mapping.
func (f *estateFile) project(flow string) *estateFile {
	f.projects = append(f.projects, flow)
	return f
}

func (f *estateFile) String() string {
	var b strings.Builder
	b.WriteString("apiVersion: klique/v1\nkind: Estate\ngpuClasses:\n  - {name: a100-80gb, memoryGb: 80, pricePerGpuHour: 1.60, currency: USD}\n")
	for _, sec := range []struct {
		key   string
		items []string
	}{{"pools", append([]string{f.bareMetal}, f.pools...)}, {"profiles", f.profiles}, {"groups", f.groups},
		{"policies", f.policies}, {"projects", f.projects}} {
		if len(sec.items) == 0 {
			continue
		}
		b.WriteString(sec.key + ":\n")
		for _, it := range sec.items {
			b.WriteString("  - " + it + "\n")
		}
	}
	return b.String()
}

// oneGroup is the estate most tests use: group ml-research's "1 GPU" on
// the two GPUs of bare-metal, and its project fraud-models.
func oneGroup() *estateFile {
	return newEstate().profile("one-gpu", "bare-metal").policy("ml-research", 2, 2, "1 GPU=one-gpu").
		project("{name: fraud-models, group: ml-research, outputDestination: s3://ml-research/fraud-models}")
}

var estate = oneGroup().String()

// twoGroups shares the two GPUs of bare-metal: each group is guaranteed
// one and may borrow the other.
func twoGroups() *estateFile {
	return newEstate().profile("one-gpu", "bare-metal").
		policy("ml-research", 1, 2, "1 GPU=one-gpu").policy("vision", 1, 2, "1 GPU=one-gpu")
}

// graphql sends one GraphQL request as cred and returns the answer's
// status and body as sent; the helpers below read it.
func graphql(t *testing.T, url, cred, query string, vars map[string]any) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// gql runs one GraphQL request that must succeed.
func gql(t *testing.T, url, cred, query string, vars map[string]any) map[string]any {
	t.Helper()
	status, raw := graphql(t, url, cred, query, vars)
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Errors) > 0 || status != http.StatusOK {
		t.Fatalf("GraphQL %d: %s\nquery: %s", status, raw, query)
	}
	return out.Data
}

// gqlRaw runs a GraphQL request and returns the answer as sent.
func gqlRaw(t *testing.T, url, cred, query string, vars map[string]any) string {
	t.Helper()
	_, raw := graphql(t, url, cred, query, vars)
	return string(raw)
}

// gqlErrors runs a GraphQL request that must fail, and returns its errors.
func gqlErrors(t *testing.T, url, cred, query string, vars map[string]any) []gqlError {
	t.Helper()
	status, raw := graphql(t, url, cred, query, vars)
	var out struct {
		Errors []gqlError `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Errors) == 0 {
		t.Fatalf("want an error, got %d: %s\nquery: %s", status, raw, query)
	}
	return out.Errors
}

type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code string `json:"code"`
	} `json:"extensions"`
}

// gqlErr runs a GraphQL request that must fail, and returns its first
// error's message and code.
func gqlErr(t *testing.T, url, cred, query string, vars map[string]any) (string, string) {
	t.Helper()
	errs := gqlErrors(t, url, cred, query, vars)
	return errs[0].Message, errs[0].Extensions.Code
}

// gqlRefused runs a GraphQL request that must fail, and returns its
// errors' messages.
func gqlRefused(t *testing.T, url, cred, query string, vars map[string]any) string {
	t.Helper()
	var msgs []string
	for _, e := range gqlErrors(t, url, cred, query, vars) {
		msgs = append(msgs, e.Message)
	}
	return strings.Join(msgs, "; ")
}

// member adds a user with the member role in group, as the admin, and
// returns an API key of theirs.
func (e *e2e) member(t *testing.T, name, group string) string {
	t.Helper()
	gql(t, e.url, adminKey, `mutation($n: String!, $g: ID!) { createUser(input: {name: $n, role: MEMBER, groups: [{group: $g}]}) { id } }`,
		map[string]any{"n": name, "g": group})
	return str(gql(t, e.url, adminKey, `mutation($u: ID!, $k: String!) { createAPIKey(input: {name: $k, user: $u}) { secret } }`,
		map[string]any{"u": name, "k": name + " key"}), "createAPIKey", "secret")
}
