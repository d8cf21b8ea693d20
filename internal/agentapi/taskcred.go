package agentapi

import "time"

// The task credential: a worker whose tasks run somewhere else (an HPC
// submitter on a login node, whose jobs run on compute nodes) asks for a
// credential good for one task and one attempt, and hands it to the job.
// Inside the job, the task's own process sends its logs, metrics and end
// with it over outbound HTTPS, so compute nodes need outbound access only
// and never hold the worker credential of the whole pool.

// TaskCredentialPrefix starts every task credential.
const TaskCredentialPrefix = "kqt_"

// PathTaskCredential is the suffix, after PathTasks+"{id}/", of the call
// that issues a task credential (POST, worker credential).
const PathTaskCredential = "credential"

// TaskCredentialRequest asks for a credential for the claimed attempt.
type TaskCredentialRequest struct {
	Attempt int `json:"attempt"`
}

// TaskCredentialResponse holds the credential. It is accepted, as
// "Authorization: Bearer kqt_…", only for the logs, metrics, secrets and
// finish of that task and attempt, until ExpiresAt, while the worker
// credential that asked for it is not revoked.
type TaskCredentialResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}
