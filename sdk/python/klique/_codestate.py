"""The code state of a run, as 'klique run' records it (internal/codestate):
the remote a worker can clone, the commit, the uncommitted changes against
it (staged and not), the untracked files (refused, included or ignored),
the working directory relative to the checkout's root, the command line
and the Python packages."""

import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

from ._http import KliqueError

MAX_DIFF_BYTES = 2 << 20


def _git(root, *args, env=None):
    full = dict(os.environ)
    if env:
        full.update(env)
    p = subprocess.run(["git"] + list(args), cwd=root, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise KliqueError("git %s: %s" % (" ".join(args[:2]), p.stderr.decode("utf-8", "replace").strip()))
    return p.stdout.decode("utf-8", "replace")


def command_line():
    """The command that reruns this script: the interpreter by the name a
    worker's environment has ("python"), then sys.argv."""
    argv = list(sys.argv) or [""]
    if argv[0] in ("", "-c"):
        return []
    return ["python"] + argv


def capture(directory=None, untracked="refuse", packages=None, script=None, sdk=None):
    """Returns the code state as the startLocalRun input's fields. sdk is
    the requirement that installs this SDK on a worker (sdk_requirement):
    it joins the packages found or given; packages=[] records none."""
    directory = os.path.abspath(directory or os.getcwd())
    state = {"command": command_line()}
    try:
        root = _git(directory, "rev-parse", "--show-toplevel").strip()
    except (KliqueError, FileNotFoundError):
        root = None
    if root:
        state.update(_checkout(directory, root, untracked))
    else:
        root = directory
        state.update(_script(directory, script or (sys.argv[0] if sys.argv else "")))
    if len(state.get("diff", "")) > MAX_DIFF_BYTES:
        raise KliqueError("the changes to record are %d KiB as a diff, more than the %d KiB a run may carry: commit and push them, or move data files out of the checkout"
                          % (len(state["diff"]) >> 10, MAX_DIFF_BYTES >> 10))
    if packages is None:
        found = _packages(os.path.join(root, state.get("workingDir") or ""), root)
    else:
        found = list(packages)
    if sdk and (packages is None or packages):
        found = with_sdk(found, sdk)
    if found:
        state["packages"] = found
    return state


# Where the control plane serves this SDK as a wheel (internal/server,
# sdk.go; the wheel is built from the same sources, sdk/python/embed.go).
SDK_PATH = "/sdk/python/"


def sdk_requirement(server):
    """The requirement that installs this version of the SDK from the
    control plane at server: a URL every worker of it can reach."""
    from . import __version__
    return "klique @ %s%sklique-%s-py3-none-any.whl" % (server.rstrip("/"), SDK_PATH, __version__)


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:@\s*(\S+))?")


def with_sdk(packages, sdk):
    """packages with the SDK as sdk says, for a worker on another host: an
    entry for klique that only this machine can install ('klique @
    file:///...', which pip freeze writes for 'pip install ./sdk/python',
    or a bare 'klique' or 'klique==V', which no public index has) gives way
    to sdk, which is added when no entry names klique. An entry naming
    another URL for it ('klique @ https://...') is the user's choice and
    stays."""
    out = []
    for p in packages:
        m = _REQUIREMENT.match(p)
        if m and re.sub(r"[-_.]+", "-", m.group(1).lower()) == "klique":
            url = m.group(2) or ""
            if url and not url.lower().startswith("file:"):
                return list(packages)
            continue
        out.append(p)
    return out + [sdk]


def _checkout(directory, root, untracked):
    out = {}
    rel = os.path.relpath(os.path.realpath(directory), os.path.realpath(root)).replace(os.sep, "/")
    if rel != ".":
        out["workingDir"] = rel
    try:
        head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD").strip()
    except KliqueError:
        head = ""
    if not head:
        raise KliqueError("this checkout (%s) has no commit yet: commit once (git commit), push it, and run again" % root)
    try:
        branch = _git(root, "symbolic-ref", "--short", "-q", "HEAD").strip()
    except KliqueError:
        branch = ""
    remote = _remote(root, branch)
    base = head
    if remote:
        out["repository"] = clone_url(root, _git(root, "remote", "get-url", remote).strip())
        on_remote = _git(root, "for-each-ref", "--contains", head, "--format=%(refname)", "refs/remotes/%s/" % remote).strip()
        if not on_remote:
            # A worker could not check out a commit the remote lacks: the
            # run records the newest commit it has, and the rest as a diff.
            base = _remote_base(root, remote) or head
    out["commit"] = base
    listed = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
    extra = [f for f in listed.split("\0") if f]
    env = None
    tmp = None
    try:
        if extra and untracked == "include":
            index = _git(root, "rev-parse", "--path-format=absolute", "--git-path", "index").strip()
            fd, tmp = tempfile.mkstemp(prefix="klique-sdk-index-")
            os.close(fd)
            try:
                with open(index, "rb") as src, open(tmp, "wb") as dst:
                    dst.write(src.read())
            except FileNotFoundError:
                pass
            env = {"GIT_INDEX_FILE": tmp}
            _git(root, "add", "--intent-to-add", "--", *extra, env=env)
        elif extra and untracked != "ignore":
            shown = extra[:10] + (["and %d more" % (len(extra) - 10)] if len(extra) > 10 else [])
            raise KliqueError("files git does not track would be missing from the run: %s; add them (git add), ignore them (.gitignore), "
                              "or pass untracked=\"include\" to klique.init to send them or untracked=\"ignore\" to leave them out"
                              % ", ".join(shown))
        diff = _git(root, "diff", "--binary", "--no-color", "--no-ext-diff", base, env=env)
    finally:
        if tmp:
            os.unlink(tmp)
    if diff:
        out["diff"] = diff + "\n"
    return out


def _remote(root, branch):
    if branch:
        try:
            r = _git(root, "config", "branch.%s.remote" % branch).strip()
            if r and r != ".":
                return r
        except KliqueError:
            pass
    remotes = _git(root, "remote").split()
    if "origin" in remotes:
        return "origin"
    if len(remotes) == 1:
        return remotes[0]
    return ""


def _remote_base(root, remote):
    best, best_count = "", -1
    for ref in _git(root, "for-each-ref", "--format=%(refname)", "refs/remotes/%s/" % remote).split():
        try:
            mb = _git(root, "merge-base", "HEAD", ref).strip()
            count = int(_git(root, "rev-list", "--count", mb).strip())
        except (KliqueError, ValueError):
            continue
        if count > best_count:
            best, best_count = mb, count
    return best


def clone_url(root, raw):
    """A relative local remote made absolute; credentials in an HTTP URL
    dropped (a run record never holds one)."""
    if "://" in raw:
        u = urllib.parse.urlsplit(raw)
        if u.username is None and u.password is None:
            return raw
        host = u.hostname or ""
        if u.port:
            host += ":%d" % u.port
        if u.scheme not in ("http", "https") and u.username:
            host = u.username + "@" + host
        return urllib.parse.urlunsplit((u.scheme, host, u.path, u.query, u.fragment))
    colon, slash = raw.find(":"), raw.find("/")
    if raw.startswith("/") or (colon > 0 and (slash < 0 or colon < slash)):
        return raw
    return os.path.join(root, raw)


def _script(directory, script):
    """Outside a checkout: the script is uploaded as a diff creating it."""
    if not script or not os.path.isfile(script):
        return {}
    name = os.path.relpath(os.path.abspath(script), directory).replace(os.sep, "/")
    if name.startswith("../"):
        raise KliqueError("the script %s is outside the current directory, so it could not be sent as it runs here: run it from its directory, or from a git checkout" % script)
    with open(script, "rb") as f:
        content = f.read()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise KliqueError("the script %s is not text: run it from a git checkout" % script) from None
    lines = text.splitlines()
    mode = "100755" if os.access(script, os.X_OK) else "100644"
    diff = "diff --git a/%s b/%s\nnew file mode %s\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n" % (name, name, mode, name, len(lines))
    diff += "".join("+" + line + "\n" for line in lines)
    if not text.endswith("\n") and lines:
        diff += "\\ No newline at end of file\n"
    return {"diff": diff}


def _packages(workdir, root):
    for d in dict.fromkeys([workdir, root]):
        p = os.path.join(d, "requirements.txt")
        if os.path.isfile(p):
            with open(p) as f:
                return requirements(f.read())
    for d in dict.fromkeys([workdir, root]):
        p = os.path.join(d, "pyproject.toml")
        if os.path.isfile(p):
            with open(p) as f:
                deps = pyproject_dependencies(f.read())
            if deps:
                return deps
    # The active virtual environment's packages, as pip lists them.
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix) or os.environ.get("VIRTUAL_ENV"):
        p = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if p.returncode == 0:
            return requirements(p.stdout.decode())
    return []


def requirements(text):
    out = []
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#") or line.startswith("-"):
            continue
        out.append(line)
    return out


def pyproject_dependencies(text):
    """[project] dependencies of a pyproject.toml (a small reader: tomllib
    is 3.11+)."""
    section = ""
    m = None
    for block in re.split(r"(?m)^\[", text):
        header, _, body = block.partition("]")
        section = header.strip()
        if section == "project":
            m = re.search(r"(?ms)^dependencies\s*=\s*\[(.*?)\]", body)
            break
    if not m:
        return []
    return re.findall(r"""["']([^"']+)["']""", m.group(1))
