package client

import (
	"context"
	"net/http"

	"github.com/klique-ai/klique/internal/agentapi"
)

// SyncAutoscaler reports an autoscaler daemon's instances and returns its
// settings with the pool's waiting work and workers.
func (c *Client) SyncAutoscaler(ctx context.Context, req *agentapi.AutoscalerSyncRequest) (*agentapi.AutoscalerSyncResponse, error) {
	var out agentapi.AutoscalerSyncResponse
	if _, err := c.call(ctx, http.MethodPost, agentapi.PathAutoscalerSync, req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// AutoscalerCredentials fetches the provider credentials the autoscaler
// names from the tenant's vault.
func (c *Client) AutoscalerCredentials(ctx context.Context) (map[string]string, error) {
	var out agentapi.AutoscalerCredentialsResponse
	if _, err := c.call(ctx, http.MethodGet, agentapi.PathAutoscalerCredentials, nil, &out, 0); err != nil {
		return nil, err
	}
	return out.Secrets, nil
}
