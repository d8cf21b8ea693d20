package autoscaler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
)

// TestTheControlPlaneSideOfTheAutoscaler checks the agent API the daemon
// speaks, against the real control plane: what a sync returns, how a note
// on waiting work reaches the task's reason, how provider credentials leave
// the vault (audited), and what another pool's credential gets.
func TestTheControlPlaneSideOfTheAutoscaler(t *testing.T) {
	t.Parallel()
	p := startPlane(t, cloudEstate)
	url := p.url
	ctx := context.Background()
	cl := client.New(url, p.workerSecret)

	_, err := cl.SyncAutoscaler(ctx, &agentapi.AutoscalerSyncRequest{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || !strings.Contains(ce.Message, "pool cloud-burst has no autoscaler") {
		t.Fatalf("a sync before the autoscaler exists: %v", err)
	}

	if _, errs := gqlTry(t, url, adminKey, `mutation { createAutoscaler(input: {name: "burst", pool: "cloud-burst", provider: AWS, region: "eu-west-1",
		image: "ami-0a1b2c3d4e5f60718", instanceTypes: [{name: "g5.xlarge", gpus: 1}], maxInstances: 2,
		credentialSecrets: ["AWS_ACCESS_KEY_ID"]}) { id } }`, nil); !strings.Contains(errs, "credential secret AWS_ACCESS_KEY_ID is not in the tenant's vault") {
		t.Fatalf("an autoscaler naming a missing secret: %q", errs)
	}
	for _, bad := range []struct{ input, want string }{
		{`provider: AWS, instanceTypes: [{name: "g5.xlarge", gpus: 1}], maxInstances: 2`, "an aws autoscaler needs a region"},
		{`provider: LOCAL, instanceTypes: [{name: "g5.xlarge", gpus: 0}], maxInstances: 2`, "instance type g5.xlarge: gpus must be 1 to 64"},
		{`provider: LOCAL, instanceTypes: [{name: "x", gpus: 1}], maxInstances: 2, settings: {aws_secret_access_key: "x"}`, "setting \"aws_secret_access_key\" is not known to the local provider"},
		{`provider: LOCAL, instanceTypes: [{name: "x", gpus: 1}], maxInstances: 2, idleTimeoutSeconds: -5`, "idleTimeout must be between 1 second and 7 days"},
	} {
		q := fmt.Sprintf(`mutation { createAutoscaler(input: {name: "bad", pool: "cloud-burst", %s}) { id } }`, bad.input)
		if _, errs := gqlTry(t, url, adminKey, q, nil); !strings.Contains(errs, bad.want) {
			t.Errorf("input %s: got %q, want %q", bad.input, errs, bad.want)
		}
	}
	gql(t, url, adminKey, `mutation { setSecret(scope: TENANT, name: "AWS_ACCESS_KEY_ID", value: "AKIAEXAMPLEKEY123456") { name } }`, nil)
	gql(t, url, adminKey, `mutation { setSecret(scope: TENANT, name: "AWS_SECRET_ACCESS_KEY", value: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY") { name } }`, nil)
	d := gql(t, url, adminKey, `mutation { createAutoscaler(input: {name: "burst", pool: "cloud-burst", provider: AWS, region: "eu-west-1",
		image: "ami-0a1b2c3d4e5f60718", instanceTypes: [{name: "g5.xlarge", gpus: 1}], maxInstances: 2,
		settings: {subnet_id: "subnet-0123456789abcdef0"}, credentialSecrets: ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]})
		{ id maxGpus market spotFallback spotBlackoutSeconds credentialSecrets } }`, nil)
	if strings.Contains(fmt.Sprint(d), "wJalrXUtnFEMI") || get(d, "createAutoscaler", "maxGpus") != 2.0 ||
		str(d, "createAutoscaler", "market") != "SPOT" || get(d, "createAutoscaler", "spotBlackoutSeconds") != 1800.0 {
		t.Fatalf("created %v", d)
	}

	id := p.enqueue(t, "waits-for-a-node", "true")
	waitFor(t, url, p.alice, "the task placed", `query($id: ID!) { task(id: $id) { status } }`, map[string]any{"id": id}, 20*time.Second,
		func(d map[string]any) bool { return str(d, "task", "status") == "PLACED" })

	resp, err := cl.SyncAutoscaler(ctx, &agentapi.AutoscalerSyncRequest{Version: "test", Message: "no spot capacity for g5.xlarge",
		Instances: []agentapi.AutoscalerInstance{{ID: "i-0abc", Worker: "burst-1", Type: "g5.xlarge", GPUs: 1, Market: "on_demand", State: "pending", LaunchedAt: time.Now()}},
		Waiting:   []agentapi.WaitingNote{{TaskIDs: []string{id}, Reason: "autoscaler burst is at its maximum of 2 instances"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Autoscaler.Pool != "cloud-burst" || resp.Autoscaler.Region != "eu-west-1" || len(resp.Placed) != 1 || resp.Placed[0].TaskID != id ||
		resp.Placed[0].MilliGPUsPerNode != 1000 || resp.SyncSeconds <= 0 || resp.Autoscaler.Settings["subnet_id"] != "subnet-0123456789abcdef0" {
		t.Fatalf("sync answer %+v", resp)
	}
	d = gql(t, url, p.alice, `query($id: ID!) { task(id: $id) { status reason } }`, map[string]any{"id": id})
	if want := "placed on pool cloud-burst; no worker of pool cloud-burst is online (none has registered); waiting for a node: autoscaler burst is at its maximum of 2 instances"; str(d, "task", "reason") != want {
		t.Fatalf("the task's reason: %v, want %q", d, want)
	}
	d = gql(t, url, adminKey, `{ pools { edges { node { name autoscaler { name online message version instances { id market state } } } } } }`, nil)
	if s := fmt.Sprint(d); !strings.Contains(s, "no spot capacity for g5.xlarge") || !strings.Contains(s, "i-0abc") || !strings.Contains(s, "ON_DEMAND") {
		t.Fatalf("the pool's autoscaler as admins see it: %v", d)
	}
	if s := fmt.Sprint(gql(t, url, p.alice, `{ pools { edges { node { name autoscaler { name } } } } }`, nil)); !strings.Contains(s, "autoscaler:<nil>") {
		t.Fatalf("a member sees the autoscaler: %v", s)
	}

	secrets, err := cl.AutoscalerCredentials(ctx)
	if err != nil || secrets["AWS_ACCESS_KEY_ID"] != "AKIAEXAMPLEKEY123456" || secrets["AWS_SECRET_ACCESS_KEY"] != "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" {
		t.Fatalf("credentials %v, %v", secrets, err)
	}
	audit := fmt.Sprint(gql(t, url, adminKey, `{ auditLog(first: 50) { edges { node { action detail } } } }`, nil))
	if !strings.Contains(audit, "autoscaler.credentials_read") || !strings.Contains(audit, "autoscaler.reported") || strings.Contains(audit, "wJalrXUtnFEMI") {
		t.Fatalf("audit trail: %s", audit)
	}

	// A worker credential of a pool without an autoscaler reads nothing.
	gql(t, url, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": strings.Replace(cloudEstate,
		"pools:\n", "pools:\n  - {name: other-cloud, kind: cloud, capacity: 1, gpuClass: h100}\n", 1)})
	other := str(gql(t, url, adminKey, `mutation { createWorkerCredential(pool: "other-cloud") { secret } }`, nil), "createWorkerCredential", "secret")
	if _, err := client.New(url, other).AutoscalerCredentials(ctx); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("another pool's credential: %v", err)
	}
}
