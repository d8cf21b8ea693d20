"""A real control plane for the SDK's tests: bin/klique (or $KLIQUE_BIN)
serving on a free loopback port with a fresh SQLite data directory, the
example estate applied, a member with a key, and a process-mode worker for
the bare-metal pool (on which "1 A100" places work); on request a second one
for the onprem-k8s pool, on which the estate's "1 GPU" places work first, so
that two compute resources run on two workers."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(SDK))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary(tmp):
    b = os.environ.get("KLIQUE_BIN")
    if b:
        return os.path.abspath(b)
    out = os.path.join(tmp, "klique")
    p = subprocess.run(["go", "build", "-o", out, "./cmd/klique"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        raise RuntimeError("go build ./cmd/klique failed (or set KLIQUE_BIN):\n" + p.stdout.decode())
    return out


def gql(url, key, query, variables=None):
    req = urllib.request.Request(url + "/graphql", data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=30) as resp:
        out = json.loads(resp.read())
    if out.get("errors"):
        raise RuntimeError("GraphQL: %s\n%s" % (out["errors"], query))
    return out["data"]


class ControlPlane:
    """klique serve and klique worker, for the length of a test module."""

    def __init__(self, pools=("bare-metal",), sdk_on_workers=True):
        self.tmp = tempfile.mkdtemp(prefix="klique-sdk-test-")
        self.bin = _binary(self.tmp)
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.procs = []
        base = {k: v for k, v in os.environ.items() if not k.startswith("KLIQUE_")}
        base.update({"XDG_CONFIG_HOME": os.path.join(self.tmp, ".config"),
                     "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                     "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})
        self.base_env = base
        data = os.path.join(self.tmp, "data")
        self._start("serve", [self.bin, "serve"], dict(base, KLIQUE_LISTEN="127.0.0.1:%d" % self.port, KLIQUE_DATA_DIR=data,
                                                        KLIQUE_PUBLIC_URL=self.url, KLIQUE_ENGINE_INTERVAL="200ms"))
        self._wait_ready()
        with open(os.path.join(data, "admin.token")) as f:
            self.admin = f.read().strip()
        with open(os.path.join(REPO, "examples", "estate.yaml")) as f:
            gql(self.url, self.admin, "mutation($d: String!) { applyEstate(document: $d) { summary } }", {"d": f.read()})
        self.alice = self.user("alice", "ml-research")
        self.victor = self.user("victor", "vision")
        for pool in pools:
            self._worker(pool, sdk_on_workers)

    def _worker(self, pool, sdk_on_path=True):
        """A process-mode worker for pool, with two GPUs; its log is
        worker.log for bare-metal, worker-POOL.log for another pool. Without
        sdk_on_path its tasks find no SDK but the one they install."""
        secret = gql(self.url, self.admin, "mutation($p: ID!, $n: String) { createWorkerCredential(pool: $p, name: $n) { secret } }",
                     {"p": pool, "n": "sdk-" + pool})["createWorkerCredential"]["secret"]
        name = "worker" if pool == "bare-metal" else "worker-" + pool
        token = os.path.join(self.tmp, name + ".token")
        with open(token, "w") as f:
            f.write(secret)
        os.chmod(token, 0o600)
        # The worker's tasks import the SDK from this checkout: the process
        # runner gives them the worker's environment (less KLIQUE_*).
        env = dict(self.base_env, KLIQUE_SERVER=self.url, PYTHONPATH=SDK, KLIQUE_WORKER_TOKEN="")
        if not sdk_on_path:
            # As on another host: no SDK on the path, and a pip cache of
            # its own (this host's may hold a wheel of the user's copy).
            env.pop("PYTHONPATH")
            env["PIP_CACHE_DIR"] = os.path.join(self.tmp, name + "-pip-cache")
        self._start(name, [self.bin, "worker", "--pool", pool, "--token-file", token, "--gpus", "0,1",
                           "--name", "sdk-" + name, "--work-dir", os.path.join(self.tmp, name)], env)

    def _start(self, name, argv, env):
        log = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(argv, env=env, cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((name, p, log))

    def _wait_ready(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            for name, p, _ in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("klique %s exited: %s" % (name, self.log(name)))
            time.sleep(0.1)
        raise RuntimeError("klique serve was not ready in 60 s: " + self.log("serve"))

    def log(self, name):
        try:
            with open(os.path.join(self.tmp, name + ".log"), "rb") as f:
                return f.read().decode("utf-8", "replace")[-4000:]
        except OSError:
            return ""

    def user(self, name, group):
        gql(self.url, self.admin, "mutation($in: CreateUserInput!) { createUser(input: $in) { id } }",
            {"in": {"name": name, "groups": [{"group": group}]}})
        return gql(self.url, self.admin, "mutation($in: CreateAPIKeyInput!) { createAPIKey(input: $in) { secret } }",
                   {"in": {"name": name + " key", "user": name}})["createAPIKey"]["secret"]

    def env(self, key, **extra):
        """The environment of a script run as the holder of key."""
        e = dict(self.base_env, KLIQUE_SERVER=self.url, KLIQUE_API_KEY=key, PYTHONPATH=SDK, PYTHONUNBUFFERED="1")
        e.update(extra)
        return e

    def has_artifacts(self):
        """Whether this server has artifacts (Task.artifacts and the endpoint)."""
        t = gql(self.url, self.admin, '{ __type(name: "Task") { fields { name } } }')["__type"]
        return any(f["name"] == "artifacts" for f in t["fields"])

    def stop(self):
        for _, p, log in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def git(cwd, *args):
    subprocess.run(["git"] + list(args), cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def throwaway_repo(parent, files):
    """A checkout with a bare origin it pushed to, holding files."""
    origin = os.path.join(parent, "origin.git")
    work = os.path.join(parent, "work")
    git(parent, "init", "-q", "--bare", "-b", "main", origin)
    git(parent, "clone", "-q", origin, work)
    git(work, "checkout", "-q", "-b", "main")
    for name, text in files.items():
        path = os.path.join(work, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "first")
    git(work, "push", "-q", "-u", "origin", "main")
    return origin, work


def run_script(cwd, env, argv, timeout=60):
    p = subprocess.run([sys.executable] + argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()
