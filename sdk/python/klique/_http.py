"""The SDK's one way to the control plane: its public GraphQL API and its
artifact endpoint, over HTTP with the standard library."""

import json
import urllib.error
import urllib.parse
import urllib.request


class KliqueError(Exception):
    """A refusal or failure, with the server's message (which says what to
    change), its code (NOT_FOUND, FORBIDDEN, BAD_USER_INPUT, ...) and, when
    the server found several problems at once (a whole pipeline checked),
    each of them."""

    def __init__(self, message, code=None, problems=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.problems = list(problems or [])


class Connection:
    """A server address and the API key requests are sent with."""

    def __init__(self, server, api_key, timeout=30.0):
        self.server = server.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def _request(self, method, url, body=None, headers=None):
        req = urllib.request.Request(url, data=body, method=method)
        req.add_header("Authorization", "Bearer " + self.api_key)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            raise KliqueError(_http_message(e.code, raw, url), _http_code(raw)) from None
        except urllib.error.URLError as e:
            raise KliqueError("cannot reach the Klique server at %s: %s (check KLIQUE_SERVER)" % (self.server, e.reason)) from None

    def graphql(self, query, variables=None):
        """Runs one GraphQL operation and returns its data; a refusal raises
        KliqueError with the server's message."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        _, _, raw = self._request("POST", self.server + "/graphql", body, {"Content-Type": "application/json"})
        try:
            out = json.loads(raw)
        except ValueError:
            raise KliqueError("the server answered something other than JSON: %r" % raw[:200]) from None
        errors = out.get("errors") or []
        if errors:
            e = errors[0]
            ext = e.get("extensions") or {}
            raise KliqueError(e.get("message", "the request failed"), ext.get("code"), ext.get("problems"))
        return out.get("data") or {}

    def artifact_url(self, task_id, name):
        return "%s/api/v1/tasks/%s/artifacts/%s" % (self.server, urllib.parse.quote(task_id, safe=""),
                                                     urllib.parse.quote(name, safe=""))

    def put(self, url, data, headers):
        status, resp_headers, raw = self._request("PUT", url, data, headers)
        return status, resp_headers, raw

    def get(self, url):
        return self._request("GET", url)


def _http_code(raw):
    try:
        out = json.loads(raw)
    except ValueError:
        return None
    if isinstance(out, dict):
        errs = out.get("errors")
        if errs and isinstance(errs, list):
            return (errs[0].get("extensions") or {}).get("code")
        return out.get("code")
    return None


def _http_message(status, raw, url):
    text = raw.decode("utf-8", "replace").strip()
    try:
        out = json.loads(text)
        if isinstance(out, dict):
            if out.get("errors"):
                return out["errors"][0].get("message", text)
            for k in ("message", "error"):
                if isinstance(out.get(k), str):
                    return out[k]
    except ValueError:
        pass
    if status == 404 and not text:
        return "not found: %s" % url
    return text or "HTTP %d from %s" % (status, url)


def plain_request(method, url, body=None, headers=None, timeout=30.0):
    """A request without the API key: the worker's local endpoints (metrics,
    artifacts) carry their own per-task token in the URL."""
    req = urllib.request.Request(url, data=body, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        raw = e.read()
        raise KliqueError(_http_message(e.code, raw, url), _http_code(raw)) from None
    except urllib.error.URLError as e:
        raise KliqueError("cannot reach the worker at %s: %s" % (url, e.reason)) from None
