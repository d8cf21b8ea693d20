package autoscaler

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// EC2 starts instances in AWS EC2. Each instance boots `klique worker`
// from its user data (the AMI must have klique installed): the worker
// connects out to the control plane with the pool's worker credential, so
// instances need outbound HTTPS only.
type EC2 struct {
	client *ec2.Client
}

// EC2Options configure the EC2 provider.
type EC2Options struct {
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are static
	// credentials (from the vault). Without them the SDK's default chain
	// is used (environment, shared config, instance role).
	AccessKeyID, SecretAccessKey, SessionToken string
	// HTTPClient and Endpoint replace the transport and the endpoint
	// (tests serve recorded responses through them).
	HTTPClient *http.Client
	Endpoint   string
}

// NewEC2 returns an EC2 provider.
func NewEC2(ctx context.Context, o EC2Options) (*EC2, error) {
	if o.Region == "" {
		return nil, errors.New("the EC2 provider needs a region")
	}
	var cfg aws.Config
	if o.AccessKeyID != "" || o.SecretAccessKey != "" {
		if o.AccessKeyID == "" || o.SecretAccessKey == "" {
			return nil, errors.New("AWS credentials need both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		creds := aws.Credentials{AccessKeyID: o.AccessKeyID, SecretAccessKey: o.SecretAccessKey, SessionToken: o.SessionToken, Source: "klique vault"}
		cfg = aws.Config{Region: o.Region, Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })}
	} else {
		var err error
		if cfg, err = awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(o.Region)); err != nil {
			return nil, fmt.Errorf("load AWS configuration: %w", err)
		}
	}
	c := ec2.NewFromConfig(cfg, func(opts *ec2.Options) {
		if o.HTTPClient != nil {
			opts.HTTPClient = o.HTTPClient
		}
		if o.Endpoint != "" {
			opts.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	return &EC2{client: c}, nil
}

// capacityCodes are EC2's refusals for lack of capacity: a fallback (or a
// later try) may succeed, so they are ErrNoCapacity.
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity": true, "InsufficientCapacity": true, "InsufficientHostCapacity": true,
	"SpotMaxPriceTooLow": true, "MaxSpotInstanceCountExceeded": true,
}

// UserData is the boot script of an instance: it writes the worker
// credential to a root-only file and starts the worker as a systemd unit.
// (User data is readable on the instance and by IAM principals allowed
// ec2:DescribeInstanceAttribute: give the autoscaler a worker credential
// of its own, revocable, see docs/estates.md.)
func UserData(b WorkerBootstrap) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	args := []string{"worker", "--pool", q(b.Pool), "--server", q(b.Server), "--token-file", "/etc/klique/worker.token", "--name", q(b.Name)}
	for _, a := range b.Args {
		args = append(args, q(a))
	}
	return "#!/bin/sh\nset -e\ninstall -d -m 0700 /etc/klique\numask 077\nprintf '%s' " + q(b.Token) + " > /etc/klique/worker.token\n" +
		"systemd-run --unit klique-worker --property=Restart=on-failure --property=KillMode=mixed /usr/local/bin/klique " + strings.Join(args, " ") + "\n"
}

// Start runs one instance, tagged, spot (one-time, terminated on
// interruption) or on-demand.
func (p *EC2) Start(ctx context.Context, spec InstanceSpec) (Instance, error) {
	in := &ec2.RunInstancesInput{
		ImageId: aws.String(spec.Image), InstanceType: types.InstanceType(spec.Type), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(UserData(spec.Worker)))),
	}
	tags := []types.Tag{{Key: aws.String("Name"), Value: aws.String(spec.Name)}}
	for _, k := range sortedKeys(spec.Tags) {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(spec.Tags[k])})
	}
	in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tags}}
	if spec.Spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate}}
	}
	if v := spec.Settings["subnet_id"]; v != "" {
		in.SubnetId = aws.String(v)
	}
	if v := spec.Settings["security_group_ids"]; v != "" {
		in.SecurityGroupIds = strings.Split(v, ",")
	}
	if v := spec.Settings["iam_instance_profile"]; v != "" {
		in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(v)}
	}
	if v := spec.Settings["key_name"]; v != "" {
		in.KeyName = aws.String(v)
	}
	// A capacity refusal comes back as a 500: retrying it at once is
	// pointless, the autoscaler falls back or tries at its next round.
	out, err := p.client.RunInstances(ctx, in, func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && capacityCodes[ae.ErrorCode()] {
			return Instance{}, fmt.Errorf("%w: %s: %s", ErrNoCapacity, ae.ErrorCode(), ae.ErrorMessage())
		}
		return Instance{}, fmt.Errorf("ec2 RunInstances %s: %w", spec.Type, err)
	}
	if len(out.Instances) != 1 {
		return Instance{}, fmt.Errorf("ec2 RunInstances %s: %d instances in the answer, want 1", spec.Type, len(out.Instances))
	}
	return fromEC2(out.Instances[0]), nil
}

// Terminate terminates instances.
func (p *EC2) Terminate(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := p.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		return fmt.Errorf("ec2 TerminateInstances: %w", err)
	}
	return nil
}

// List lists the instances with all the tags that are not terminated.
func (p *EC2) List(ctx context.Context, tags map[string]string) ([]Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-state-name"),
		Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}}}}
	for _, k := range sortedKeys(tags) {
		in.Filters = append(in.Filters, types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	var out []Instance
	pages := ec2.NewDescribeInstancesPaginator(p.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeInstances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, fromEC2(i))
			}
		}
	}
	return out, nil
}

func fromEC2(i types.Instance) Instance {
	in := Instance{ID: aws.ToString(i.InstanceId), Type: string(i.InstanceType), Spot: i.InstanceLifecycle == types.InstanceLifecycleTypeSpot,
		Tags: map[string]string{}}
	if i.LaunchTime != nil {
		in.LaunchedAt = i.LaunchTime.UTC()
	}
	for _, t := range i.Tags {
		in.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	in.Name = in.Tags[TagWorker]
	in.State = StateGone
	if i.State != nil {
		switch i.State.Name {
		case types.InstanceStateNamePending:
			in.State = StatePending
		case types.InstanceStateNameRunning:
			in.State = StateRunning
		}
	}
	return in
}
