"""Small client for Apache NiFi's REST API (NiFi 2.x, plain HTTP or secured HTTPS), standard library only.

Used by the kinesnow tests and parameter-contexts/apply.py to drive a NiFi:

    from nifi_client import NiFiClient
    nifi = NiFiClient("http://127.0.0.1:8080/nifi-api")             # unsecured
    nifi = NiFiClient("https://127.0.0.1:8443/nifi-api", username="admin", password=secret,
                      ca_file="ca.pem")                              # secured (NiFi 2.x's default)
    nifi.wait_until_up(timeout=120)
    ctx = nifi.create_parameter_context_from_file("parameter-contexts/dev.json")
    pg = nifi.create_process_group("it-run", parameter_context_id=ctx["id"])
    proc = nifi.add_processor(pg["id"], "com.example.MyProcessor", bundle,
                              properties={"Stream": "#{stream}"}, scheduling_period="1 sec")

Secured NiFi: with a username and password the client logs in as NiFi's login page does (POST
/access/token, form-encoded username and password; NiFi answers with a bearer token) before its first call,
sends the token on every call, and logs in again once when NiFi answers 401 (token expired, NiFi restarted).
HTTPS trusts the system's CAs, or only `ca_file` (PEM) when given; `insecure_skip_verify` turns certificate
and host name checks off (labs only). The password is kept only in the client object, never logged or put
into an error.

Every mutation sends the component's current revision.version, read fresh just before the call.
Errors raise NiFiApiError carrying the method, URL, HTTP status and response body.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Iterable, Optional

__all__ = [
    "NiFiClient",
    "NiFiError",
    "NiFiApiError",
    "NiFiTimeoutError",
    "load_parameter_context_file",
    "log_position",
    "parse_log_events",
    "read_log_errors",
]


class NiFiError(Exception):
    """Base class for errors raised by this module."""


class NiFiApiError(NiFiError):
    """An HTTP call to NiFi failed (non-2xx status, or no connection when status is None)."""

    def __init__(self, method: str, url: str, status: Optional[int], body: str):
        self.method = method
        self.url = url
        self.status = status
        self.body = body
        shown = body if len(body) <= 2000 else body[:2000] + "...(truncated)"
        super().__init__(f"{method} {url} -> HTTP {status if status is not None else 'no response'}: {shown}")


class NiFiTimeoutError(NiFiError):
    """A wait (startup, validation, async request, run state) did not finish in time."""


# --------------------------------------------------------------------------------------------------
# Parameter context files
# --------------------------------------------------------------------------------------------------

def load_parameter_context_file(path: str) -> dict:
    """Read and check a parameter-context JSON file.

    Format: {"name": str, "description": str?, "parameters": [{"name": str, "value": str|null,
    "sensitive": bool?, "description": str?}, ...]}
    """
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"]:
        raise ValueError(f"{path}: top level must be an object with a non-empty 'name'")
    params = doc.get("parameters", [])
    if not isinstance(params, list):
        raise ValueError(f"{path}: 'parameters' must be a list")
    seen = set()
    for i, p in enumerate(params):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            raise ValueError(f"{path}: parameters[{i}] must be an object with a non-empty 'name'")
        if p["name"] in seen:
            raise ValueError(f"{path}: duplicate parameter name {p['name']!r}")
        seen.add(p["name"])
        if p.get("value") is not None and not isinstance(p["value"], str):
            raise ValueError(f"{path}: parameters[{i}].value must be a string or null")
    return doc


def _parameter_dto(p: dict) -> dict:
    return {"parameter": {
        "name": p["name"],
        "value": p.get("value"),
        "sensitive": bool(p.get("sensitive", False)),
        "description": p.get("description", ""),
    }}


# --------------------------------------------------------------------------------------------------
# NiFi log file
# --------------------------------------------------------------------------------------------------

# Matches the line layout of tests/nifi/conf/logback.xml: "%date %level [%thread] %logger %msg"
_LOG_LINE = re.compile(
    r"^(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) (?P<level>[A-Z]+) "
    r"\[(?P<thread>.*?)\] (?P<logger>\S+) (?P<message>.*)$")


def log_position(log_path: str) -> int:
    """Current size of the log file (0 if absent): pass it as `start` to read_log_errors."""
    try:
        return os.path.getsize(log_path)
    except FileNotFoundError:
        return 0


def read_log_errors(log_path: str, logger_prefix: Optional[str] = None, start: int = 0,
                    levels: Iterable[str] = ("ERROR",)) -> list[dict]:
    """Log events at the given levels (default ERROR) from byte offset `start` onwards.

    `logger_prefix` keeps only events whose logger name starts with it (e.g. "com.kinesnow").
    Each result: {"time", "level", "thread", "logger", "message", "text"}; "text" includes the
    continuation lines (stack trace) that follow the event's first line.
    """
    try:
        f = open(log_path, "rb")
    except FileNotFoundError:
        return []
    with f:
        f.seek(start)
        return parse_log_events(f.read().decode("utf-8", errors="replace"), logger_prefix, levels)


def parse_log_events(text: str, logger_prefix: Optional[str] = None,
                     levels: Iterable[str] = ("ERROR",)) -> list[dict]:
    """The events of a piece of NiFi's log (as read_log_errors describes them)."""
    levels = set(levels)
    events: list[dict] = []
    current: Optional[dict] = None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        m = _LOG_LINE.match(line)
        if m:
            current = None
            if m["level"] in levels and (logger_prefix is None or m["logger"].startswith(logger_prefix)):
                current = {**m.groupdict(), "text": line}
                events.append(current)
        elif current is not None:
            current["text"] += "\n" + line
    return events


# --------------------------------------------------------------------------------------------------
# REST client
# --------------------------------------------------------------------------------------------------

def _text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


class NiFiClient:
    """Client for one NiFi instance. `base_url` ends in /nifi-api, e.g. http://127.0.0.1:8080/nifi-api."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080/nifi-api", timeout: float = 30.0,
                 client_id: Optional[str] = None, username: Optional[str] = None, password: Optional[str] = None,
                 ca_file: Optional[str] = None, insecure_skip_verify: bool = False):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.client_id = client_id or str(uuid.uuid4())
        if (username is None) != (password is None):
            raise ValueError("give both username and password, or neither")
        self.username = username
        self._password = password
        self._token: Optional[str] = None
        self._ssl = self._ssl_context(ca_file, insecure_skip_verify) if self.base_url.startswith("https:") else None

    def anonymous(self) -> "NiFiClient":
        """A client of the same NiFi with the same trust, that does not log in."""
        other = NiFiClient(self.base_url, timeout=self.timeout)
        other._ssl = self._ssl
        return other

    def __repr__(self) -> str:  # never the password nor the token
        return f"NiFiClient({self.base_url!r}, username={self.username!r})"

    @staticmethod
    def _ssl_context(ca_file: Optional[str], insecure_skip_verify: bool) -> ssl.SSLContext:
        if insecure_skip_verify:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        return ssl.create_default_context(cafile=ca_file)

    # ---- HTTP -------------------------------------------------------------------------------------

    def login(self) -> None:
        """POST /access/token with the username and password (what NiFi's login page sends); keeps the token."""
        if self.username is None:
            raise NiFiError("this client has no username and password to log in with")
        form = urllib.parse.urlencode({"username": self.username, "password": self._password}).encode()
        url = self.base_url + "/access/token"
        status, text = self._send("POST", url, form, {"Content-Type": "application/x-www-form-urlencoded",
                                                      "Accept": "text/plain"}, authorize=False)
        if status != 201 and status != 200:
            raise NiFiApiError("POST", url, status, "login refused" if status in (400, 401, 403) else _text(text))
        self._token = _text(text).strip()

    def _send(self, method: str, url: str, data: Optional[bytes], headers: dict,
              authorize: bool = True) -> tuple[int, bytes]:
        """One HTTP exchange: (status, body) for any HTTP status; no response raises NiFiApiError."""
        if authorize and self._token:
            headers = {**headers, "Authorization": f"Bearer {self._token}"}
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, http.client.HTTPException) as e:
            # HTTPException: no HTTP answer at all (such as plain HTTP sent to NiFi's HTTPS port)
            raise NiFiApiError(method, url, None, f"{type(e).__name__}: {getattr(e, 'reason', e)}") from None

    def _exchange(self, method: str, url: str, data: Optional[bytes], headers: dict) -> bytes:
        """An authorized request (logging in first, and once more on 401 when it has credentials); the body of
        a 2xx answer, NiFiApiError for any other."""
        if self.username is not None and self._token is None:
            self.login()
        status, text = self._send(method, url, data, headers)
        if status == 401 and self.username is not None:
            self.login()
            status, text = self._send(method, url, data, headers)
        if not 200 <= status < 300:
            raise NiFiApiError(method, url, status, _text(text))
        return text

    def get_bytes(self, path: str, accept: str = "*/*") -> bytes:
        """GET a path's body as the exact bytes NiFi sent (FlowFile content, for one)."""
        return self._exchange("GET", self.base_url + "/" + path.lstrip("/"), None, {"Accept": accept})

    def request(self, method: str, path: str, body: Any = None, params: Optional[dict] = None,
                expect_json: bool = True) -> Any:
        """Send one request; `path` is relative to base_url. Returns parsed JSON (or text)."""
        url = self.base_url + "/" + path.lstrip("/")
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        text = _text(self._exchange(method, url, data, headers))
        if not expect_json:
            return text
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise NiFiApiError(method, url, 200, "response is not JSON: " + text[:500]) from None

    def get(self, path: str, params: Optional[dict] = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str, params: Optional[dict] = None) -> Any:
        return self.request("DELETE", path, params=params)

    def _revision(self, entity_path: str) -> dict:
        """Fresh revision of a component (GET just before the mutation)."""
        rev = self.get(entity_path)["revision"]
        return {"version": rev.get("version", 0), "clientId": self.client_id}

    def _new_revision(self) -> dict:
        return {"version": 0, "clientId": self.client_id}

    # ---- instance ---------------------------------------------------------------------------------

    def wait_until_up(self, timeout: float = 180.0, interval: float = 0.5) -> dict:
        """Poll /flow/about until it answers; returns the about DTO."""
        deadline = time.monotonic() + timeout
        last: Optional[Exception] = None
        while time.monotonic() < deadline:
            try:
                return self.about()
            except NiFiApiError as e:
                last = e
            time.sleep(interval)
        raise NiFiTimeoutError(f"NiFi at {self.base_url} not up after {timeout}s (last error: {last})")

    def is_up(self) -> bool:
        try:
            self.about()
            return True
        except NiFiApiError:
            return False

    def about(self) -> dict:
        """The about DTO: {"title", "version", "uri", "buildTag", ...}."""
        return self.get("flow/about")["about"]

    def version(self) -> str:
        return self.about()["version"]

    def root_process_group_id(self) -> str:
        return self.get("flow/process-groups/root")["processGroupFlow"]["id"]

    # ---- extension types and docs -----------------------------------------------------------------

    # Root process group policies the admin of a new secured NiFi grants: (action, resource prefix, other users too).
    ROOT_POLICIES = [("read", "/process-groups/", False), ("write", "/process-groups/", False),
                     ("read", "/data/process-groups/", True), ("write", "/data/process-groups/", True),
                     ("read", "/provenance-data/process-groups/", True), ("read", "/provenance", False),
                     ("read", "/counters", False), ("write", "/counters", False), ("read", "/system", False)]

    def grant_root_policies(self) -> None:
        """As this client's user, the Initial Admin of NiFi's file-based managed authorizer on a new secured NiFi
        (its root group's id is not known before the flow exists, so NiFi grants the admin no policy on it),
        through the REST API as the UI's "Access Policies" dialog does: view and modify the root process group
        (inherited by every group in it), view and modify its data (for the admin and every other user the
        authorizer knows: a cluster's nodes, as NiFi authorizes each proxy of a replicated request for data),
        view its provenance, view and modify counters, view system diagnostics."""
        root = self.root_process_group_id()
        users = {u["component"]["identity"]: u["id"] for u in self.get("tenants/users")["users"]}
        admin = users[self.username]
        others = [i for name, i in users.items() if name != self.username]
        for action, prefix, with_others in self.ROOT_POLICIES:
            resource = prefix + root if prefix.endswith("/") else prefix
            members = [admin] + (others if with_others else [])
            self.post("policies", {"revision": {"version": 0, "clientId": self.client_id}, "component": {
                "action": action, "resource": resource, "users": [{"id": i} for i in members], "userGroups": []}})

    def processor_types(self, type_filter: Optional[str] = None) -> list[dict]:
        """Processor types the instance knows: [{"type", "bundle": {"group","artifact","version"},
        "description", "tags", ...}]. `type_filter` keeps types whose class name contains it."""
        types = self.get("flow/processor-types")["processorTypes"]
        if type_filter:
            types = [t for t in types if type_filter in t["type"]]
        return types

    def controller_service_types(self, type_filter: Optional[str] = None) -> list[dict]:
        types = self.get("flow/controller-service-types")["controllerServiceTypes"]
        if type_filter:
            types = [t for t in types if type_filter in t["type"]]
        return types

    def find_processor_type(self, type_name: str) -> dict:
        """The entry for a fully qualified (or simple) class name; raises if absent or ambiguous."""
        matches = [t for t in self.processor_types()
                   if t["type"] == type_name or t["type"].rsplit(".", 1)[-1] == type_name]
        if len(matches) != 1:
            raise NiFiError(f"processor type {type_name!r}: {len(matches)} matches")
        return matches[0]

    def processor_definition(self, type_name: str, bundle: dict) -> dict:
        """Documentation of a processor type (properties, relationships, ...) from
        /flow/processor-definition/{group}/{artifact}/{version}/{type}."""
        parts = [bundle["group"], bundle["artifact"], bundle["version"], type_name]
        return self.get("flow/processor-definition/" + "/".join(urllib.parse.quote(p, safe="") for p in parts))

    # ---- parameter contexts -----------------------------------------------------------------------

    def create_parameter_context(self, name: str, parameters: Iterable[dict] = (),
                                 description: str = "") -> dict:
        """Create a context; `parameters` are {"name","value","sensitive","description"} dicts.
        Returns the entity ({"id", "revision", "component": {...}})."""
        body = {"revision": self._new_revision(),
                "component": {"name": name, "description": description,
                              "parameters": [_parameter_dto(p) for p in parameters]}}
        return self.post("parameter-contexts", body)

    def create_parameter_context_from_file(self, path: str, name: Optional[str] = None) -> dict:
        """Create a context from a parameter-contexts/*.json file; `name` overrides the file's name
        (handy for unique per-test names)."""
        doc = load_parameter_context_file(path)
        return self.create_parameter_context(name or doc["name"], doc.get("parameters", []),
                                             doc.get("description", ""))

    def get_parameter_context(self, context_id: str) -> dict:
        return self.get(f"parameter-contexts/{context_id}")

    def parameter_contexts(self) -> list[dict]:
        return self.get("flow/parameter-contexts")["parameterContexts"]

    def find_parameter_context(self, name: str) -> Optional[dict]:
        for ctx in self.parameter_contexts():
            if ctx.get("component", {}).get("name") == name:
                return ctx
        return None

    def parameter_values(self, context_id: str) -> dict:
        """{name: value} of a context (sensitive values come back masked by NiFi)."""
        ctx = self.get_parameter_context(context_id)
        return {p["parameter"]["name"]: p["parameter"].get("value")
                for p in ctx["component"].get("parameters", [])}

    def update_parameters(self, context_id: str, values: Optional[dict] = None,
                          parameters: Iterable[dict] = (), remove: Iterable[str] = (),
                          timeout: float = 120.0) -> dict:
        """Change parameter values through an asynchronous update request and wait for it.

        `values` = {name: value} keeps each parameter's sensitivity and description as they are
        (new names become non-sensitive parameters); `parameters` = full dicts like the JSON file's;
        `remove` = names to delete. NiFi stops and restarts the referencing components itself.
        Returns the final update request DTO.
        """
        current = {p["parameter"]["name"]: p["parameter"]
                   for p in self.get_parameter_context(context_id)["component"].get("parameters", [])}
        dtos = []
        for name, value in (values or {}).items():
            old = current.get(name, {})
            dtos.append(_parameter_dto({"name": name, "value": value,
                                        "sensitive": old.get("sensitive", False),
                                        "description": old.get("description", "")}))
        dtos.extend(_parameter_dto(p) for p in parameters)
        dtos.extend({"parameter": {"name": n}} for n in remove)  # name only = delete
        entity = self.get_parameter_context(context_id)
        body = {"revision": {"version": entity["revision"]["version"], "clientId": self.client_id},
                "id": context_id,
                "component": {"id": context_id, "parameters": dtos}}
        req = self.post(f"parameter-contexts/{context_id}/update-requests", body)["request"]
        return self._finish_async(f"parameter-contexts/{context_id}/update-requests/{req['requestId']}",
                                  req, timeout)

    def _finish_async(self, path: str, req: dict, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        try:
            while not req.get("complete"):
                if time.monotonic() > deadline:
                    raise NiFiTimeoutError(f"{path} not complete after {timeout}s: {req.get('state')}")
                time.sleep(0.25)
                req = self.get(path)["request"]
        finally:
            try:
                self.delete(path)
            except NiFiApiError:
                pass
        if req.get("failureReason"):
            raise NiFiError(f"{path} failed: {req['failureReason']}")
        return req

    def delete_parameter_context(self, context_id: str) -> None:
        rev = self._revision(f"parameter-contexts/{context_id}")
        self.delete(f"parameter-contexts/{context_id}",
                    params={"version": rev["version"], "clientId": self.client_id})

    # ---- process groups ---------------------------------------------------------------------------

    def create_process_group(self, name: str, parent_id: Optional[str] = None,
                             parameter_context_id: Optional[str] = None,
                             position: tuple = (0.0, 0.0)) -> dict:
        """Create a process group under `parent_id` (default: root), bound to a parameter context."""
        parent_id = parent_id or self.root_process_group_id()
        component: dict = {"name": name, "position": {"x": position[0], "y": position[1]}}
        if parameter_context_id:
            component["parameterContext"] = {"id": parameter_context_id}
        return self.post(f"process-groups/{parent_id}/process-groups",
                         {"revision": self._new_revision(), "component": component})

    def download_flow_definition(self, group_id: str) -> dict:
        """The process group as a versioned flow definition (what the canvas's "Download flow definition" saves)."""
        return self.get(f"process-groups/{group_id}/download", params={"includeReferencedServices": "false"})

    def upload_flow_definition(self, definition: dict, name: str, parent_id: Optional[str] = None,
                               position: tuple = (0, 0)) -> dict:
        """Imports a flow definition as a new process group (the canvas's "Upload flow definition"), with the
        multipart fields NiFi 2.3.0's UI sends (its flow.service.ts uploadProcessGroup); NiFi creates the parameter
        contexts it references when none of that name exists."""
        parent = parent_id or self.root_process_group_id()
        boundary = "kinesnow" + uuid.uuid4().hex
        fields = {"id": parent, "groupName": name, "positionX": str(position[0]), "positionY": str(position[1]),
                  "clientId": self.client_id, "disconnectedNodeAcknowledged": "false"}
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()]
        body = "".join(parts).encode() + (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="flow.json"\r\n'
            "Content-Type: application/json\r\n\r\n").encode() + json.dumps(definition).encode() + f"\r\n--{boundary}--\r\n".encode()
        return json.loads(self._exchange("POST", f"{self.base_url}/process-groups/{parent}/process-groups/upload", body,
                                         {"Content-Type": f"multipart/form-data; boundary={boundary}",
                                          "Accept": "application/json"}))

    def get_process_group(self, group_id: str) -> dict:
        return self.get(f"process-groups/{group_id}")

    def set_process_group_parameter_context(self, group_id: str, context_id: Optional[str]) -> dict:
        """Bind a group to a parameter context, or unbind it with context_id=None."""
        rev = self._revision(f"process-groups/{group_id}")
        return self.put(f"process-groups/{group_id}", {
            "revision": rev,
            "component": {"id": group_id, "parameterContext": {"id": context_id}}})  # id None = unbind

    def set_process_group_state(self, group_id: str, state: str) -> dict:
        """Schedule all components of a group: state is "RUNNING" or "STOPPED"."""
        return self.put(f"flow/process-groups/{group_id}", {"id": group_id, "state": state})

    def delete_process_group(self, group_id: str, stop_first: bool = True, empty_queues: bool = True) -> None:
        """Delete a process group; by default stops its components, disables its controller services
        and drops queued FlowFiles first (NiFi refuses to delete a group with data queued)."""
        if stop_first:
            self.set_process_group_state(group_id, "STOPPED")
            self._wait_no_active_threads(group_id)
            self.set_process_group_controller_services_state(group_id, "DISABLED")
            self._wait_controller_services_disabled(group_id)
        if empty_queues:
            self.empty_process_group_queues(group_id)
        rev = self._revision(f"process-groups/{group_id}")
        self.delete(f"process-groups/{group_id}", params={"version": rev["version"], "clientId": self.client_id})

    def _wait_no_active_threads(self, group_id: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            snap = self.get(f"flow/process-groups/{group_id}/status")["processGroupStatus"]["aggregateSnapshot"]
            if int(snap.get("activeThreadCount", 0)) == 0:
                return
            if time.monotonic() > deadline:
                raise NiFiTimeoutError(f"process group {group_id} still has active threads after {timeout}s")
            time.sleep(0.25)

    def process_group_controller_services(self, group_id: str) -> list[dict]:
        """Controller service entities of a group and of the groups inside it (not of its ancestors)."""
        return self.get(f"flow/process-groups/{group_id}/controller-services",
                        params={"includeAncestorGroups": "false", "includeDescendantGroups": "true"}
                        )["controllerServices"]

    def _wait_controller_services_disabled(self, group_id: str, timeout: float = 60.0) -> None:
        """NiFi disables services asynchronously, and refuses to delete a group while one is still DISABLING."""
        deadline = time.monotonic() + timeout
        while True:
            busy = [(s["component"]["name"], s["component"]["state"])
                    for s in self.process_group_controller_services(group_id)
                    if s["component"]["state"] != "DISABLED"]
            if not busy:
                return
            if time.monotonic() > deadline:
                raise NiFiTimeoutError(f"controller services of group {group_id} not DISABLED after {timeout}s: {busy}")
            time.sleep(0.25)

    def empty_process_group_queues(self, group_id: str, timeout: float = 60.0) -> dict:
        """Drop every FlowFile queued in the group's connections (recursively); waits for it."""
        req = self.post(f"process-groups/{group_id}/empty-all-connections-requests", None)["dropRequest"]
        return self._finish_drop(f"process-groups/{group_id}/empty-all-connections-requests/{req['id']}", req, timeout)

    def _finish_drop(self, path: str, req: dict, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        try:
            while not req.get("finished"):
                if time.monotonic() > deadline:
                    raise NiFiTimeoutError(f"{path} not finished after {timeout}s")
                time.sleep(0.25)
                req = self.get(path)["dropRequest"]
        finally:
            try:
                self.delete(path)
            except NiFiApiError:
                pass
        if req.get("failureReason"):
            raise NiFiError(f"{path} failed: {req['failureReason']}")
        return req

    def set_process_group_controller_services_state(self, group_id: str, state: str) -> dict:
        """Enable or disable all controller services of a group: state "ENABLED" or "DISABLED"."""
        return self.put(f"flow/process-groups/{group_id}/controller-services", {"id": group_id, "state": state})

    def process_group_flow(self, group_id: str) -> dict:
        """The group's contents: {"processors": [...], "connections": [...], "processGroups": [...], ...}."""
        return self.get(f"flow/process-groups/{group_id}")["processGroupFlow"]["flow"]

    # ---- controller services ----------------------------------------------------------------------

    def create_controller_service(self, group_id: str, type_name: str, properties: Optional[dict] = None,
                                  name: Optional[str] = None) -> dict:
        """Add a controller service of a (fully qualified or simple) type to a group; returns its entity."""
        matches = [t for t in self.controller_service_types()
                   if t["type"] == type_name or t["type"].rsplit(".", 1)[-1] == type_name]
        if len(matches) != 1:
            raise NiFiError(f"controller service type {type_name!r}: {len(matches)} matches")
        bundle = matches[0]["bundle"]
        component = {"type": matches[0]["type"], "bundle": {k: bundle[k] for k in ("group", "artifact", "version")},
                     "name": name or type_name.rsplit(".", 1)[-1], "properties": properties or {}}
        return self.post(f"process-groups/{group_id}/controller-services",
                         {"revision": self._new_revision(), "component": component})

    def set_controller_service_state(self, service_id: str, state: str, timeout: float = 30.0) -> dict:
        """"ENABLED" or "DISABLED", waiting until the service gets there (and first until it is validated)."""
        deadline = time.monotonic() + timeout
        while self.get(f"controller-services/{service_id}")["component"].get("validationStatus") == "VALIDATING":
            if time.monotonic() > deadline:
                raise NiFiError(f"controller service {service_id} is still validating after {timeout} s")
            time.sleep(0.2)
        self.put(f"controller-services/{service_id}/run-status",
                 {"revision": self._revision(f"controller-services/{service_id}"), "state": state})
        while True:
            entity = self.get(f"controller-services/{service_id}")
            if entity["component"]["state"] == state:
                return entity
            if time.monotonic() > deadline:
                raise NiFiError(f"controller service {service_id} stayed {entity['component']['state']}: "
                                f"{entity['component'].get('validationErrors')}")
            time.sleep(0.3)

    # ---- processors -------------------------------------------------------------------------------

    def add_processor(self, group_id: str, type_name: str, bundle: Optional[dict] = None,
                      name: Optional[str] = None, properties: Optional[dict] = None,
                      scheduling_period: Optional[str] = None, scheduling_strategy: Optional[str] = None,
                      concurrent_tasks: Optional[int] = None, run_duration_millis: Optional[int] = None,
                      penalty_duration: Optional[str] = None, yield_duration: Optional[str] = None,
                      auto_terminate: Iterable[str] = (), bulletin_level: Optional[str] = None,
                      position: tuple = (0.0, 0.0)) -> dict:
        """Add a processor. `bundle` = {"group","artifact","version"}; looked up when omitted.
        `properties` values may reference parameters as "#{name}". Returns the processor entity."""
        if bundle is None:
            bundle = self.find_processor_type(type_name)["bundle"]
        config = self._processor_config(properties, scheduling_period, scheduling_strategy, concurrent_tasks,
                                        run_duration_millis, penalty_duration, yield_duration,
                                        auto_terminate, bulletin_level)
        component = {"type": type_name, "bundle": {k: bundle[k] for k in ("group", "artifact", "version")},
                     "name": name or type_name.rsplit(".", 1)[-1],
                     "position": {"x": position[0], "y": position[1]}, "config": config}
        return self.post(f"process-groups/{group_id}/processors",
                         {"revision": self._new_revision(), "component": component})

    @staticmethod
    def _processor_config(properties=None, scheduling_period=None, scheduling_strategy=None,
                          concurrent_tasks=None, run_duration_millis=None, penalty_duration=None,
                          yield_duration=None, auto_terminate=(), bulletin_level=None) -> dict:
        config: dict = {}
        if properties is not None:
            config["properties"] = properties
        if scheduling_period is not None:
            config["schedulingPeriod"] = scheduling_period
        if scheduling_strategy is not None:
            config["schedulingStrategy"] = scheduling_strategy
        if concurrent_tasks is not None:
            config["concurrentlySchedulableTaskCount"] = concurrent_tasks
        if run_duration_millis is not None:
            config["runDurationMillis"] = run_duration_millis
        if penalty_duration is not None:
            config["penaltyDuration"] = penalty_duration
        if yield_duration is not None:
            config["yieldDuration"] = yield_duration
        auto_terminate = list(auto_terminate)
        if auto_terminate:
            config["autoTerminatedRelationships"] = auto_terminate
        if bulletin_level is not None:
            config["bulletinLevel"] = bulletin_level
        return config

    def get_processor(self, processor_id: str) -> dict:
        return self.get(f"processors/{processor_id}")

    def update_processor(self, processor_id: str, properties: Optional[dict] = None, name: Optional[str] = None,
                         **scheduling: Any) -> dict:
        """Change properties (None value = unset) and/or scheduling settings (same keywords as
        add_processor: scheduling_period, concurrent_tasks, auto_terminate, ...)."""
        config = self._processor_config(properties, **scheduling)
        component: dict = {"id": processor_id, "config": config}
        if name is not None:
            component["name"] = name
        rev = self._revision(f"processors/{processor_id}")
        return self.put(f"processors/{processor_id}", {"revision": rev, "component": component})

    def set_auto_terminated(self, processor_id: str, relationships: Iterable[str]) -> dict:
        """Replace the processor's auto-terminated relationships (empty = none)."""
        rev = self._revision(f"processors/{processor_id}")
        return self.put(f"processors/{processor_id}", {
            "revision": rev,
            "component": {"id": processor_id, "config": {"autoTerminatedRelationships": list(relationships)}}})

    def processor_validation(self, processor_id: str, wait: bool = True, timeout: float = 30.0) -> dict:
        """{"status": "VALID"|"INVALID"|"VALIDATING", "errors": [str, ...]}; with `wait`, polls
        while NiFi still reports VALIDATING."""
        deadline = time.monotonic() + timeout
        while True:
            comp = self.get_processor(processor_id)["component"]
            status = comp.get("validationStatus")
            if status != "VALIDATING" or not wait:
                return {"status": status, "errors": list(comp.get("validationErrors") or [])}
            if time.monotonic() > deadline:
                raise NiFiTimeoutError(f"processor {processor_id} still VALIDATING after {timeout}s")
            time.sleep(0.25)

    def set_processor_state(self, processor_id: str, state: str) -> dict:
        """PUT /processors/{id}/run-status: state "RUNNING", "STOPPED", "DISABLED" or "RUN_ONCE"."""
        rev = self._revision(f"processors/{processor_id}")
        return self.put(f"processors/{processor_id}/run-status",
                        {"revision": rev, "state": state, "disconnectedNodeAcknowledged": False})

    def start_processor(self, processor_id: str) -> dict:
        return self.set_processor_state(processor_id, "RUNNING")

    def stop_processor(self, processor_id: str, wait: bool = True, timeout: float = 60.0) -> dict:
        """Stop scheduling; with `wait`, also waits until no thread is still active in it."""
        entity = self.set_processor_state(processor_id, "STOPPED")
        if wait:
            deadline = time.monotonic() + timeout
            while True:
                entity = self.get_processor(processor_id)
                if entity["component"].get("state") == "STOPPED" and \
                        entity.get("status", {}).get("aggregateSnapshot", {}).get("activeThreadCount", 0) == 0:
                    break
                if time.monotonic() > deadline:
                    raise NiFiTimeoutError(f"processor {processor_id} still has active threads after {timeout}s")
                time.sleep(0.25)
        return entity

    def local_state(self, processor_id: str) -> dict:
        """What "View State" shows of a processor's local state (GET /processors/{id}/state), as {key: value}."""
        state = self.get(f"/processors/{processor_id}/state")["componentState"]
        entries = (state.get("localState") or {}).get("state") or []
        return {e["key"]: e["value"] for e in entries}

    def counters_of(self, processor_id: str) -> dict:
        """NiFi's counters of one processor (GET /counters), by name: {name: value}."""
        snapshot = self.get("/counters")["counters"]["aggregateSnapshot"]["counters"]
        return {c["name"]: int(c["valueCount"]) for c in snapshot if f"({processor_id})" in c.get("context", "")}

    def processor_state(self, processor_id: str) -> str:
        """Run state: "RUNNING", "STOPPED", "DISABLED", ..."""
        return self.get_processor(processor_id)["component"]["state"]

    def delete_processor(self, processor_id: str, stop_first: bool = True) -> None:
        if stop_first and self.processor_state(processor_id) == "RUNNING":
            self.stop_processor(processor_id)
        rev = self._revision(f"processors/{processor_id}")
        self.delete(f"processors/{processor_id}", params={"version": rev["version"], "clientId": self.client_id})

    # ---- connections ------------------------------------------------------------------------------

    def connect(self, group_id: str, source_id: str, destination_id: str, relationships: Iterable[str],
                source_type: str = "PROCESSOR", destination_type: str = "PROCESSOR",
                back_pressure_count: Optional[int] = None, prioritizers: Iterable[str] = ()) -> dict:
        """Connect two components of `group_id` for the given relationships (source and destination may be the
        same processor: a self-loop). `prioritizers`: the queue's prioritizer classes, such as
        "org.apache.nifi.prioritizer.FirstInFirstOutPrioritizer" (none: NiFi's default order)."""
        component: dict = {
            "source": {"id": source_id, "groupId": group_id, "type": source_type},
            "destination": {"id": destination_id, "groupId": group_id, "type": destination_type},
            "selectedRelationships": list(relationships),
        }
        if back_pressure_count is not None:
            component["backPressureObjectThreshold"] = back_pressure_count
        prioritizers = list(prioritizers)
        if prioritizers:
            component["prioritizers"] = prioritizers
        return self.post(f"process-groups/{group_id}/connections",
                         {"revision": self._new_revision(), "component": component})

    def connection_queue_count(self, connection_id: str) -> int:
        snap = self.get(f"flow/connections/{connection_id}/status")["connectionStatus"]["aggregateSnapshot"]
        return int(snap.get("flowFilesQueued", 0))

    def empty_queue(self, connection_id: str, timeout: float = 60.0) -> dict:
        """Drop all FlowFiles queued in one connection; waits for it. Returns the drop request."""
        req = self.post(f"flowfile-queues/{connection_id}/drop-requests", None)["dropRequest"]
        return self._finish_drop(f"flowfile-queues/{connection_id}/drop-requests/{req['id']}", req, timeout)

    def delete_connection(self, connection_id: str) -> None:
        rev = self._revision(f"connections/{connection_id}")
        self.delete(f"connections/{connection_id}", params={"version": rev["version"], "clientId": self.client_id})

    # ---- bulletins --------------------------------------------------------------------------------

    def bulletins(self, source_id: Optional[str] = None, group_id: Optional[str] = None,
                  after: Optional[int] = None, limit: Optional[int] = None) -> list[dict]:
        """Bulletin DTOs from /flow/bulletin-board ({"id","sourceId","sourceName","level","message",
        "timestamp",...}), optionally filtered by source (component) id or group id, or to ids > after."""
        board = self.get("flow/bulletin-board", params={"sourceId": source_id, "groupId": group_id,
                                                        "after": after, "limit": limit})["bulletinBoard"]
        return [b["bulletin"] for b in board.get("bulletins", []) if b.get("bulletin")]
