"""One NiFi shared by the end-to-end modules that need no environment, NAR set or NiFi setting of their own
(tests/e2e/conftest.py's `shared_nifi` fixture): started on first use, stopped at the end of the session.
A module may kill it (kill -9) and restart it, as it would its own NiFi.

Every module gets a ModuleNiFi, its view of the shared instance:

- `client`, `port`, `pid`, `instance_dir` and `is_running()` as NiFiInstance has them;
- `kill()` and `restart()`: SIGKILL the NiFi as a crash would (NiFiInstance.kill), then start the same instance
  directory again (flow, repositories, NARs, nifi.properties as they are: `nifi.sh start --keep`) in the shared
  environment. The shared instance follows (its pid, its client), so later modules and the session's teardown
  get the running NiFi;
- `log_text()` and `log_errors()`: NiFi's log as this module may judge it, that is what NiFi wrote while it
  first started (before any module ran) and what it wrote since this module began (after a restart by this
  module that includes the restart's start-up: NiFi appends to its log), never another module's lines.
  `logs()` gives the same view of each log file (nifi-app.log and the JVM's nifi-stdout.log, which nifi.sh
  truncates at every start: what the killed JVM wrote for this module is kept across a restart);
  `log_mark()`/`log_since()` a part of nifi-app.log from a point in a test on;
- `clean()`, called when the module ends (and earlier by a module that wants its flow gone before it tears
  down what the flow reads): stops and deletes the process groups, controller services and parameter contexts
  the module added, dropping their queued FlowFiles, then checks that the NiFi is running and as the module
  found it. A NiFi that could not be cleaned (or restarted) is replaced by a fresh one for the next module.

The shared NiFi loads kinesnow-nar and the test-only NAR of NiFi's standard processors
(tests/nifi/standard-nar; test_hostile_input.py uses SplitJson and GenerateFlowFile), and no AWS NAR:
test_consumer_credentials_service.py, which needs kinesnow-aws-nar and its parent, keeps its own NiFi.
A second shared NiFi, alike but secured (HTTPS, nifi.sh's test-only login and NiFi's managed authorizer:
SharedNiFi(secure=True), tests/e2e/conftest.py's `secured_nifi`), serves the modules that show the product against a secured NiFi.
Its environment has nothing the AWS default credentials chain could use, and no instance metadata
lookup (test_verify.py's failing "AWS Credentials" step needs that; it also keeps every NiFi call on
127.0.0.1): NO_AWS_CREDENTIALS set, CLEARED removed from what it inherits. Its scheduling timeout
(nifi.processor.scheduling.timeout) is 5 s, what test_consumer_startup_and_keys.py needs (SCHEDULING_TIMEOUT):
NiFi 2.3.0 reads that property only in StandardProcessScheduler, for how long a processor's @OnScheduled may
run before NiFi interrupts it, and every @OnScheduled of the modules here does local work only
(ConsumeKinesis' returns at once by design, PutSnowflake's reads its key and builds its clients, no network).
"""

from __future__ import annotations

import glob
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Iterable, Optional

from consumer_flow import REPO, built_nar
from nifi_client import NiFiApiError, NiFiClient, parse_log_events
from nifi_instance import NiFiInstance, free_port

NO_AWS_CREDENTIALS = {"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent/aws-config",
                      "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials"}
CLEARED = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
           "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"]
SCHEDULING_TIMEOUT = "5 secs"
APP_LOG, STDOUT_LOG = "nifi-app.log", "nifi-stdout.log"


def standard_nar() -> str:
    """The test-only NAR of NiFi's standard processors (built once, then cached by its build.sh)."""
    out = subprocess.run([os.path.join(REPO, "tests", "nifi", "standard-nar", "build.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


# ---- NiFi's log, across its size-based rolls ----------------------------------------------------------------

@dataclass(frozen=True)
class LogMark:
    """A place in NiFi's log: the file (by inode, which a roll's rename keeps) and the byte offset in it."""
    inode: int
    offset: int


def log_mark(log_path: str) -> LogMark:
    try:
        st = os.stat(log_path)
    except FileNotFoundError:
        return LogMark(0, 0)
    return LogMark(st.st_ino, st.st_size)


def _log_files(log_path: str) -> list[tuple[str, int]]:
    """(path, inode) of nifi-app.log and its rolled files (nifi-app.1.log is the newest of those), oldest first."""
    base, ext = os.path.splitext(log_path)
    rolled = []
    for path in glob.glob(f"{base}.*{ext}"):
        index = path[len(base) + 1:-len(ext)]
        if index.isdigit():
            rolled.append((int(index), path))
    files = [path for _, path in sorted(rolled, reverse=True)] + [log_path]
    out = []
    for path in files:
        try:
            out.append((path, os.stat(path).st_ino))
        except FileNotFoundError:
            pass
    return out


def log_bytes(log_path: str, start: LogMark, end: Optional[LogMark] = None) -> bytes:
    """What NiFi wrote to its log from `start` to `end` (default: now), in whichever files it is by now."""
    files = _log_files(log_path)
    inodes = [inode for _, inode in files]
    if start.inode == 0:  # no log yet at `start`: everything there is came after it
        first, offset = 0, 0
    elif start.inode in inodes:
        first, offset = inodes.index(start.inode), start.offset
    else:
        raise AssertionError(f"{log_path}: the part written since {start} has rolled away (logback keeps 3 old files)")
    out = []
    for i, (path, inode) in enumerate(files[first:], first):
        with open(path, "rb") as f:
            f.seek(offset if i == first else 0)
            if end is not None and inode == end.inode:
                out.append(f.read(max(0, end.offset - f.tell())))
                break
            out.append(f.read())
    return b"".join(out)


# ---- the shared instance and each module's view of it ----------------------------------------------------

@dataclass(frozen=True)
class _Snapshot:
    groups: frozenset
    root_components: frozenset
    root_services: frozenset
    controller_services: frozenset
    contexts: frozenset


_ROOT_COMPONENTS = ("processors", "connections", "funnels", "inputPorts", "outputPorts", "labels", "remoteProcessGroups")


def _snapshot(c: NiFiClient) -> _Snapshot:
    root = c.root_process_group_id()
    flow = c.process_group_flow(root)
    return _Snapshot(
        groups=frozenset(g["id"] for g in flow.get("processGroups", [])),
        root_components=frozenset(x["id"] for kind in _ROOT_COMPONENTS for x in flow.get(kind, [])),
        root_services=frozenset(s["id"] for s in c.process_group_controller_services(root)),
        controller_services=frozenset(s["id"] for s in c.get("flow/controller/controller-services")["controllerServices"]),
        contexts=frozenset(x["id"] for x in c.parameter_contexts()))


class SharedNiFi:
    """The session's shared NiFi; started by the first module that asks for it."""

    def __init__(self, extensions: Optional[Iterable[str]] = None, heap: str = "1g",
                 scheduling_timeout: Optional[str] = SCHEDULING_TIMEOUT, secure: bool = False):
        self._extensions = list(extensions) if extensions is not None else None
        self.secure = secure
        self._heap = heap
        self._scheduling_timeout = scheduling_timeout
        self.instance: Optional[NiFiInstance] = None
        self.startup_end: Optional[LogMark] = None
        self.startup_stdout = b""  # the JVM's stdout/stderr while it first started (nifi.sh truncates it at a restart)
        self.starts = 0
        self.restarts = 0
        self.dirty = False

    def _start(self) -> None:
        extensions = self._extensions if self._extensions is not None else [built_nar(), standard_nar()]
        self.instance = NiFiInstance.start(port=free_port(), extensions=extensions, heap=self._heap,
                                           scheduling_timeout=self._scheduling_timeout, secure=self.secure,
                                           environment=NO_AWS_CREDENTIALS, unset_environment=CLEARED)
        self.startup_end = log_mark(self.instance.log_path)
        self.startup_stdout = _read(_stdout_path(self.instance))
        self.starts += 1
        self.dirty = False

    def restart(self) -> NiFiInstance:
        """Starts the stopped or killed instance again: same directory (flow, repositories, NARs, nifi.properties
        with its scheduling timeout), same port, heap and environment. A failed restart leaves it dirty."""
        old = self.instance
        assert old is not None and not old.is_running(), "restart() is for a killed or stopped shared NiFi"
        try:
            self.instance = NiFiInstance.start(port=old.port, instance_dir=old.instance_dir, keep=True, heap=self._heap,
                                               environment=NO_AWS_CREDENTIALS, unset_environment=CLEARED)
        except Exception:
            self.dirty = True
            raise
        self.restarts += 1
        return self.instance

    def for_module(self, name: str) -> "ModuleNiFi":
        if self.instance is not None and (self.dirty or not self.instance.is_running()):
            self.stop()  # a module could not leave it clean: the next one gets a fresh NiFi
        if self.instance is None:
            self._start()
        return ModuleNiFi(self, name)

    def stop(self) -> None:
        if self.instance is not None and self.instance.is_running():
            self.instance.stop()
        self.instance = None


def _stdout_path(instance: NiFiInstance) -> str:
    return os.path.join(instance.instance_dir, "logs", STDOUT_LOG)


def _read(path: str, offset: int = 0) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""


class ModuleNiFi:
    """One module's use of the shared NiFi (see the module docstring)."""

    def __init__(self, shared: SharedNiFi, name: str):
        self._shared = shared
        self._instance = shared.instance
        self.name = name
        self.client = self._instance.client
        self.startup_end = shared.startup_end
        self.startup_stdout = shared.startup_stdout
        self.log_start = log_mark(self._instance.log_path)
        self._stdout_earlier = b""  # what killed JVMs wrote to stdout/stderr since this module began
        self._stdout_start = len(_read(_stdout_path(self._instance)))
        self._baseline = _snapshot(self.client)
        self._cleaned = False

    @property
    def port(self) -> int:
        return self._instance.port

    @property
    def pid(self) -> int:
        return self._instance.pid

    @property
    def instance_dir(self) -> str:
        return self._instance.instance_dir

    def is_running(self) -> bool:
        return self._instance.is_running()

    def environment(self) -> dict:
        """NiFi's process environment, as the JVM got it."""
        with open(f"/proc/{self.pid}/environ", "rb") as f:
            entries = f.read().split(b"\0")
        return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)

    # ---- a crash and a restart, as a module's own NiFi would have them ----

    def kill(self) -> None:
        """SIGKILL the shared NiFi's JVM, as a crash would, and wait until it and its port are gone."""
        self._instance.kill()

    def restart(self) -> "ModuleNiFi":
        """Starts the killed NiFi again (`nifi.sh start --keep` of the same instance directory, as a module's own
        NiFi was restarted), in the shared NiFi's environment; waits until its API answers. The shared instance
        (pid, client) is the restarted one from here on, for this module, later ones and the session's teardown.
        The client keeps its base URL, so a `client` taken before the kill keeps working."""
        self._stdout_earlier += _read(_stdout_path(self._instance), self._stdout_start)
        self._instance = self._shared.restart()
        self._stdout_start = 0  # nifi.sh truncated it: all of it is the restarted JVM's, during this module
        return self

    # ---- the log, as far as it is this module's ----

    def _log_parts(self) -> list[str]:
        path = self._instance.log_path
        startup = log_bytes(path, LogMark(self.startup_end.inode, 0), self.startup_end)
        since = log_bytes(path, self.log_start)
        return [part.decode("utf-8", errors="replace") for part in (startup, since)]

    def log_text(self) -> str:
        """NiFi's start-up log and everything it logged since this module began (a restart's start-up included)."""
        return "".join(self._log_parts())

    def log_errors(self, levels: Iterable[str] = ("ERROR",), logger_prefix: Optional[str] = None) -> list[dict]:
        """The events of log_text() at these levels (nifi_client.read_log_errors' format)."""
        return [e for part in self._log_parts() for e in parse_log_events(part, logger_prefix, levels)]

    def stdout_text(self) -> str:
        """The JVM's stdout and stderr (nifi-stdout.log: what does not go through logback, such as a native
        panic's message) while NiFi first started and since this module began, across this module's restarts."""
        since = self._stdout_earlier + _read(_stdout_path(self._instance), self._stdout_start)
        return (self.startup_stdout + since).decode("utf-8", errors="replace")

    def logs(self) -> dict:
        """Each of NiFi's log files, as this module may judge it: {file name: text}."""
        return {APP_LOG: self.log_text(), STDOUT_LOG: self.stdout_text()}

    def log_mark(self) -> LogMark:
        """The end of nifi-app.log now, for log_since()."""
        return log_mark(self._instance.log_path)

    def log_since(self, mark: LogMark) -> str:
        """What NiFi logged since `mark` (a log_mark() of this module), across size rolls."""
        return log_bytes(self._instance.log_path, mark).decode("utf-8", errors="replace")

    # ---- leaving the NiFi as the module found it ----

    def clean(self) -> None:
        """Stops and removes what this module added (idempotent); raises if the NiFi is not as it was."""
        if self._cleaned:
            return
        self._cleaned = True
        try:
            problems = self._clean()
        except Exception:
            self._shared.dirty = True
            raise
        if problems:
            self._shared.dirty = True
            raise AssertionError(f"{self.name} left the shared NiFi unclean: {problems}")

    def _clean(self) -> list[str]:
        c, base = self.client, self._baseline
        if not self.is_running():
            return ["NiFi is not running"]
        root = c.root_process_group_id()
        flow = c.process_group_flow(root)
        for group in flow.get("processGroups", []):
            if group["id"] not in base.groups:
                c.delete_process_group(group["id"])
        problems = []
        left = [f"{kind} {x['id']}" for kind in _ROOT_COMPONENTS for x in flow.get(kind, [])
                if x["id"] not in base.root_components]
        if left:
            problems.append(f"components on the root canvas (a module adds its own process groups): {left}")
        for service in c.process_group_controller_services(root):
            if service["id"] not in base.root_services:
                if service["component"]["state"] != "DISABLED":
                    c.set_controller_service_state(service["id"], "DISABLED")
                rev = c._revision(f"controller-services/{service['id']}")
                c.delete(f"controller-services/{service['id']}", params={"version": rev["version"], "clientId": c.client_id})
        # A context another one inherits goes once that one is gone.
        pending = [x["id"] for x in c.parameter_contexts() if x["id"] not in base.contexts]
        for _ in range(len(pending) + 1):
            failed = []
            for context in pending:
                try:
                    c.delete_parameter_context(context)
                except NiFiApiError:
                    failed.append(context)
            if len(failed) == len(pending):
                break
            pending = failed
        after = _snapshot(c)
        for what in ("groups", "root_services", "controller_services", "contexts"):
            extra = getattr(after, what) - getattr(base, what)
            if extra:
                problems.append(f"{what} still there: {sorted(extra)}")
        status = c.get(f"flow/process-groups/{root}/status")["processGroupStatus"]["aggregateSnapshot"]
        for key in ("flowFilesQueued", "activeThreadCount"):
            deadline = time.monotonic() + 30
            while int(status.get(key, 0)) and time.monotonic() < deadline:
                time.sleep(0.5)
                status = c.get(f"flow/process-groups/{root}/status")["processGroupStatus"]["aggregateSnapshot"]
            if int(status.get(key, 0)):
                problems.append(f"{key} = {status[key]}")
        return problems
