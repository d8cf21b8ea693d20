"""A client for the tasks and pipeline runs of the public GraphQL API:
enqueue, status, logs, abort; run a pipeline, read and abort its runs. The
CLI does the same through the same API."""

import json
import time

from ._config import connect
from ._http import KliqueError
from ._run import TASK_FIELDS, Run
from .pipeline_run import RUN_FIELDS, PipelineRun, abort_run

FINAL = ("COMPLETED", "FAILED", "ABORTED")


class Client:
    """Talks to the control plane as the caller's key (the arguments, then
    KLIQUE_SERVER / KLIQUE_API_KEY, then 'klique login's file)."""

    def __init__(self, server=None, api_key=None):
        self._conn = connect(server, api_key)

    def graphql(self, query, variables=None):
        """Any operation of the public GraphQL API."""
        return self._conn.graphql(query, variables)

    def enqueue(self, name, compute_resource, command=None, project=None, parameters=None, group=None, **spec):
        """Sends a task to a compute resource; spec takes the other fields of
        EnqueueTaskInput (repository, commit, diff, entryPoint, workingDir,
        packages, image, env, secrets). Returns the task as a dict."""
        inp = dict(spec, name=name, computeResource=compute_resource)
        if command is not None:
            inp["command"] = list(command)
        if project:
            inp["project"] = project
        if group:
            inp["group"] = group
        if parameters:
            inp["parameters"] = {str(k): str(v) for k, v in parameters.items()}
        return self._conn.graphql("mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { %s } }" % TASK_FIELDS, {"in": inp})["enqueueTask"]

    def task(self, task_id):
        """The task as a dict (id, name, status, reason, exitCode, spec, ...)."""
        t = self._conn.graphql("query($id: ID!) { task(id: $id) { %s } }" % TASK_FIELDS, {"id": task_id}).get("task")
        if not t:
            raise KliqueError("no task '%s'" % task_id, "NOT_FOUND")
        return t

    def status(self, task_id):
        """QUEUED, PLACED, RUNNING, RUNNING_LOCALLY, COMPLETED, FAILED or ABORTED."""
        return self.task(task_id)["status"]

    def logs(self, task_id, after=0, first=1000):
        """Console lines after seq after: a list of {"seq", "stream", "line"}."""
        return Run(self._conn, task_id).logs(after, first)

    def abort(self, task_id, reason=None):
        """Stops a task that has not ended; returns it."""
        return self._conn.graphql("mutation($id: ID!, $r: String) { abortTask(id: $id, reason: $r) { %s } }" % TASK_FIELDS,
                                  {"id": task_id, "r": reason})["abortTask"]

    def wait(self, task_id, timeout=None, poll=1.0):
        """Waits for a task to end and returns it; KliqueError on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            t = self.task(task_id)
            if t["status"] in FINAL:
                return t
            if deadline is not None and time.monotonic() > deadline:
                raise KliqueError("task %s is still %s after %s s" % (task_id, t["status"], timeout))
            time.sleep(poll)

    def run(self, task_id):
        """The run of a task, for its metrics and artifacts."""
        return Run.get(task_id, self._conn.server, self._conn.api_key)

    def run_pipeline(self, definition, params=None, project=None):
        """Starts a run of a pipeline as you (runPipeline) and returns its
        PipelineRun. definition is a klique.Pipeline, its to_dict(), or the
        text of a pipeline file (YAML or JSON, as `klique pipeline run -f`
        reads it); params the values of its declared parameters; project
        overrides the definition's. The server checks the whole pipeline
        first: a refusal raises KliqueError with its message (every problem
        is in .problems) and starts nothing."""
        if hasattr(definition, "to_json"):
            text = definition.to_json()
        elif isinstance(definition, dict):
            text = json.dumps(definition)
        elif isinstance(definition, str):
            text = definition
        else:
            raise KliqueError("definition is a klique.Pipeline, a dict or a pipeline file's text, not %s" % type(definition).__name__,
                              "BAD_USER_INPUT")
        inp = {"definition": text}
        if params:
            inp["params"] = {str(k): _text(v) for k, v in params.items()}
        if project:
            inp["project"] = project
        d = self._conn.graphql("mutation($in: RunPipelineInput!) { runPipeline(input: $in) { %s } }" % RUN_FIELDS, {"in": inp})
        return PipelineRun(self._conn, d["runPipeline"])

    def pipeline_run(self, run_id):
        """A run of a pipeline you may see, with its steps."""
        return PipelineRun.get(self._conn, run_id)

    def pipeline_runs(self, project=None, pipeline=None, states=None, first=None):
        """Runs you may see, newest first: of a project (id or name), of a
        pipeline (its name), in some states (COMPLETED, ...)."""
        d = self._conn.graphql("query($p: String, $n: String, $s: [PipelineRunState!], $f: Int) "
                               "{ pipelineRuns(project: $p, pipeline: $n, states: $s, first: $f) { %s } }" % RUN_FIELDS,
                               {"p": project, "n": pipeline, "s": states, "f": first})
        return [PipelineRun(self._conn, r) for r in d["pipelineRuns"]]

    def abort_pipeline_run(self, run_id, reason=None):
        """Aborts a run: its queued and running steps' tasks are aborted,
        its pending steps skipped."""
        return PipelineRun(self._conn, abort_run(self._conn, run_id, reason))


def _text(v):
    """A parameter's value as the API takes it: text (true/false, numbers as Python writes them)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
