package client

import (
	"context"
	"net/http"

	"github.com/klique-ai/klique/internal/agentapi"
)

// TaskCredential asks for a credential good for one attempt of a task the
// worker holds, for work that reports from outside the worker (an HPC
// job). A client made with that credential may call Logs, Metrics,
// Secrets and Finish for that attempt only.
func (c *Client) TaskCredential(ctx context.Context, taskID string, attempt int) (*agentapi.TaskCredentialResponse, error) {
	var out agentapi.TaskCredentialResponse
	if _, err := c.call(ctx, http.MethodPost, taskPath(taskID, agentapi.PathTaskCredential), &agentapi.TaskCredentialRequest{Attempt: attempt}, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReportApp reports an app instance's readiness from where it runs (an
// HPC job, with its task credential): ready with its address, or not.
func (c *Client) ReportApp(ctx context.Context, taskID string, req *agentapi.AppReportRequest) error {
	_, err := c.call(ctx, http.MethodPost, taskPath(taskID, agentapi.PathAppStatus), req, nil, 0)
	return err
}
