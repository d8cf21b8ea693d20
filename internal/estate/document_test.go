package estate_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
)

// smallDoc is a whole, valid estate file: two classes, two pools, three
// profiles, two groups with policies, one project.
const smallDoc = estatetest.Header + `
gpuClasses:
  - name: h100
    memoryGb: 80
    pricePerGpuHour: 2.5
  - name: a100
    memoryGb: 40
    currency: EUR
pools:
  - name: k8s
    kind: kubernetes
    capacity: 16
    gpuClass: h100
    labels: {site: dc1}
    executionPriority: [small, one-gpu]
  - name: metal
    kind: bare_metal
    capacity: 8
    gpuClass: a100
profiles:
  - name: small
    size: 0.125
    timeWeight: 0.125
    pools: [k8s]
  - name: one-gpu
    size: 1
    pools: [k8s, metal]
    queuingPriority: [vision, research]
  - name: train
    size: 2x8
    timeWeight: 16
    pools: [k8s]
groups:
  - name: research
  - name: vision
policies:
  - group: research
    reservation: 4
    limit: 16
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
      - {profile: train}
  - group: vision
    limit: 4
    timeBudget: {hours: 100, period: Week}
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
      - {name: eighth, profile: small}
projects:
  - name: fraud
    group: research
    outputDestination: s3://bucket/fraud
`

func TestParseDocument(t *testing.T) {
	t.Parallel()

	refused := []struct {
		name string
		text string
		want []string
	}{
		{
			name: "a typo in a field name is refused with its line",
			text: estatetest.Header + "pools:\n  - name: k8s\n    kind: kubernetes\n    capasity: 4\n",
			want: []string{"[6:", `unknown field "capasity"`},
		},
		{
			name: "an unknown top-level field is refused",
			text: estatetest.Header + "quotas: []\n",
			want: []string{`unknown field "quotas"`},
		},
		{
			name: "a file without apiVersion and kind is refused",
			text: "pools: []\n",
			want: []string{"start it with 'apiVersion: klique/v1' and 'kind: Estate'"},
		},
		{
			name: "a file without apiVersion is refused",
			text: "kind: Estate\n",
			want: []string{`apiVersion "" is not supported`, `use "klique/v1"`},
		},
		{
			name: "a file without kind is refused",
			text: "apiVersion: klique/v1\n",
			want: []string{`kind "" is not supported`, `use "Estate"`},
		},
		{
			name: "a wrong apiVersion is refused",
			text: "apiVersion: klique/v2\nkind: Estate\n",
			want: []string{`apiVersion "klique/v2" is not supported`, `use "klique/v1"`},
		},
		{
			name: "a wrong kind is refused",
			text: "apiVersion: klique/v1\nkind: Pool\n",
			want: []string{`kind "Pool" is not supported`},
		},
		{
			name: "an empty file is refused",
			text: "",
			want: []string{"estate file is empty"},
		},
		{
			name: "a file of blank lines is refused",
			text: " \n\t\n",
			want: []string{"estate file is empty"},
		},
		{
			name: "a list where a number belongs is refused with its line",
			text: estatetest.Header + "pools:\n  - name: k8s\n    capacity: [1, 2]\n",
			want: []string{"[5:", "expected a number, got a list or a map"},
		},
		{
			name: "a map where a number belongs is refused",
			text: estatetest.Header + "policies:\n  - group: g\n    limit: {gpus: 4}\n",
			want: []string{"[5:", "expected a number, got a list or a map"},
		},
		{
			name: "true where a number belongs is refused",
			text: estatetest.Header + "pools:\n  - name: k8s\n    capacity: true\n",
			want: []string{"expected a number, got true"},
		},
		{
			name: "a key given twice is refused",
			text: estatetest.Header + "kind: Estate\n",
			want: []string{`mapping key "kind" already defined`},
		},
		{
			// The YAML decoder panics on this (found by FuzzParseDocument).
			name: "a tagged scalar where a list belongs is refused, not a crash",
			text: estatetest.Header + "groups: !x 00\n",
			want: []string{"the YAML cannot be read", "check its syntax"},
		},
		{
			name: "a list at the top is refused",
			text: "- a\n- b\n",
			want: []string{"sequence was used where mapping is expected"},
		},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc, err := estate.ParseDocument([]byte(tc.text))
			if err == nil {
				t.Fatalf("ParseDocument accepted %q: %+v", tc.text, doc)
			}
			if !estatetest.ContainsAll(err.Error(), tc.want...) {
				t.Fatalf("error %q does not hold %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "estate file") {
				t.Fatalf("error %q does not start with \"estate file\"", err)
			}
		})
	}

	t.Run("a file over the size limit is refused before it is read", func(t *testing.T) {
		t.Parallel()
		data := append([]byte(estatetest.Header+"# "), bytes.Repeat([]byte("x"), estate.MaxDocumentBytes)...)
		_, err := estate.ParseDocument(data)
		if err == nil || !estatetest.ContainsAll(err.Error(), "bytes; the limit is 4,194,304") {
			t.Fatalf("ParseDocument = %v, want a size error", err)
		}
	})

	t.Run("a file of exactly the size limit is read", func(t *testing.T) {
		t.Parallel()
		data := []byte(estatetest.Header + "# ")
		data = append(data, bytes.Repeat([]byte("x"), estate.MaxDocumentBytes-len(data)-1)...)
		data = append(data, '\n')
		if _, err := estate.ParseDocument(data); err != nil {
			t.Fatalf("ParseDocument: %v", err)
		}
	})

	t.Run("the example estate parses", func(t *testing.T) {
		t.Parallel()
		doc, err := estate.ParseDocument(readExample(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(doc.GPUClasses) != 2 || len(doc.Pools) != 4 || len(doc.Profiles) != 6 || len(doc.Groups) != 3 || len(doc.Policies) != 3 || len(doc.Projects) != 3 {
			t.Fatalf("example read as %d classes, %d pools, %d profiles, %d groups, %d policies, %d projects",
				len(doc.GPUClasses), len(doc.Pools), len(doc.Profiles), len(doc.Groups), len(doc.Policies), len(doc.Projects))
		}
		if g := doc.Gateway; g == nil || len(g.Providers) != 1 || len(g.Routes) != 1 || len(g.Models) != 3 || len(g.Entitlements) != 1 ||
			len(g.Aliases) != 2 || len(g.Budgets) != 1 || len(g.RateLimits) != 1 || g.Guardrails == nil {
			t.Fatalf("example's gateway section read as %+v", g)
		}
	})
}
