package autoscaler_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/klique-ai/klique/agents/autoscaler"
)

// fakeEC2 is an http.RoundTripper that answers the EC2 Query API with the
// recorded documents of testdata/ec2, keeping the instances it "started"
// so that DescribeInstances and TerminateInstances answer consistently.
// It never touches the network.
type fakeEC2 struct {
	t    *testing.T
	now  func() time.Time
	tmpl *template.Template

	mu        sync.Mutex
	instances []*fakeInstance
	// refuse maps a market (spot, on_demand) to the recorded error a
	// RunInstances for it gets.
	refuse map[string]string
	// stuckPending keeps new spot instances pending (a spot request not
	// fulfilled).
	stuckPending bool
	calls        []url.Values
}

type fakeTag struct{ Key, Value string }

type fakeInstance struct {
	ID, Type, State, LaunchTime, ClientToken string
	StateCode                                int
	Spot                                     bool
	Tags                                     []fakeTag
}

func newFakeEC2(t *testing.T, now func() time.Time) *fakeEC2 {
	dir := filepath.Join("testdata", "ec2")
	inst, err := os.ReadFile(filepath.Join(dir, "instance.xml"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template.Must(template.New("instance").Parse(string(inst)))
	for _, name := range []string{"run-instances.xml", "describe-instances.xml", "terminate-instances.xml"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		template.Must(tmpl.New(name).Parse(string(b)))
	}
	return &fakeEC2{t: t, now: now, tmpl: tmpl, refuse: map[string]string{}}
}

func (f *fakeEC2) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	form, err := url.ParseQuery(string(body))
	if err != nil {
		f.t.Errorf("EC2 request body is not a form: %v", err)
	}
	if !strings.HasPrefix(req.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") {
		f.t.Errorf("EC2 request not signed with the vault's access key: %q", req.Header.Get("Authorization"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, form)
	var out strings.Builder
	status := http.StatusOK
	switch form.Get("Action") {
	case "RunInstances":
		market := "on_demand"
		if form.Get("InstanceMarketOptions.MarketType") == "spot" {
			market = "spot"
		}
		if file := f.refuse[market]; file != "" {
			b, err := os.ReadFile(filepath.Join("testdata", "ec2", file))
			if err != nil {
				f.t.Fatal(err)
			}
			status = http.StatusInternalServerError
			if strings.Contains(file, "max-spot") {
				status = http.StatusBadRequest
			}
			out.Write(b)
			break
		}
		in := &fakeInstance{ID: fmt.Sprintf("i-0%016x", len(f.instances)+1), Type: form.Get("InstanceType"), State: "pending",
			LaunchTime: f.now().UTC().Format("2006-01-02T15:04:05.000Z"), Spot: market == "spot", ClientToken: form.Get("ClientToken")}
		for i := 1; form.Has(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", i)); i++ {
			in.Tags = append(in.Tags, fakeTag{form.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", i)), form.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Value", i))})
		}
		f.instances = append(f.instances, in)
		f.exec(&out, "run-instances.xml", in)
	case "DescribeInstances":
		var list []*fakeInstance
		for _, in := range f.instances {
			if in.State == "pending" && !(in.Spot && f.stuckPending) {
				in.State, in.StateCode = "running", 16
			}
			if f.matches(form, in) {
				list = append(list, in)
			}
		}
		f.exec(&out, "describe-instances.xml", list)
	case "TerminateInstances":
		var list []*fakeInstance
		for i := 1; form.Has(fmt.Sprintf("InstanceId.%d", i)); i++ {
			for _, in := range f.instances {
				if in.ID == form.Get(fmt.Sprintf("InstanceId.%d", i)) {
					in.State, in.StateCode = "terminated", 48
					list = append(list, in)
				}
			}
		}
		f.exec(&out, "terminate-instances.xml", list)
	default:
		f.t.Errorf("unexpected EC2 action %q", form.Get("Action"))
		status = http.StatusBadRequest
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"text/xml;charset=UTF-8"}},
		Body: io.NopCloser(strings.NewReader(out.String())), Request: req}, nil
}

func (f *fakeEC2) exec(w io.Writer, name string, data any) {
	if err := f.tmpl.ExecuteTemplate(w, name, data); err != nil {
		f.t.Fatal(err)
	}
}

// matches applies DescribeInstances' tag and state filters.
func (f *fakeEC2) matches(form url.Values, in *fakeInstance) bool {
	for i := 1; form.Has(fmt.Sprintf("Filter.%d.Name", i)); i++ {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		var values []string
		for j := 1; form.Has(fmt.Sprintf("Filter.%d.Value.%d", i, j)); j++ {
			values = append(values, form.Get(fmt.Sprintf("Filter.%d.Value.%d", i, j)))
		}
		switch {
		case name == "instance-state-name":
			if !slices.Contains(values, in.State) {
				return false
			}
		case strings.HasPrefix(name, "tag:"):
			ok := false
			for _, tg := range in.Tags {
				if tg.Key == strings.TrimPrefix(name, "tag:") && slices.Contains(values, tg.Value) {
					ok = true
				}
			}
			if !ok {
				return false
			}
		default:
			f.t.Errorf("unexpected filter %s", name)
		}
	}
	return true
}

// actions lists the EC2 calls made so far (RunInstances with its market).
func (f *fakeEC2) actions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		a := c.Get("Action")
		switch a {
		case "DescribeInstances":
			continue
		case "RunInstances":
			if c.Get("InstanceMarketOptions.MarketType") == "spot" {
				a += " spot"
			} else {
				a += " on-demand"
			}
			a += " " + c.Get("InstanceType")
		case "TerminateInstances":
			a += " " + c.Get("InstanceId.1")
		}
		out = append(out, a)
	}
	f.calls = f.calls[:0]
	return out
}

func newEC2Provider(t *testing.T, fake *fakeEC2) *autoscaler.EC2 {
	t.Helper()
	p, err := autoscaler.NewEC2(context.Background(), autoscaler.EC2Options{Region: "eu-west-1", AccessKeyID: "AKIDEXAMPLE",
		SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", HTTPClient: &http.Client{Transport: fake},
		Endpoint: "https://ec2.eu-west-1.amazonaws.com"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEC2ProviderSpeaksTheRecordedAPI(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	fake := newFakeEC2(t, func() time.Time { return now })
	p := newEC2Provider(t, fake)
	ctx := context.Background()
	tags := map[string]string{autoscaler.TagPool: "cloud-burst", autoscaler.TagAutoscaler: "as1", autoscaler.TagWorker: "burst-1"}
	spec := autoscaler.InstanceSpec{Name: "burst-1", Type: "g5.xlarge", GPUs: 1, Spot: true, Image: "ami-0a1b2c3d4e5f60718",
		Settings: map[string]string{"subnet_id": "subnet-0123456789abcdef0", "security_group_ids": "sg-1,sg-2"}, Tags: tags,
		Worker: autoscaler.WorkerBootstrap{Server: "https://klique.example", Token: "kqw_secret_token_value", Pool: "cloud-burst", Name: "burst-1", GPUs: 1}}

	t.Run("a spot instance starts tagged, with user data that boots a worker", func(t *testing.T) {
		in, err := p.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(in.ID, "i-0") || in.Type != "g5.xlarge" || !in.Spot || in.State != autoscaler.StatePending ||
			in.Name != "burst-1" || !in.LaunchedAt.Equal(now) {
			t.Fatalf("instance %+v", in)
		}
		call := fake.calls[0]
		for k, want := range map[string]string{"InstanceMarketOptions.SpotOptions.SpotInstanceType": "one-time",
			"InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior": "terminate", "SubnetId": "subnet-0123456789abcdef0",
			"SecurityGroupId.2": "sg-2", "ImageId": "ami-0a1b2c3d4e5f60718", "TagSpecification.1.ResourceType": "instance"} {
			if call.Get(k) != want {
				t.Errorf("RunInstances %s = %q, want %q", k, call.Get(k), want)
			}
		}
		ud, err := base64.StdEncoding.DecodeString(call.Get("UserData"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"printf '%s' 'kqw_secret_token_value' > /etc/klique/worker.token", "--name 'burst-1'",
			"--server 'https://klique.example'", "--pool 'cloud-burst'", "umask 077"} {
			if !strings.Contains(string(ud), want) {
				t.Errorf("user data lacks %q:\n%s", want, ud)
			}
		}
		fake.actions()
	})

	t.Run("List finds the instance by its tags and Terminate removes it", func(t *testing.T) {
		list, err := p.List(ctx, map[string]string{autoscaler.TagPool: "cloud-burst", autoscaler.TagAutoscaler: "as1"})
		if err != nil || len(list) != 1 || list[0].State != autoscaler.StateRunning || list[0].Tags[autoscaler.TagWorker] != "burst-1" {
			t.Fatalf("list %+v, %v", list, err)
		}
		other, err := p.List(ctx, map[string]string{autoscaler.TagPool: "cloud-burst", autoscaler.TagAutoscaler: "another"})
		if err != nil || len(other) != 0 {
			t.Fatalf("another autoscaler's list %+v, %v", other, err)
		}
		if err := p.Terminate(ctx, []string{list[0].ID}); err != nil {
			t.Fatal(err)
		}
		if list, err = p.List(ctx, tags); err != nil || len(list) != 0 {
			t.Fatalf("after terminate: %+v, %v", list, err)
		}
	})

	t.Run("capacity refusals are ErrNoCapacity and not retried at once", func(t *testing.T) {
		fake.actions()
		fake.refuse["spot"] = "insufficient-instance-capacity.xml"
		_, err := p.Start(ctx, spec)
		if !errorsIs(err, autoscaler.ErrNoCapacity) || !strings.Contains(err.Error(), "InsufficientInstanceCapacity") {
			t.Fatalf("insufficient capacity: %v", err)
		}
		fake.refuse["spot"] = "max-spot-instance-count-exceeded.xml"
		if _, err := p.Start(ctx, spec); !errorsIs(err, autoscaler.ErrNoCapacity) {
			t.Fatalf("spot limit: %v", err)
		}
		if got := fake.actions(); len(got) != 2 {
			t.Fatalf("a capacity refusal is not retried at once: calls %q", got)
		}
	})
}
