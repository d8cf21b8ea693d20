package graph

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// The autoscaler's GraphQL types are gqlgen's own models: these convert
// between them and the platform service's, so the resolvers stay thin.

func autoscalerInput(in gqlmodel.AutoscalerInput) platform.AutoscalerInput {
	secs := func(v *int) time.Duration {
		if v == nil {
			return 0
		}
		return time.Duration(*v) * time.Second
	}
	out := platform.AutoscalerInput{Name: in.Name, Pool: in.Pool, Provider: strings.ToLower(string(in.Provider)),
		Region: deref(in.Region), MaxInstances: in.MaxInstances, IdleTimeout: secs(in.IdleTimeoutSeconds),
		SpinUpTimeout: secs(in.SpinUpTimeoutSeconds), SpotTimeout: secs(in.SpotTimeoutSeconds),
		SpotBlackout: secs(in.SpotBlackoutSeconds), Image: deref(in.Image), Settings: in.Settings,
		CredentialSecrets: in.CredentialSecrets, SpotFallback: in.SpotFallback == nil || *in.SpotFallback,
		Market: model.MarketSpot}
	if in.Market != nil && *in.Market == gqlmodel.AutoscalerMarketOnDemand {
		out.Market = model.MarketOnDemand
	}
	for _, it := range in.InstanceTypes {
		if it != nil {
			out.InstanceTypes = append(out.InstanceTypes, model.InstanceType{Name: it.Name, GPUs: it.Gpus})
		}
	}
	return out
}

func market(m string) gqlmodel.AutoscalerMarket {
	if m == model.MarketOnDemand {
		return gqlmodel.AutoscalerMarketOnDemand
	}
	return gqlmodel.AutoscalerMarketSpot
}

func (r *Resolver) autoscaler(ctx context.Context, v *platform.AutoscalerView) (*gqlmodel.Autoscaler, error) {
	if v == nil {
		return nil, nil
	}
	pool, err := optionalPool(r.Svc.Allocation.Pool(ctx, v.PoolID))
	if err != nil {
		return nil, err
	}
	sp, st := v.Spec, v.Status
	out := &gqlmodel.Autoscaler{ID: v.ID, Name: v.Name, Pool: pool, Provider: gqlmodel.AutoscalerProvider(strings.ToUpper(sp.Provider)),
		Region: sp.Region, MaxInstances: sp.MaxInstances, MaxGpus: sp.MaxInstances * sp.MaxGPUsPerInstance(),
		IdleTimeoutSeconds: int(sp.IdleTimeout / time.Second), SpinUpTimeoutSeconds: int(sp.SpinUpTimeout / time.Second),
		Market: market(sp.Market), SpotFallback: sp.SpotFallback, SpotTimeoutSeconds: int(sp.SpotTimeout / time.Second),
		SpotBlackoutSeconds: int(sp.SpotBlackout / time.Second), Image: sp.Image, Settings: nonNil(sp.Settings),
		CredentialSecrets: append([]string{}, sp.CredentialSecrets...), LastHeartbeatAt: v.LastHeartbeatAt, Online: v.Online,
		Version: st.Version, Instances: []*gqlmodel.AutoscalerInstance{}, Message: st.Message, SpotBlackoutUntil: st.SpotBlackoutUntil,
		CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, InstanceTypes: []*gqlmodel.InstanceType{}}
	for _, it := range sp.InstanceTypes {
		out.InstanceTypes = append(out.InstanceTypes, &gqlmodel.InstanceType{Name: it.Name, Gpus: it.GPUs})
	}
	for _, in := range st.Instances {
		out.Instances = append(out.Instances, &gqlmodel.AutoscalerInstance{ID: in.ID, Worker: in.Worker, Type: in.Type, Gpus: in.GPUs,
			Market: market(in.Market), State: in.State, LaunchedAt: in.LaunchedAt, RegisteredAt: in.RegisteredAt, IdleSince: in.IdleSince})
	}
	return out, nil
}
