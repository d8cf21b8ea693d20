"""Pipelines from the SDK (klique.Pipeline, builder and decorator forms)
against a real control plane with two process-mode workers: "1 A100"
places on the bare-metal pool's, "1 GPU" on the onprem-k8s pool's
(tests/support.py). Run from the repository's root:

    python3 -m unittest discover -s sdk/python/tests -t sdk/python -p test_pipelines.py
"""

import contextlib
import io
import os
import re
import time
import unittest
from unittest import mock

import klique
from tests.support import SDK, ControlPlane

CP = None

# prepare publishes a dataset of three rows (an artifact: what a step
# writes to KLIQUE_ARTIFACTS_DIR) and reports its row count as a metric.
PREPARE = ["sh", "-c", "printf 'id,amount\\n1,10\\n2,20\\n3,30\\n' > \"$KLIQUE_ARTIFACTS_DIR/dataset\"; "
                       "echo '{\"name\": \"rows\", \"value\": 3}' >> \"$KLIQUE_METRICS_FILE\"; echo prepared"]

# train reads the dataset the worker fetched for it (the input named for
# the artifact) and reports an accuracy through the SDK, attached to its
# task; {rows}, {lr} and {data} are its parameters, filled by the worker.
TRAIN_SCRIPT = (
    "import os, sys, klique\n"
    "run = klique.init()\n"
    "said, lr, data = sys.argv[1:]\n"
    "rows = open(os.environ['KLIQUE_INPUT_DATASET']).read().splitlines()[1:]\n"
    "print('train: %d rows (prepare said %s) from input %s at lr %s' % (len(rows), said, data, lr))\n"
    "run.log_metric('accuracy', len(rows) / 4)\n")
TRAIN = ["python", "-c", TRAIN_SCRIPT, "{rows}", "{lr}", "{data}"]

EVALUATE = ["sh", "-c", "echo \"evaluate: accuracy $KLIQUE_PARAM_ACCURACY\""]


def setUpModule():
    global CP
    CP = ControlPlane(pools=("bare-metal", "onprem-k8s"))


def tearDownModule():
    if CP is not None:
        CP.stop()


def built(name="sdk-train-eval"):
    """prepare → train → evaluate with the builder."""
    p = klique.Pipeline(name, project="fraud-models", params={"lr": 0.1})
    prep = p.step("prepare", compute_resource="1 GPU", command=PREPARE)
    train = p.step("train", compute_resource="1 A100", command=TRAIN, retry=1,
                   params={"data": prep.artifact("dataset"), "rows": prep.metric("rows"), "lr": p.param("lr")})
    p.step("evaluate", compute_resource="1 GPU", command=EVALUATE, on_failure="continue", cache=False,
           params={"accuracy": train.metric("accuracy")})
    return p


def decorated(name="sdk-train-eval", calls=None):
    """The same pipeline with decorators."""
    p = klique.Pipeline(name, project="fraud-models", params={"lr": 0.1})

    @p.step(compute_resource="1 GPU", command=PREPARE)
    def prepare():
        if calls is not None:
            calls.append("prepare")

    @p.step(compute_resource="1 A100", command=TRAIN, retry=1)
    def train(prepare):
        if calls is not None:
            calls.append("train")
        return {"data": prepare.artifact("dataset"), "rows": prepare.metric("rows"), "lr": p.param("lr")}

    @p.step(compute_resource="1 GPU", command=EVALUATE, on_failure="continue", cache=False)
    def evaluate(train):
        return {"accuracy": train.metric("accuracy")}

    return p


class PipelineTest(unittest.TestCase):
    def setUp(self):
        self.client = klique.Client(CP.url, CP.alice)

    def my_tasks(self):
        edges = self.client.graphql("{ tasks(filter: {mine: true}, first: 500) { edges { node { id name } } } }")["tasks"]["edges"]
        return [e["node"] for e in edges]

    def logs(self, step):
        return [line["line"] for line in step.run().logs()]

    def test_a_built_pipeline_runs_its_three_steps_on_two_compute_resources(self):
        run = built().run(params={"lr": 0.05}, server=CP.url, api_key=CP.alice, wait=True, timeout=120)
        self.assertEqual(run.state, "COMPLETED", "%s: %s\n%s\nworker log:\n%s\nk8s worker log:\n%s"
                         % (run.reason, run.steps, [(s.name, s.reason) for s in run.steps], CP.log("worker"), CP.log("worker-onprem-k8s")))
        self.assertEqual(run.params, {"lr": "0.05"})
        self.assertEqual([(s.name, s.state, s.compute_resource, s.cached) for s in run.steps],
                         [("prepare", "COMPLETED", "1 GPU", False), ("train", "COMPLETED", "1 A100", False),
                          ("evaluate", "COMPLETED", "1 GPU", False)])
        self.assertEqual(run.step("train").depends_on, ["prepare"])
        self.assertEqual(run.step("evaluate").depends_on, ["train"])
        # The artifact passed by reference (train read prepare's three rows),
        # the metric by value, the run's parameter over the default.
        self.assertIn("train: 3 rows (prepare said 3) from input dataset at lr 0.05", self.logs(run.step("train")))
        self.assertEqual([p["value"] for p in run.step("train").run().metrics()["accuracy"]], [0.75])
        self.assertIn("evaluate: accuracy 0.75", self.logs(run.step("evaluate")))
        # Each step is an ordinary task of the run's owner, named PIPELINE/STEP.
        tasks = {t["id"]: t["name"] for t in self.my_tasks()}
        self.assertEqual([tasks.get(s.task_id) for s in run.steps],
                         ["sdk-train-eval/prepare", "sdk-train-eval/train", "sdk-train-eval/evaluate"])
        # Another group's member does not find it.
        with self.assertRaises(klique.KliqueError) as e:
            klique.Client(CP.url, CP.victor).pipeline_run(run.id)
        self.assertEqual(e.exception.code, "NOT_FOUND")
        # The client reads the same run back.
        again = self.client.pipeline_run(run.id)
        self.assertEqual((again.name, again.state, [s.task_id for s in again.steps]),
                         ("sdk-train-eval", "COMPLETED", [s.task_id for s in run.steps]))

    def test_the_decorator_form_makes_the_builders_definition(self):
        calls = []
        d = decorated(calls=calls)
        # Each function's body ran once, here, when it was decorated.
        self.assertEqual(calls, ["prepare", "train"])
        self.assertEqual(d.to_dict(), built().to_dict())
        self.assertEqual([s.name for s in d.steps], ["prepare", "train", "evaluate"])
        want = {"name": "sdk-train-eval", "project": "fraud-models", "params": {"lr": 0.1}, "steps": [
            {"name": "prepare", "computeResource": "1 GPU", "command": PREPARE},
            {"name": "train", "computeResource": "1 A100", "dependsOn": ["prepare"], "command": TRAIN,
             "parameters": {"data": "{{steps.prepare.artifacts.dataset}}", "rows": "{{steps.prepare.metrics.rows}}",
                            "lr": "{{params.lr}}"}, "retry": 1},
            {"name": "evaluate", "computeResource": "1 GPU", "dependsOn": ["train"], "command": EVALUATE,
             "parameters": {"accuracy": "{{steps.train.metrics.accuracy}}"}, "onFailure": "continue", "cache": False}]}
        self.assertEqual(d.to_dict(), want)

    def test_local_mistakes_raise_before_any_call(self):
        p = built()
        other = klique.Pipeline("elsewhere", project="fraud-models")
        theirs = other.step("prepare", compute_resource="1 GPU", command=["true"])
        cases = [
            (lambda: p.step("train", compute_resource="1 GPU", command=["true"]),
             "pipeline sdk-train-eval already has a step named 'train': give each step its own name"),
            (lambda: p.step("late", compute_resource="1 GPU", params={"d": theirs.artifact("dataset")}),
             "step late of pipeline sdk-train-eval refers to step prepare of another klique.Pipeline (named elsewhere)"),
            (lambda: p.step("late", compute_resource="1 GPU", after=[theirs]),
             "step late of pipeline sdk-train-eval refers to step prepare of another klique.Pipeline (named elsewhere)"),
            (lambda: p.param("epochs"), "pipeline sdk-train-eval has no parameter 'epochs'"),
            (lambda: p.step("late", command=["true"]), "step late: say which compute resource it runs on"),
            (lambda: p.step("late", compute_resource="1 GPU", params={"d": [1, 2]}), "d must be a string, number or boolean, not list"),
            (lambda: p.step(compute_resource="1 GPU")(lambda nothing: None),
             "its parameter 'nothing' names no earlier step of pipeline sdk-train-eval (its steps so far: prepare, train, evaluate)"),
            (lambda: p.step(compute_resource="1 GPU")(lambda: [1]), "returns the step's parameters as a dict (or nothing), not list"),
        ]
        for fn, want in cases:
            with self.subTest(want=want):
                with self.assertRaises(klique.KliqueError) as e:
                    fn()
                self.assertIn(want, str(e.exception))
                self.assertEqual(e.exception.code, "BAD_USER_INPUT")
        # The refused steps were not added.
        self.assertEqual([s.name for s in p.steps], ["prepare", "train", "evaluate"])

        def train():
            self.fail("the body of a step named twice ran")
        with self.assertRaises(klique.KliqueError) as e:
            p.step(compute_resource="1 GPU")(train)
        self.assertIn("already has a step named 'train'", str(e.exception))

    def test_refusals_raise_with_the_servers_message_and_start_nothing(self):
        before = len(self.my_tasks())
        cycle = klique.Pipeline("sdk-cycle", project="fraud-models")
        a = cycle.step("a", compute_resource="1 GPU", command=["true"], after=["b"])
        cycle.step("b", compute_resource="1 GPU", command=["echo", a.metric("loss")])
        with self.assertRaises(klique.KliqueError) as e:
            cycle.run(server=CP.url, api_key=CP.alice)
        self.assertEqual(e.exception.code, "BAD_USER_INPUT")
        self.assertIn("the steps form a cycle: a → b → a", str(e.exception))

        unknown = klique.Pipeline("sdk-unknown", project="fraud-models")
        unknown.step("a", compute_resource="1 GPU", command=["echo", "{{steps.nowhere.metrics.loss}}", "{{params.lr}}"])
        with self.assertRaises(klique.KliqueError) as e:
            self.client.run_pipeline(unknown)
        self.assertEqual(len(e.exception.problems), 2, e.exception.problems)
        self.assertIn('step "a" refers to step "nowhere" ({{steps.nowhere.metrics.loss}}), which is not a step of the pipeline',
                      str(e.exception))
        self.assertIn('step "a" refers to {{params.lr}}, which the pipeline does not declare', str(e.exception))

        closed = klique.Pipeline("sdk-closed", project="fraud-models")
        closed.step("a", compute_resource="no such GPU", command=["true"])
        with self.assertRaises(klique.KliqueError) as e:
            closed.run(server=CP.url, api_key=CP.alice)
        self.assertIn("step \"a\": no compute resource 'no such GPU' is open to you", str(e.exception))

        for name in ("sdk-cycle", "sdk-unknown", "sdk-closed"):
            self.assertEqual(self.client.pipeline_runs(pipeline=name), [])
        self.assertEqual(len(self.my_tasks()), before)

    def test_abort_stops_the_running_step_and_skips_the_rest(self):
        # The YAML text carries the parameters (one named as a YAML word,
        # which to_yaml quotes) and the templates as the server reads them.
        p = klique.Pipeline("sdk-abort", project="fraud-models", params={"true": "no"})
        hold = p.step("hold", compute_resource="1 A100", command=["sleep", "60"], env={"WHY": p.param("true")})
        p.step("after", compute_resource="1 GPU", command=["echo", "{{steps.hold.metrics.never}}"], after=[hold])
        # Sent as the YAML text of the file form, which the server reads as
        # the definition the builder made.
        run = self.client.run_pipeline(p.to_yaml())
        self.assertEqual([(s["name"], s["spec"]["command"]) for s in run.definition["steps"]],
                         [("hold", ["sleep", "60"]), ("after", ["echo", "{{steps.hold.metrics.never}}"])])
        self.assertEqual((run.definition["params"], run.definition["steps"][0]["spec"]["env"]), ({"true": "no"}, {"WHY": "{{params.true}}"}))
        deadline = time.monotonic() + 60
        while run.step("hold").state != "RUNNING":
            self.assertLess(time.monotonic(), deadline, "hold is %s: %s" % (run.step("hold").state, run.step("hold").reason))
            time.sleep(0.3)
            run.refresh()
        task_id = run.step("hold").task_id
        run.abort("not needed")
        self.assertEqual(run.state, "ABORTED")
        self.assertIn("not needed", run.reason)
        run.wait(timeout=30, poll=0.3)
        self.assertEqual([(s.name, s.state) for s in run.steps], [("hold", "ABORTED"), ("after", "SKIPPED")])
        self.assertEqual(self.client.wait(task_id, timeout=30, poll=0.3)["status"], "ABORTED")
        self.assertIsNone(run.step("after").task_id)

    def test_the_readme_examples_run(self):
        with open(os.path.join(SDK, "README.md")) as f:
            text = f.read()
        blocks = re.findall(r"```python\n(.*?)```", text[text.index("## Pipelines"):], re.S)
        self.assertGreaterEqual(len(blocks), 2)
        ns = {}
        with mock.patch.dict(os.environ, {"KLIQUE_SERVER": CP.url, "KLIQUE_API_KEY": CP.alice}), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            exec(blocks[0], ns)
            builder, first = ns["p"], ns["run"]
            exec(blocks[1], ns)
        self.assertEqual(first.state, "COMPLETED", "%s %s" % (first.reason, first.steps))
        self.assertIn("COMPLETED [('prepare', 'COMPLETED'", out.getvalue())
        self.assertIn("lr 0.05 rows 1", self.logs(first.step("train")))
        self.assertIn("accuracy 0.93", self.logs(first.step("evaluate")))
        self.assertIsNot(ns["p"], builder)
        self.assertEqual(ns["p"].to_dict(), builder.to_dict())
        # The decorator form's run is a second run of the same definition:
        # prepare and train are reused, evaluate (cache=False) runs again.
        second = ns["run"].wait(timeout=60, poll=0.3)
        self.assertEqual([(s.name, s.state) for s in second.steps],
                         [("prepare", "CACHED"), ("train", "CACHED"), ("evaluate", "COMPLETED")], second.reason)
        self.assertEqual(second.step("train").task_id, first.step("train").task_id)
        self.assertEqual(second.step("train").cached_from_run_id, first.id)


if __name__ == "__main__":
    unittest.main()
