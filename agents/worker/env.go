package worker

import (
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/model"
)

// Environment variables the worker gives every task.
const (
	EnvTaskID            = "KLIQUE_TASK_ID"
	EnvTaskName          = "KLIQUE_TASK_NAME"
	EnvAttempt           = "KLIQUE_TASK_ATTEMPT"
	EnvProject           = "KLIQUE_PROJECT"
	EnvOwner             = "KLIQUE_OWNER"
	EnvOutputDestination = "KLIQUE_OUTPUT_DESTINATION"
	EnvOutputsFile       = "KLIQUE_OUTPUTS_FILE"
	EnvParamsFile        = "KLIQUE_PARAMS_FILE"
	EnvParamPrefix       = "KLIQUE_PARAM_"
	EnvMetricsURL        = "KLIQUE_METRICS_URL"
	EnvMetricsFile       = "KLIQUE_METRICS_FILE"
	EnvWorker            = "KLIQUE_WORKER"
	EnvPool              = "KLIQUE_POOL"
	EnvGPUs              = "KLIQUE_GPUS"
)

// ParamEnvName is the variable a parameter is given in: KLIQUE_PARAM_ and
// the name upper-cased, each run of other characters than letters and
// digits written as one "_" ("learning-rate" → KLIQUE_PARAM_LEARNING_RATE).
func ParamEnvName(name string) string { return model.ParamEnvName(name) }

// taskFiles are the files the worker gives a task.
type taskFiles struct {
	params, metrics, outputs string
}

// taskEnv is a task's environment: its own variables, then its secrets,
// then the worker's KLIQUE_ variables (which a task cannot override).
func taskEnv(a *agentapi.Assignment, secrets map[string]string, files taskFiles, metricsURL, worker, pool string, gpus []agentapi.GPU) map[string]string {
	env := map[string]string{"PYTHONUNBUFFERED": "1"}
	for k, v := range a.Env {
		env[k] = v
	}
	for k, v := range secrets {
		env[k] = v
	}
	for k, v := range a.Parameters {
		env[ParamEnvName(k)] = v
	}
	idx := make([]string, len(gpus))
	for i, g := range gpus {
		idx[i] = strconv.Itoa(g.Index)
	}
	for k, v := range map[string]string{
		EnvTaskID: a.TaskID, EnvTaskName: a.Name, EnvAttempt: strconv.Itoa(a.Attempt),
		EnvProject: a.Project, EnvOwner: a.Owner, EnvOutputDestination: a.OutputDestination,
		EnvParamsFile: files.params, EnvMetricsFile: files.metrics, EnvOutputsFile: files.outputs,
		EnvMetricsURL: metricsURL, EnvWorker: worker, EnvPool: pool, EnvGPUs: strings.Join(idx, ","),
	} {
		env[k] = v
	}
	return env
}
