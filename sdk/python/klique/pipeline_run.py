"""A run of a pipeline as the GraphQL API shows it (pipelineRun): its state
and its steps', read again by refresh() and wait(), stopped by abort()."""

import json
import time

from ._http import KliqueError
from ._run import Run

RUN_FIELDS = """id name projectId ownerName state reason params definition createdAt finishedAt
  steps { name state reason dependsOn level computeResourceName taskId taskIds attempts retry onFailure
          cachedFromRunId startedAt finishedAt }"""

# The states a run does not leave.
FINAL = ("COMPLETED", "FAILED", "ABORTED")


class PipelineStep:
    """One step of a run: its state (PENDING, QUEUED, RUNNING, COMPLETED,
    FAILED, SKIPPED, CACHED, ABORTED), why, and its task."""

    def __init__(self, conn, d):
        self._conn = conn
        self.name = d["name"]
        self.state = d["state"]
        self.reason = d.get("reason") or ""
        self.depends_on = list(d.get("dependsOn") or [])
        self.level = d.get("level", 0)
        self.compute_resource = d.get("computeResourceName")
        # The step's current (or last) task; for a cached step the earlier
        # run's task it reuses.
        self.task_id = d.get("taskId")
        self.task_ids = list(d.get("taskIds") or [])
        self.attempts = d.get("attempts", 0)
        self.retry = d.get("retry", 0)
        self.on_failure = d.get("onFailure")
        self.cached = self.state == "CACHED"
        self.cached_from_run_id = d.get("cachedFromRunId")
        self.started_at = d.get("startedAt")
        self.finished_at = d.get("finishedAt")

    def run(self):
        """The step's task as a klique.Run (metrics, logs, artifacts)."""
        if not self.task_id:
            raise KliqueError("step %s has no task yet (it is %s: %s)" % (self.name, self.state, self.reason))
        return Run(self._conn, self.task_id).refresh()

    def __repr__(self):
        return "<klique.PipelineStep %s %s%s>" % (self.name, self.state, " task " + self.task_id if self.task_id else "")


class PipelineRun:
    """A run of a pipeline. Its fields are as last read: refresh() reads
    them again."""

    def __init__(self, conn, d):
        self._conn = conn
        self._set(d)

    def _set(self, d):
        self.id = d["id"]
        self.name = d["name"]
        self.project_id = d.get("projectId")
        self.owner = d.get("ownerName")
        self.state = d["state"]
        self.reason = d.get("reason") or ""
        self.params = dict(d.get("params") or {})
        self.created_at = d.get("createdAt")
        self.finished_at = d.get("finishedAt")
        # The definition the run runs, as the server keeps it (each step's
        # task fields under "spec").
        self.definition = json.loads(d["definition"]) if d.get("definition") else None
        self.steps = [PipelineStep(self._conn, s) for s in d.get("steps") or []]

    @classmethod
    def get(cls, conn, run_id):
        return cls(conn, _read(conn, run_id))

    @property
    def done(self):
        """Whether the run has ended (completed, failed or aborted)."""
        return self.state in FINAL

    def step(self, name):
        """The step of that name."""
        for s in self.steps:
            if s.name == name:
                return s
        raise KliqueError("pipeline run %s has no step '%s' (its steps: %s)" % (self.id, name, ", ".join(s.name for s in self.steps)),
                          "NOT_FOUND")

    def refresh(self):
        """Reads the run and its steps again; returns it."""
        self._set(_read(self._conn, self.id))
        return self

    def wait(self, timeout=None, poll=1.0):
        """Waits until the run has ended and returns it (whatever its end:
        look at state); KliqueError when timeout seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.refresh()
            if self.done:
                return self
            if deadline is not None and time.monotonic() > deadline:
                raise KliqueError("pipeline run %s is still %s after %s s (%s)" % (self.id, self.state, timeout,
                                  ", ".join("%s %s" % (s.name, s.state) for s in self.steps)))
            time.sleep(poll)

    def abort(self, reason=None):
        """Aborts the run: its queued and running steps' tasks are aborted,
        its pending steps skipped. Returns it as it is then."""
        self._set(abort_run(self._conn, self.id, reason))
        return self

    def __repr__(self):
        return "<klique.PipelineRun %s %s %s>" % (self.id, self.name, self.state)


def _read(conn, run_id):
    d = conn.graphql("query($id: ID!) { pipelineRun(id: $id) { %s } }" % RUN_FIELDS, {"id": run_id}).get("pipelineRun")
    if not d:
        raise KliqueError("no pipeline run '%s'" % run_id, "NOT_FOUND")
    return d


def abort_run(conn, run_id, reason):
    """abortPipelineRun: the run as it is once aborted."""
    return conn.graphql("mutation($id: ID!, $r: String) { abortPipelineRun(id: $id, reason: $r) { %s } }" % RUN_FIELDS,
                        {"id": run_id, "r": reason})["abortPipelineRun"]
