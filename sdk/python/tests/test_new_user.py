"""A new user's first remote run, as the READMEs tell it, against a real
control plane whose worker has no SDK but the one it installs: the SDK
README's first example, run from a checkout in a virtual environment the
SDK was pip-installed into from a copy that is gone by then, is sent to
"1 A100" and completes on the worker, which installs the SDK from the
control plane (GET /sdk/python/klique-VERSION-py3-none-any.whl)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import klique
from tests.support import SDK, ControlPlane, run_script, throwaway_repo

CP = None


def setUpModule():
    global CP
    CP = ControlPlane(sdk_on_workers=False)


def tearDownModule():
    if CP is not None:
        CP.stop()


def readme_example():
    """The SDK README's first Python block."""
    with open(os.path.join(SDK, "README.md")) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)[0]


class NewUserTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="klique-sdk-new-user-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.client = klique.Client(CP.url, CP.alice)
        self.sdk = "klique @ %s/sdk/python/klique-%s-py3-none-any.whl" % (CP.url, klique.__version__)

    def wait_completed(self, task_id, timeout=120):
        deadline = time.monotonic() + timeout
        t = None
        while time.monotonic() < deadline:
            t = self.client.task(task_id)
            if t["status"] in ("COMPLETED", "FAILED", "ABORTED"):
                break
            time.sleep(0.3)
        lines = [l["line"] for l in self.client.logs(task_id, first=1000)]
        self.assertEqual(t["status"], "COMPLETED", "%s: %s\n%s\nworker log:\n%s" % (t["status"], t["reason"], "\n".join(lines), CP.log("worker")))
        return lines

    def test_the_readme_example_runs_on_a_worker_that_installs_the_sdk_from_the_control_plane(self):
        block = readme_example()
        self.assertIn('run.execute_remotely(compute_resource="1 A100")', block,
                      "the README's example must send work where the README's setup has a worker")
        # pip install ./sdk/python in the user's virtual environment, from a
        # copy that is then deleted: no worker could read that path.
        copy = os.path.join(self.dir, "sdk-copy")
        shutil.copytree(SDK, copy, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.go"))
        venv = os.path.join(self.dir, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        python = os.path.join(venv, "bin", "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-input", "--no-cache-dir", "--disable-pip-version-check", copy],
                       check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(copy)
        frozen = subprocess.check_output([python, "-m", "pip", "freeze", "--disable-pip-version-check"]).decode()
        self.assertIn("klique @ file://", frozen, "pip freeze names the SDK by its local path")

        _, work = throwaway_repo(self.dir, {"train.py": block, "out/model.pt": "weights\n"})
        env = CP.env(CP.alice, VIRTUAL_ENV=venv, PATH=os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", ""))
        env.pop("PYTHONPATH")
        p = subprocess.run([python, "train.py"], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 0, err)
        rid = re.search(r"klique: run (\S+) \(", err).group(1)
        self.assertIn("run %s sent to compute resource '1 A100' (queued)" % rid, err)
        self.assertNotIn("no longer takes reports", err)
        lines = self.wait_completed(rid)
        self.assertEqual(klique.Run.get(rid, CP.url, CP.alice).spec["packages"], [self.sdk])
        # The worker's Python environment for [sdk]: installed here, or by
        # the other test of this module (the worker caches it by the list).
        self.assertTrue(("installing " + self.sdk) in lines or any(l.startswith("reusing the cached Python environment") for l in lines), lines)
        loss = klique.Run.get(rid, CP.url, CP.alice).metrics()["loss"]
        self.assertEqual([p["value"] for p in loss], [1.0, 0.5, 1.0 / 3] * 2)

    def test_a_script_run_without_a_virtual_environment_gets_the_sdk_on_the_worker_too(self):
        _, work = throwaway_repo(self.dir, {"solo.py": "import klique\n"
                                            "run = klique.init(project='fraud-models')\n"
                                            "run.execute_remotely(compute_resource='1 A100')\n"
                                            "print('ran on', run.id)\n"})
        code, _, err = run_script(work, CP.env(CP.alice), ["solo.py"])
        self.assertEqual(code, 0, err)
        rid = re.search(r"klique: run (\S+) \(", err).group(1)
        self.assertIn("ran on " + rid, self.wait_completed(rid))
        self.assertEqual(klique.Run.get(rid, CP.url, CP.alice).spec["packages"], [self.sdk])


if __name__ == "__main__":
    unittest.main()
