"""Where the server and the API key come from: the arguments, then
KLIQUE_SERVER / KLIQUE_API_KEY, then the file 'klique login' keeps."""

import json
import os
import sys

from ._http import Connection, KliqueError


def config_path():
    """$KLIQUE_CONFIG, or klique/config.json in the user's config directory
    (as Go's os.UserConfigDir finds it, which is where 'klique login'
    writes)."""
    p = os.environ.get("KLIQUE_CONFIG")
    if p:
        return p
    if sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Application Support")
    elif os.name == "nt":
        base = os.environ.get("AppData") or os.path.expanduser("~")
    else:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "klique", "config.json")


def _login_file():
    path = config_path()
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise KliqueError("%s is not readable (%s): delete it and run 'klique login' again" % (path, e)) from None


def connect(server=None, api_key=None):
    """A connection from the arguments, the environment or the login file."""
    cfg = None
    if not server:
        server = os.environ.get("KLIQUE_SERVER")
    if not api_key:
        api_key = os.environ.get("KLIQUE_API_KEY") or os.environ.get("KLIQUE_TOKEN")
    if not server or not api_key:
        cfg = _login_file()
        server = server or cfg.get("server")
        api_key = api_key or cfg.get("apiKey") or cfg.get("accessToken")
    if not server:
        raise KliqueError("say which Klique server to use: pass server=..., set KLIQUE_SERVER, or run 'klique login'")
    if not api_key:
        raise KliqueError("give an API key: pass api_key=..., set KLIQUE_API_KEY, or run 'klique login'")
    return Connection(server, api_key)
