"""An in-tree PEP 517 build backend with the standard library only, so that
'pip install ./sdk/python' works with no network and nothing else
installed (setuptools of Python 3.11's pip needs the wheel package, which
may not be there). It builds the wheel of the one pure-Python package
klique, an sdist, and an editable wheel (a .pth file) for 'pip install -e'."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "klique"


def _version():
    with open(os.path.join(ROOT, NAME, "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _metadata():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Track a script's runs on Klique and send them to a GPU (standard library only)\n"
            "Requires-Python: >=3.9\nLicense: Apache-2.0\nDescription-Content-Type: text/markdown\n\n%s"
            % (NAME, _version(), readme))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def _wheel(directory, files):
    """Writes a wheel of files (archive name -> bytes) and returns its name."""
    version = _version()
    dist = "%s-%s.dist-info" % (NAME, version)
    files = dict(files)
    files[dist + "/METADATA"] = _metadata().encode()
    files[dist + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: klique_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[dist + "/top_level.txt"] = (NAME + "\n").encode()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(dist + "/RECORD,,")
    files[dist + "/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = "%s-%s-py3-none-any.whl" % (NAME, version)
    with zipfile.ZipFile(os.path.join(directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


def _sources():
    out = {}
    pkg = os.path.join(ROOT, NAME)
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py"):
            with open(os.path.join(pkg, fn), "rb") as f:
                out["%s/%s" % (NAME, fn)] = f.read()
    return out


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, _sources())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {"_klique_editable.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "README.md", "_build/klique_build.py"] + sorted(_sources()):
            tar.add(os.path.join(ROOT, rel), arcname=base + "/" + rel)
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return name
