"""A run: the record of one execution of a script (docs/experiments.md,
"The Python SDK"). On someone's machine klique.init records a run in
state "running locally" and reports what the script does; under a worker
(KLIQUE_TASK_ID set) it attaches to the task the worker runs and reports
through the worker's local endpoints."""

import argparse
import atexit
import hashlib
import json
import mimetypes
import os
import sys
import threading
import time
import traceback
import uuid
from datetime import datetime, timezone

from . import _codestate
from ._config import connect
from ._http import KliqueError, plain_request

TASK_FIELDS = """id name status reason exitCode createdAt finishedAt
  project { name } computeResource { name }
  spec { command repository commit diff workingDir packages parameters }"""

# How often the reporter sends what it gathered, and the longest it stays
# silent: the control plane ends a local run that has not reported for 30
# minutes as failed ("the local process stopped reporting").
FLUSH_SECONDS = 2.0
HEARTBEAT_SECONDS = 60.0
MAX_BATCH = 5000

_current = None


def current():
    """The run klique.init started or attached to in this process, or None."""
    return _current


def _now():
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


# The platform's bounds on a parameter (tasks.MaxParamKeyLength and
# MaxParamValueLength), a metric's name and a reason: the SDK keeps within
# them rather than have a whole report refused.
MAX_PARAM_KEY = 128
MAX_PARAM_VALUE = 8192
MAX_METRIC_NAME = 128
MAX_REASON = 500


def _param_value(v):
    if isinstance(v, str):
        text = v
    elif isinstance(v, bool) or v is None or isinstance(v, (int, float)):
        text = json.dumps(v)
    else:
        try:
            text = json.dumps(v, sort_keys=True, default=str)
        except (TypeError, ValueError):
            text = str(v)
    if len(text) > MAX_PARAM_VALUE:
        text = text[:MAX_PARAM_VALUE - 20] + "... [cut]"
    return text


def _cast(text, like):
    """A parameter's text as the type of the value it overrides."""
    if isinstance(like, str):
        return text
    if isinstance(like, bool):
        return text.strip().lower() in ("1", "true", "yes", "on")
    try:
        if isinstance(like, int):
            return int(text)
        if isinstance(like, float):
            return float(text)
        return json.loads(text)
    except ValueError:
        return text


class _Tee:
    """A console stream that writes through and keeps each line for the run."""

    def __init__(self, run, stream, name):
        self._run, self._stream, self._name, self._partial = run, stream, name, ""

    def write(self, s):
        n = self._stream.write(s)
        if s:
            text = self._partial + s
            lines = text.split("\n")
            self._partial = lines.pop()
            for line in lines:
                self._run._add_line(self._name, line)
        return n

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if self._partial:
            self._run._add_line(self._name, self._partial)
            self._partial = ""
        self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class Run:
    """A run. klique.init returns one; Run.get(id) reads one back."""

    def __init__(self, conn, task_id, mode="read", task=None):
        self._conn = conn
        self.id = task_id
        self._mode = mode  # local, worker or read
        self._task = task or {}
        self._lock = threading.Lock()
        self._metrics, self._lines, self._params = [], [], {}
        self._steps = {}
        self._line_no = 0
        self._ended = False
        self._wake = threading.Event()
        self._thread = None
        self._exit_code = None
        self._worker_params = {}
        self._warned = False
        # Reports are sent one at a time, so numbered lines arrive in order.
        self._send_lock = threading.Lock()

    # Reading back.

    @classmethod
    def get(cls, task_id, server=None, api_key=None):
        """A run (any task) you may see, by id."""
        conn = connect(server, api_key)
        data = conn.graphql("query($id: ID!) { task(id: $id) { %s } }" % TASK_FIELDS, {"id": task_id})
        if not data.get("task"):
            raise KliqueError("no task '%s'" % task_id, "NOT_FOUND")
        return cls(conn, task_id, "read", data["task"])

    def refresh(self):
        if self._conn is None:
            raise KliqueError("under a worker the run is read through the control plane: use klique.Run.get(id) with a key")
        data = self._conn.graphql("query($id: ID!) { task(id: $id) { %s } }" % TASK_FIELDS, {"id": self.id})
        self._task = data.get("task") or self._task
        return self

    @property
    def name(self):
        return self._task.get("name")

    @property
    def status(self):
        """The status as the API names it: RUNNING_LOCALLY, QUEUED, RUNNING, COMPLETED, ..."""
        return self.refresh()._task.get("status") if self._mode == "read" else self._task.get("status")

    @property
    def parameters(self):
        return dict((self._task.get("spec") or {}).get("parameters") or {})

    @property
    def spec(self):
        return dict(self._task.get("spec") or {})

    def metrics(self):
        """Every metric of the run: name -> list of {"step", "value", "at"}, in order."""
        out, after = {}, 0
        while True:
            data = self._reader().graphql("query($id: ID!, $after: Int!) { task(id: $id) { metrics(after: $after, first: 10000) { seq name value step at } } }",
                                          {"id": self.id, "after": after})
            points = (data.get("task") or {}).get("metrics") or []
            for p in points:
                out.setdefault(p["name"], []).append({"step": p["step"], "value": p["value"], "at": p["at"]})
            if len(points) < 10000:
                return out
            after = points[-1]["seq"]

    def logs(self, after=0, first=1000):
        """The run's console lines after seq after: a list of {"seq", "stream", "line"}."""
        data = self._reader().graphql("query($id: ID!, $after: Int!, $first: Int!) { task(id: $id) { logs(after: $after, first: $first) { lines { seq stream line } } } }",
                                      {"id": self.id, "after": after, "first": first})
        return ((data.get("task") or {}).get("logs") or {}).get("lines") or []

    def artifacts(self):
        """The run's artifacts: a list of {"name", "size", "sha256", "contentType", "pointer", "download"}."""
        data = self._reader().graphql("query($id: ID!) { task(id: $id) { artifacts { name size sha256 contentType pointer downloadUrl } } }",
                                      {"id": self.id})
        out = []
        for a in (data.get("task") or {}).get("artifacts") or []:
            a = dict(a)
            a["download"] = a.pop("downloadUrl", None)
            out.append(a)
        return out

    def download_artifact(self, name, path):
        """Downloads an artifact to path, checking its SHA-256 against the
        run's record; returns path."""
        listed = {a["name"]: a for a in self.artifacts()}
        if name not in listed:
            raise KliqueError("run %s has no artifact '%s' (it has: %s)" % (self.id, name, ", ".join(sorted(listed)) or "none"), "NOT_FOUND")
        if listed[name].get("pointer"):
            raise KliqueError("artifact '%s' stayed where the run wrote it: %s" % (name, listed[name]["pointer"]))
        conn = self._reader()
        _, headers, body = conn.get(conn.artifact_url(self.id, name))
        want = (listed[name].get("sha256") or "").lower()
        got = hashlib.sha256(body).hexdigest()
        if want and got != want:
            raise KliqueError("artifact '%s' arrived with SHA-256 %s, not the %s recorded: download it again" % (name, got, want))
        tmp = str(path) + ".part"
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, path)
        return path

    def _reader(self):
        if self._conn is None:
            raise KliqueError("reading a run back needs the control plane: use klique.Run.get(id) with a key")
        return self._conn

    # Recording.

    def connect(self, params, name=None):
        """Records a dict's entries as parameters and returns the dict. Under
        a worker, entries the task has parameters for are set from them (as
        the type of the value they replace), so a clone's changed value
        reaches the script."""
        prefix = (name + "/") if name else ""
        if self._mode == "worker":
            for k, v in list(params.items()):
                if prefix + k in self._worker_params:
                    params[k] = _cast(self._worker_params[prefix + k], v)
            return params
        if self._mode == "local":
            with self._lock:
                for k, v in params.items():
                    key = (prefix + str(k))[:MAX_PARAM_KEY]
                    self._params[key] = _param_value(v)
            self._wake.set()
        return params

    def _connect_namespace(self, ns):
        """argparse's parsed arguments, as connect records a dict."""
        values = vars(ns)
        if self._mode == "worker":
            for k, v in list(values.items()):
                if k in self._worker_params:
                    setattr(ns, k, _cast(self._worker_params[k], v))
            return ns
        self.connect({k: v for k, v in values.items() if v is not None})
        return ns

    def log_metric(self, name, value, step=None):
        """Records one metric point (step: the next for the name when not given)."""
        name = str(name).strip()
        if not name or len(name) > MAX_METRIC_NAME:
            raise KliqueError("a metric needs a name of 1 to %d characters: %r" % (MAX_METRIC_NAME, name))
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise KliqueError("metric %s is not a finite number: %r" % (name, value))
        with self._lock:
            if step is None:
                step = self._steps.get(name, -1) + 1
            self._steps[name] = max(int(step), self._steps.get(name, -1))
            point = {"name": name, "value": value, "step": int(step), "at": _now()}
        if self._mode == "worker":
            url = os.environ.get("KLIQUE_METRICS_URL")
            if url:
                plain_request("POST", url, json.dumps({"name": name, "value": value, "step": int(step), "t": point["at"]}).encode(),
                              {"Content-Type": "application/json"})
            return
        if self._mode != "local":
            raise KliqueError("this run was read back, not started here: metrics come from the process that runs it")
        with self._lock:
            self._metrics.append(point)
        if len(self._metrics) >= MAX_BATCH:
            self._wake.set()

    def upload_artifact(self, name, obj, content_type=None):
        """Publishes an artifact: a file path, bytes, a str, or an object
        sent as JSON. Returns {"name", "size", "sha256"}."""
        data, ctype = _artifact_bytes(obj)
        ctype = content_type or ctype
        digest = hashlib.sha256(data).hexdigest()
        headers = {"Content-Type": ctype, "X-Klique-SHA256": digest}
        if self._mode == "worker":
            base = os.environ.get("KLIQUE_ARTIFACTS_URL")
            if not base:
                raise KliqueError("this worker gives the task no KLIQUE_ARTIFACTS_URL: it is older than artifacts; write the file to KLIQUE_OUTPUT_DESTINATION instead")
            import urllib.parse
            plain_request("PUT", base.rstrip("/") + "/" + urllib.parse.quote(name, safe=""), data, headers)
        elif self._mode == "local":
            self._conn.put(self._conn.artifact_url(self.id, name), data, headers)
        else:
            raise KliqueError("this run was read back, not started here: artifacts come from the process that runs it")
        return {"name": name, "size": len(data), "sha256": digest}

    def execute_remotely(self, compute_resource=None, queue=None, group=None, exit=True):
        """Sends this script, with the code state and parameters recorded, to
        a compute resource (queue is another name for it), and stops the
        local process. Under a worker it does nothing, so the same script
        runs on there."""
        if self._mode == "worker":
            return self
        if self._mode != "local" or self._ended:
            raise KliqueError("only a run started here and still running locally can be sent to a compute resource")
        target = compute_resource or queue
        if not target:
            raise KliqueError("say which compute resource to run on: execute_remotely(compute_resource=\"1 GPU\")")
        # Everything is sent before the send, with the console given back:
        # once the run is queued the server refuses the local process's
        # reports (the run is no longer running locally), so none may come
        # after it. The send lock keeps the reporter from sending meanwhile.
        captured = self._release_console()
        with self._send_lock:
            self._send()
            try:
                self._task = self._send_remotely(target, group)
            except BaseException:
                self._capture_console(captured)
                raise
            self._ended = True
            self._wake.set()
        err = getattr(sys, "__stderr__", None) or sys.stderr
        err.write("klique: run %s sent to compute resource '%s' (queued); follow it with: klique task logs -f %s\n" % (self.id, target, self.id))
        err.flush()
        if exit:
            sys.exit(0)
        return self

    def _send_remotely(self, target, group):
        """Calls executeRemotely, retrying a send whose answer was lost, and
        returns the queued task."""
        # One key for the send and its retries: a retry after a lost answer
        # gets the queued task instead of a refusal.
        variables = {"id": self.id, "cr": target, "group": group, "key": str(uuid.uuid4())}
        query = ("mutation($id: ID!, $cr: ID!, $group: ID, $key: String) { executeRemotely(id: $id, computeResource: $cr, group: $group, idempotencyKey: $key) { %s } }"
                 % TASK_FIELDS)
        for attempt in range(3):
            try:
                return self._conn.graphql(query, variables)["executeRemotely"]
            except KliqueError as e:
                if e.code is not None or attempt == 2:
                    raise
                time.sleep(1 + attempt)

    def end(self, status="completed", exit_code=None, reason=None):
        """Ends a local run (init does it at exit: completed, or failed with
        the exit code of an uncaught exception or sys.exit)."""
        if self._mode != "local" or self._ended:
            return
        self._flush()
        outcome = {"completed": "COMPLETED", "failed": "FAILED", "aborted": "ABORTED"}[status]
        if reason and len(reason) > MAX_REASON:
            reason = reason[:MAX_REASON - 10] + "... [cut]"
        self._stop()
        try:
            data = self._conn.graphql("mutation($id: ID!, $o: LocalRunOutcome!, $code: Int, $reason: String) { endLocalRun(id: $id, outcome: $o, exitCode: $code, reason: $reason) { %s } }" % TASK_FIELDS,
                                      {"id": self.id, "o": outcome, "code": exit_code, "reason": reason})
            self._task = data["endLocalRun"]
        except KliqueError as e:
            self._warn("could not end run %s: %s" % (self.id, e))

    # The reporter.

    def _add_line(self, stream, line):
        with self._lock:
            self._line_no += 1
            self._lines.append({"line": line, "stream": stream, "n": self._line_no, "at": _now()})

    def _start_reporter(self):
        self._thread = threading.Thread(target=self._report_loop, name="klique-reporter", daemon=True)
        self._thread.start()

    def _report_loop(self):
        last = time.monotonic()
        while not self._ended:
            self._wake.wait(FLUSH_SECONDS)
            self._wake.clear()
            if self._ended:
                return
            if self._pending() or time.monotonic() - last >= HEARTBEAT_SECONDS:
                self._flush()
                last = time.monotonic()

    def _pending(self):
        with self._lock:
            return bool(self._metrics or self._lines or self._params)

    def _flush(self):
        """Sends what was gathered, in batches; a failed send is kept for the
        next and said once on the console."""
        with self._send_lock:
            self._send()

    def _send(self):
        while not self._ended:
            with self._lock:
                metrics, lines, params = self._metrics[:MAX_BATCH], self._lines[:MAX_BATCH], self._params
                self._metrics, self._lines, self._params = self._metrics[MAX_BATCH:], self._lines[MAX_BATCH:], {}
            report = {}
            if metrics:
                report["metrics"] = metrics
            if lines:
                report["logs"] = lines
            if params:
                report["parameters"] = params
            try:
                data = self._conn.graphql("mutation($id: ID!, $in: LocalRunReportInput!) { reportLocalRun(id: $id, input: $in) { status } }",
                                          {"id": self.id, "in": report})
                self._task["status"] = data["reportLocalRun"]["status"]
            except KliqueError as e:
                if e.code == "BAD_USER_INPUT":
                    # The batch itself was refused: it is dropped, the
                    # rest goes on.
                    self._warn("a report of run %s was refused and dropped: %s" % (self.id, e))
                    continue
                if e.code in ("CONFLICT", "NOT_FOUND", "FORBIDDEN"):
                    self._warn("run %s no longer takes reports: %s" % (self.id, e))
                    self._ended = True
                    return
                with self._lock:
                    self._metrics[:0], self._lines[:0] = metrics, lines
                    for k, v in params.items():
                        self._params.setdefault(k, v)
                self._warn("could not report to the Klique server (will retry): %s" % e)
                return
            if not self._pending():
                return

    def _warn(self, msg):
        if not self._warned:
            self._warned = True
            err = getattr(sys, "__stderr__", None) or sys.stderr
            err.write("klique: %s\n" % msg)

    def _release_console(self):
        """Gives the console back (what it held stays to be sent) and
        returns the streams it took it from, for _capture_console."""
        released = {}
        for name in ("stdout", "stderr"):
            s = getattr(sys, name)
            if isinstance(s, _Tee) and s._run is self:
                s.flush()
                setattr(sys, name, s._stream)
                released[name] = s
        return released

    def _capture_console(self, released):
        """Takes back the console _release_console gave back."""
        for name, tee in released.items():
            if getattr(sys, name) is tee._stream:
                setattr(sys, name, tee)

    def _stop(self):
        """Stops capturing: the console is given back, the reporter ends."""
        if self._ended:
            return
        self._release_console()
        self._flush()
        self._ended = True
        self._wake.set()


def _artifact_bytes(obj):
    if isinstance(obj, os.PathLike) or (isinstance(obj, str) and os.path.isfile(obj)):
        path = os.fspath(obj)
        with open(path, "rb") as f:
            data = f.read()
        return data, mimetypes.guess_type(path)[0] or "application/octet-stream"
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj), "application/octet-stream"
    if isinstance(obj, str):
        return obj.encode("utf-8"), "text/plain; charset=utf-8"
    try:
        return json.dumps(obj, sort_keys=True).encode("utf-8"), "application/json"
    except (TypeError, ValueError) as e:
        raise KliqueError("artifact: give a file path, bytes, a str or an object JSON can write (%s)" % e) from None


def init(project=None, name=None, server=None, api_key=None, untracked="refuse", packages=None,
         capture_console=True, capture_argparse=True, group=None):
    """Starts tracking this script. On your machine it records a run in
    state "running locally" (with the code state, the command line and the
    packages) and captures parameters (run.connect, argparse), the console,
    metrics and artifacts until the process ends. Under a worker
    (KLIQUE_TASK_ID set) it attaches to the task being run instead."""
    global _current
    if _current is not None:
        return _current
    task_id = os.environ.get("KLIQUE_TASK_ID")
    if task_id:
        run = Run(None, task_id, "worker", {"id": task_id, "name": os.environ.get("KLIQUE_TASK_NAME"), "status": "RUNNING"})
        pf = os.environ.get("KLIQUE_PARAMS_FILE")
        if pf and os.path.isfile(pf):
            with open(pf) as f:
                run._worker_params = {str(k): str(v) for k, v in (json.load(f) or {}).items()}
        run._task["spec"] = {"parameters": dict(run._worker_params)}
        _current = run
        if capture_argparse:
            _patch_argparse(run)
        return run
    conn = connect(server, api_key)
    # The SDK itself is among the packages as the control plane serves it,
    # so that a worker on another host can install it (execute_remotely).
    state = _codestate.capture(untracked=untracked, packages=packages, sdk=_codestate.sdk_requirement(conn.server))
    if not state.get("command"):
        raise KliqueError("klique.init records a script run as 'python SCRIPT ...': run it from a file, not with python -c or a notebook")
    if not name:
        name = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "run"
    inp = dict(state, name=name)
    if project:
        inp["project"] = project
    if group:
        inp["group"] = group
    data = conn.graphql("mutation($in: StartLocalRunInput!) { startLocalRun(input: $in) { %s } }" % TASK_FIELDS, {"in": inp})
    task = data["startLocalRun"]
    run = Run(conn, task["id"], "local", task)
    _current = run
    err = sys.stderr
    err.write("klique: run %s (%s) in project %s, running locally: %s/#/task/%s\n"
              % (task["id"], task["name"], (task.get("project") or {}).get("name"), conn.server, task["id"]))
    if capture_console:
        sys.stdout = _Tee(run, sys.stdout, "stdout")
        sys.stderr = _Tee(run, sys.stderr, "stderr")
    if capture_argparse:
        _patch_argparse(run)
        _record_parsed(run)
    _watch_exit(run)
    run._start_reporter()
    return run


def _patch_argparse(run):
    """Records (or, under a worker, overrides) the arguments every parser
    parses from now on."""
    original = argparse.ArgumentParser.parse_known_args
    if getattr(original, "_klique", False):
        return

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = original(self, args, namespace)
        if _current is not None:
            _current._connect_namespace(ns)
        return ns, rest

    parse_known_args._klique = True
    argparse.ArgumentParser.parse_known_args = parse_known_args


def _record_parsed(run):
    """Arguments the script parsed before calling init: the Namespace
    objects among the main module's globals."""
    main = sys.modules.get("__main__")
    for v in list(vars(main).values()) if main else []:
        if isinstance(v, argparse.Namespace):
            run._connect_namespace(v)


def _watch_exit(run):
    """Ends the run when the process does: failed with the exit code on an
    uncaught exception or a non-zero sys.exit, aborted on Ctrl-C,
    completed otherwise."""
    previous_hook = sys.excepthook
    original_exit = sys.exit

    def excepthook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            run._exit_code = ("aborted", 130, "stopped with Ctrl-C")
        else:
            last = traceback.format_exception_only(kind, value)[-1].strip()
            run._exit_code = ("failed", 1, "the local process failed: " + last)
        previous_hook(kind, value, tb)

    def exit_(code=0):
        if code not in (None, 0):
            n = code if isinstance(code, int) else 1
            run._exit_code = ("failed", n, None)
        original_exit(code)

    def at_exit():
        if run._ended:
            return
        status, code, reason = run._exit_code or ("completed", 0, None)
        run.end(status, code, reason)

    sys.excepthook = excepthook
    sys.exit = exit_
    atexit.register(at_exit)
