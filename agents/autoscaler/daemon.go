package autoscaler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/model"
)

// Options are what `klique autoscaler` is given.
type Options struct {
	// Server is the control plane's URL; Token a worker credential of the
	// pool the autoscaler serves (the same credential its instances'
	// workers use).
	Server, Token string
	// WorkerServer is the control plane's URL as instances reach it
	// (default: Server).
	WorkerServer string
	// Pool is the pool the operator expects the credential to be for.
	Pool string
	// Local configures the local provider (its Dir at least).
	Local   *Local
	Version string
	Log     *slog.Logger
	Now     func() time.Time
	// Interval overrides the sync interval (tests).
	Interval time.Duration
	// Client, when set, is the control plane client (tests).
	Client *client.Client
}

// Open reads the autoscaler's settings from the control plane and builds
// the daemon with the provider they name: AWS with the credentials the
// autoscaler names in the tenant's vault (or the SDK's default chain when
// it names none), or the local provider.
func Open(ctx context.Context, o Options) (*Autoscaler, error) {
	cl := o.Client
	if cl == nil {
		cl = client.New(o.Server, o.Token)
		cl.UserAgent = "klique-autoscaler/" + o.Version
		cl.Log = o.Log
	}
	resp, err := cl.SyncAutoscaler(ctx, &agentapi.AutoscalerSyncRequest{Version: o.Version, Instances: []agentapi.AutoscalerInstance{}})
	if err != nil {
		return nil, fmt.Errorf("read the autoscaler of the credential's pool: %w", err)
	}
	spec := resp.Autoscaler
	if o.Pool != "" && o.Pool != spec.Pool {
		return nil, fmt.Errorf("--pool %s: the worker credential is for pool %s", o.Pool, spec.Pool)
	}
	var p Provider
	switch spec.Provider {
	case model.ProviderAWS:
		creds := map[string]string{}
		if len(spec.CredentialSecrets) > 0 {
			if creds, err = cl.AutoscalerCredentials(ctx); err != nil {
				return nil, fmt.Errorf("read the provider credentials from the vault: %w", err)
			}
		}
		if p, err = NewEC2(ctx, EC2Options{Region: spec.Region, AccessKeyID: creds["AWS_ACCESS_KEY_ID"],
			SecretAccessKey: creds["AWS_SECRET_ACCESS_KEY"], SessionToken: creds["AWS_SESSION_TOKEN"]}); err != nil {
			return nil, err
		}
	case model.ProviderLocal:
		if o.Local == nil || o.Local.Dir == "" {
			return nil, fmt.Errorf("autoscaler %s uses the local provider: give --local-dir DIR for its worker processes", spec.Name)
		}
		p = o.Local
	default:
		return nil, fmt.Errorf("autoscaler %s names provider %q, which this daemon does not know", spec.Name, spec.Provider)
	}
	server := o.WorkerServer
	if server == "" {
		server = o.Server
	}
	return New(Config{Client: cl, Provider: p, Server: server, Token: o.Token, Version: o.Version, Log: o.Log, Now: o.Now,
		Interval: o.Interval}), nil
}
