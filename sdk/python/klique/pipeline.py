"""Pipelines from Python: a builder and a decorator form that both make the
definition the YAML file form takes (docs/pipelines.md, "The YAML
format") and start it through the same GraphQL call, runPipeline.

Builder:

    p = klique.Pipeline("fraud-train", project="fraud-models", params={"lr": 0.1})
    prep = p.step("prepare", compute_resource="1 GPU", command=["sh", "prep.sh"])
    train = p.step("train", compute_resource="1 A100", command=["python", "train.py", "--lr", "{lr}"],
                   params={"lr": p.param("lr"), "data": prep.artifact("dataset")}, retry=1)

Decorator (the function's body runs here, once, when it is decorated: it
returns the step's parameters; what a worker runs is the step's command):

    @p.step(compute_resource="1 GPU", command=["sh", "prep.sh"])
    def prepare():
        pass

    @p.step(compute_resource="1 A100", command=["python", "train.py", "--lr", "{lr}"], retry=1)
    def train(prepare):              # a parameter named after an earlier step: a dependency
        return {"lr": p.param("lr"), "data": prepare.artifact("dataset")}

The server checks the whole definition (cycles, unknown references,
compute resources open to you) and refuses it with every problem named;
the SDK refuses only what it can tell alone (two steps of one name, a
reference to another pipeline's step, a parameter the pipeline does not
declare) and does so before any call.
"""

import inspect
import json
import math
import re

from ._http import KliqueError

# A template naming a step ({{steps.NAME.artifacts.A}}, {{steps.NAME.metrics.M}}):
# the server makes the named step a dependency, and so does to_dict.
_STEP_REF = re.compile(r"\{\{\s*steps\.([^.{}\s]+)\.")

# The task spec's fields a step takes, as (keyword, the file form's name).
_SPEC = (("repository", "repository"), ("commit", "commit"), ("diff", "diff"), ("entry_point", "entryPoint"),
         ("working_dir", "workingDir"), ("packages", "packages"), ("image", "image"))

_INVALID = "BAD_USER_INPUT"


class Ref(str):
    """A template naming an output of a step ("{{steps.prepare.artifacts.dataset}}"):
    a string, which remembers its step, so that using it makes the step a
    dependency and using it in another pipeline is refused before any call."""

    def __new__(cls, text, step):
        s = super().__new__(cls, text)
        s.step = step
        return s


class Step:
    """A step of a Pipeline: a task spec on its own compute resource. Its
    artifact() and metric() are the templates later steps pass on."""

    def __init__(self, pipeline, name, fields, after):
        self.pipeline = pipeline
        self.name = name
        self._fields = fields
        self._after = after

    def artifact(self, name):
        """The template of an artifact this step publishes: in a later step's
        params, env or command it becomes an input of that step (passed by
        reference, found at KLIQUE_INPUT_<NAME>) and the input's name; in
        its inputs it is the input."""
        return Ref("{{steps.%s.artifacts.%s}}" % (self.name, _output_name("artifact", name)), self)

    def metric(self, name):
        """The template of a metric this step reports: a later step gets its
        final value, written as a number."""
        return Ref("{{steps.%s.metrics.%s}}" % (self.name, _output_name("metric", name)), self)

    def __call__(self, *args, **kwargs):
        raise KliqueError("step %s was added when p.step(%r, ...) was called: to decorate a function, leave the name out "
                          "(@p.step(compute_resource=...); the function's name is the step's)" % (self.name, self.name), _INVALID)

    def __repr__(self):
        return "<klique.Step %s of pipeline %s>" % (self.name, self.pipeline.name)


def _output_name(kind, name):
    if not isinstance(name, str) or not name.strip() or any(c in name for c in "{}"):
        raise KliqueError("%s name %r: give a non-empty name without braces" % (kind, name), _INVALID)
    return name


class Pipeline:
    """A pipeline being defined: a name, the project its steps' tasks belong
    to, its parameters with their defaults, and its steps in order."""

    def __init__(self, name, project=None, params=None):
        if not isinstance(name, str) or not name:
            raise KliqueError("a pipeline needs a name (letters, digits, '-' and '_')", _INVALID)
        self.name = name
        self.project = project
        self.params = {}
        for k, v in (params or {}).items():
            self.params[str(k)] = _scalar("pipeline %s: params" % name, k, v)
        self._steps = []
        self._by_name = {}

    @property
    def steps(self):
        """The steps, in the order they were added."""
        return list(self._steps)

    def param(self, name):
        """The template of one of the pipeline's parameters: "{{params.NAME}}"."""
        if name not in self.params:
            raise KliqueError("pipeline %s has no parameter %r: declare it in Pipeline(..., params={%r: DEFAULT}) (declared: %s)"
                              % (self.name, name, name, ", ".join(sorted(self.params)) or "none"), _INVALID)
        return "{{params.%s}}" % name

    def step(self, name=None, *, compute_resource=None, command=None, after=None, params=None, inputs=None,
             env=None, secrets=None, retry=None, on_failure=None, cache=None, group=None, **spec):
        """Adds a step. With a name (the builder form) it adds it now and
        returns it. Without one it is a decorator: the decorated function's
        name is the step's, its parameters name the earlier steps it depends
        on (each is passed the Step), and what it returns (a dict, or
        nothing) is the step's parameters; it returns the Step.

        compute_resource is the step's (a name open to you); command its
        argv (its {name} templates are filled by the worker from the step's
        parameters); after the steps (Step objects or names) it waits for,
        besides those its templates name; params, inputs and env its
        parameters, artifact inputs and environment; retry how often a
        failed task is enqueued again; on_failure "stop" (the default) or
        "continue"; cache=False never reuses an earlier run's result; group
        picks among compute resources of one name; spec takes the other
        fields of a task spec: repository, commit, diff, entry_point,
        working_dir, packages, image."""
        unknown = sorted(set(spec) - {k for k, _ in _SPEC})
        if unknown:
            raise KliqueError("step %s: unknown field %s (a step takes compute_resource, command, after, params, inputs, env, "
                              "secrets, retry, on_failure, cache, group and %s)"
                              % (name if isinstance(name, str) else "(decorated)", ", ".join(unknown), ", ".join(k for k, _ in _SPEC)),
                              _INVALID)
        opts = dict(compute_resource=compute_resource, command=command, params=params, inputs=inputs, env=env,
                    secrets=secrets, retry=retry, on_failure=on_failure, cache=cache, group=group, spec=spec)
        if callable(name):
            raise KliqueError("@p.step needs its arguments: write @p.step(compute_resource=..., command=[...])", _INVALID)
        if name is None:
            return lambda fn: self._decorated(fn, list(after or []), opts)
        return self._add(name, list(after or []), opts)

    def _decorated(self, fn, after, opts):
        where = "step %s" % getattr(fn, "__name__", fn)
        if not callable(fn):
            raise KliqueError("%s: @p.step(...) decorates a function" % where, _INVALID)
        deps = []
        for pname, prm in inspect.signature(fn).parameters.items():
            st = self._by_name.get(pname)
            if st is None or prm.kind in (prm.VAR_POSITIONAL, prm.VAR_KEYWORD):
                raise KliqueError("%s: its parameter %r names no earlier step of pipeline %s (its steps so far: %s): "
                                  "a decorated step's parameters are the steps it depends on"
                                  % (where, pname, self.name, ", ".join(s.name for s in self._steps) or "none"), _INVALID)
            deps.append(st)
        if fn.__name__ in self._by_name:
            # Refused before the body runs, as the builder refuses it.
            self._check_name(fn.__name__)
        out = fn(*deps)
        if out is not None and not isinstance(out, dict):
            raise KliqueError("%s: the function returns the step's parameters as a dict (or nothing), not %s"
                              % (where, type(out).__name__), _INVALID)
        if out:
            opts = dict(opts, params={**(opts["params"] or {}), **out})
        return self._add(fn.__name__, after + deps, opts)

    def _check_name(self, name):
        if not isinstance(name, str) or not name:
            raise KliqueError("pipeline %s: a step needs a name" % self.name, _INVALID)
        if name in self._by_name:
            raise KliqueError("pipeline %s already has a step named %r: give each step its own name" % (self.name, name), _INVALID)

    def _add(self, name, after, o):
        self._check_name(name)
        where = "step %s" % name
        if not o["compute_resource"] or not isinstance(o["compute_resource"], str):
            raise KliqueError("%s: say which compute resource it runs on (compute_resource=\"1 GPU\")" % where, _INVALID)
        f = {"name": name, "computeResource": o["compute_resource"]}
        if o["group"]:
            f["group"] = o["group"]
        if o["command"] is not None:
            if isinstance(o["command"], str) or not all(isinstance(a, str) for a in o["command"]):
                raise KliqueError("%s: command is a list of strings (an argv), not %r" % (where, o["command"]), _INVALID)
            f["command"] = [self._own(where, a) for a in o["command"]]
        for kw, key in _SPEC:
            v = o["spec"].get(kw)
            if v is not None and v != "" and v != []:
                f[key] = list(v) if key == "packages" else v
        for kw, key in (("params", "parameters"), ("env", "env"), ("inputs", "inputs")):
            if o[kw]:
                if not isinstance(o[kw], dict):
                    raise KliqueError("%s: %s is a dict of names to values" % (where, kw), _INVALID)
                f[key] = {str(k): self._own(where, _scalar(where + " " + kw, k, v)) for k, v in o[kw].items()}
        if o["secrets"]:
            f["secrets"] = list(o["secrets"])
        if o["on_failure"]:
            f["onFailure"] = o["on_failure"]
        if o["retry"]:
            if not isinstance(o["retry"], int) or isinstance(o["retry"], bool):
                raise KliqueError("%s: retry is a whole number of tries (0 to 10)" % where, _INVALID)
            f["retry"] = o["retry"]
        if o["cache"] is not None:
            f["cache"] = bool(o["cache"])
        deps = []
        for a in after:
            if isinstance(a, Step):
                self._own(where, Ref("", a))
                a = a.name
            if not isinstance(a, str):
                raise KliqueError("%s: after lists steps (Step objects or names), not %r" % (where, a), _INVALID)
            if a not in deps:
                deps.append(a)
        st = Step(self, name, f, deps)
        self._steps.append(st)
        self._by_name[name] = st
        return st

    def _own(self, where, v):
        """v as plain data, once any step it refers to is known to be ours."""
        if isinstance(v, Ref):
            if v.step.pipeline is not self:
                raise KliqueError("%s of pipeline %s refers to step %s of another klique.Pipeline (named %s): a step refers "
                                  "only to steps of its own pipeline; add that step to this one"
                                  % (where, self.name, v.step.name, v.step.pipeline.name), _INVALID)
            return str(v)
        return v

    def to_dict(self):
        """The definition, as the YAML file form writes it (JSON-able). Each
        step's dependsOn lists every step it waits for: those after= and
        a decorated function's parameters name, and those its templates
        refer to."""
        out = {"name": self.name}
        if self.project:
            out["project"] = self.project
        if self.params:
            out["params"] = dict(self.params)
        index = {s.name: i for i, s in enumerate(self._steps)}
        steps = []
        for s in self._steps:
            # A step's templates naming itself are the server's to refuse
            # (as is an after= naming it); they add no dependency here.
            named = {m for v in _strings(s._fields) for m in _STEP_REF.findall(v) if m in index and m != s.name}
            named.update(s._after)
            known = sorted((n for n in named if n in index), key=index.get)
            deps = known + [n for n in s._after if n not in index]
            d = {}
            for k, v in s._fields.items():
                d[k] = json.loads(json.dumps(v))  # a copy, as plain data
                if deps and k == ("group" if "group" in s._fields else "computeResource"):
                    d["dependsOn"] = deps
            steps.append(d)
        out["steps"] = steps
        return out

    def to_json(self, indent=2):
        """The definition as JSON text (which is YAML: `klique pipeline run -f` takes it)."""
        return json.dumps(self.to_dict(), indent=indent)

    def to_yaml(self):
        """The definition as YAML text, for `klique pipeline run -f FILE`."""
        return "\n".join(_yaml(self.to_dict(), 0)) + "\n"

    def run(self, params=None, project=None, wait=False, timeout=None, client=None, server=None, api_key=None):
        """Starts a run as you (runPipeline) and returns its PipelineRun;
        with wait=True, once it has ended (PipelineRun.wait). A refusal
        raises KliqueError with the server's message and problems."""
        if client is None:
            from .client import Client
            client = Client(server, api_key)
        run = client.run_pipeline(self, params=params, project=project)
        if wait:
            run.wait(timeout)
        return run

    def __repr__(self):
        return "<klique.Pipeline %s: %s>" % (self.name, ", ".join(s.name for s in self._steps) or "no steps")


def _scalar(where, key, v):
    if isinstance(v, float) and not math.isfinite(v):
        raise KliqueError("%s: %s is %r: give a finite number" % (where, key, v), _INVALID)
    if isinstance(v, (str, bool, int, float)):
        return v
    raise KliqueError("%s: %s must be a string, number or boolean, not %s" % (where, key, type(v).__name__), _INVALID)


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _yaml_scalar(v):
    # A JSON string is a YAML double-quoted scalar, so every string is
    # written as one: nothing in it is read as a number, a boolean or YAML.
    return json.dumps(v)


# Plain words a YAML reader may take for something other than a string
# (YAML 1.1 readers take yes/no/on/off for booleans): quoted as keys.
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}


def _yaml_key(k):
    return k if _PLAIN_KEY.match(k) and k.lower() not in _YAML_WORDS else json.dumps(k)


def _yaml(v, indent):
    pad = " " * indent
    lines = []
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (dict, list)) and x:
                lines.append("%s%s:" % (pad, _yaml_key(k)))
                lines.extend(_yaml(x, indent + 2))
            else:
                lines.append("%s%s: %s" % (pad, _yaml_key(k), _yaml_scalar(x) if not isinstance(x, (dict, list)) else json.dumps(x)))
    else:
        for x in v:
            if isinstance(x, dict) and x:
                inner = _yaml(x, indent + 2)
                inner[0] = pad + "- " + inner[0][indent + 2:]
                lines.extend(inner)
            elif isinstance(x, list) and x:
                lines.append(pad + "-")
                lines.extend(_yaml(x, indent + 2))
            else:
                lines.append(pad + "- " + json.dumps(x))
    return lines
