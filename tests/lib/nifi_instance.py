"""Start/stop a throw-away NiFi through tests/nifi/nifi.sh, for pytest fixtures.

    from nifi_instance import NiFiInstance
    with NiFiInstance.start(port=18080, extensions=["path/to/product.nar"]) as nifi:
        nifi.client.processor_types()
        nifi.log_path   # <instance>/logs/nifi-app.log

or as a session fixture:

    @pytest.fixture(scope="session")
    def nifi():
        inst = NiFiInstance.start(port=free_port())
        yield inst
        inst.stop()
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import Iterable, Optional

from nifi_client import NiFiApiError, NiFiClient

# Seconds each successful NiFiInstance.start of this process took (fresh starts and `keep` restarts alike): the
# e2e conftest prints how many NiFi starts a test session paid for.
STARTS: list = []

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NIFI_SH = os.path.join(REPO, "tests", "nifi", "nifi.sh")
NIFI_VERSION_FILE = os.path.join(REPO, "tests", "nifi", "nifi-version")


def pinned_nifi_version() -> str:
    """The NiFi version from tests/nifi/nifi-version (the single place it is pinned)."""
    with open(NIFI_VERSION_FILE, encoding="utf-8") as f:
        return f.read().strip()


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _read_env(path: str) -> dict:
    env = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    return env


def read_instance_env(instance_dir: str) -> dict:
    """What nifi.sh recorded of an instance (instance.env): PORT, URL, PID, and SECURE, CA_FILE, LOGIN_DIR when secured."""
    return _read_env(os.path.join(instance_dir, "instance.env"))


def client_for(instance_dir: str, api_port: Optional[int] = None, timeout: float = 30.0) -> NiFiClient:
    """A NiFiClient for the instance nifi.sh started in `instance_dir`, from its instance.env: plain HTTP, or
    (secured) HTTPS trusting the instance's CA and logging in with its test login. `api_port`: reach
    the API on another port of 127.0.0.1 (a bridge) than the one NiFi listens on."""
    env = read_instance_env(instance_dir)
    url = env["URL"]
    if api_port:
        url = url.replace(f":{env['PORT']}/", f":{api_port}/")
    if env.get("SECURE") != "1":
        return NiFiClient(url, timeout=timeout)
    username, password = read_login(env["LOGIN_DIR"])
    return NiFiClient(url, timeout=timeout, username=username, password=password, ca_file=env["CA_FILE"])


def read_login(login_dir: str) -> tuple[str, str]:
    """The login nifi.sh made for a secured instance: (username, password)."""
    with open(os.path.join(login_dir, "username"), encoding="utf-8") as f:
        username = f.read()
    with open(os.path.join(login_dir, "password"), encoding="utf-8") as f:
        return username, f.read()


def anonymous_status(client: NiFiClient) -> Optional[int]:
    """The HTTP status NiFi gives a call without login to /flow/about over the client's own URL and trust
    (401 on a secured NiFi); None when nothing answers."""
    try:
        client.anonymous().about()
        return 200
    except NiFiApiError as e:
        return e.status


@dataclass
class NiFiInstance:
    port: int
    instance_dir: str
    pid: int
    start_seconds: float
    client: NiFiClient = field(repr=False)
    # Runs nifi.sh inside another network namespace (tests/lib/proxy.py's Namespace.prefix).
    prefix: list = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @property
    def log_path(self) -> str:
        return os.path.join(self.instance_dir, "logs", "nifi-app.log")

    @property
    def extensions_dir(self) -> str:
        """The running instance's autoload directory: a NAR copied here is loaded without restart."""
        return os.path.join(self.instance_dir, "extensions")

    @classmethod
    def start(cls, port: Optional[int] = None, instance_dir: Optional[str] = None,
              extensions: Iterable[str] = (), timeout: int = 240, heap: str = "1g",
              keep: bool = False, scheduling_timeout: Optional[str] = None,
              environment: Optional[dict] = None, prefix: Iterable[str] = (),
              api_port: Optional[int] = None, unset_environment: Iterable[str] = (),
              secure: bool = False) -> "NiFiInstance":
        """Run `nifi.sh start` (fresh instance directory, or with `keep` the existing one as it is:
        flow, repositories, NARs) and wait until the API answers. `scheduling_timeout` (such as
        "5 secs") sets how long NiFi lets an @OnScheduled method run before interrupting it.
        `environment` adds variables to NiFi's environment (such as SNOWFLAKE_HOST), `unset_environment` names
        variables of this process' environment that NiFi does not inherit. `prefix` runs
        nifi.sh under a command (such as nsenter into a network namespace); the API is then reached
        at 127.0.0.1:`api_port` (a bridge out of the namespace) instead of `port`. `secure`: HTTPS, a login and
        authorization (nifi.sh --secure: our test-only login provider, NiFi's single-user one not being served
        here, and NiFi's file-based managed authorizer; a `keep` restart stays as it was); the client then trusts
        the instance's CA and logs in, and on a new instance grants its user the root group's policies."""
        port = port or free_port()
        instance_dir = instance_dir or os.path.join(REPO, "tests", "nifi", ".work", "instances", f"port-{port}")
        prefix = list(prefix)
        cmd = prefix + [NIFI_SH, "start", "--port", str(port), "--instance-dir", instance_dir,
               "--timeout", str(timeout), "--heap", heap]
        extensions = list(extensions)
        if scheduling_timeout:
            cmd += ["--scheduling-timeout", scheduling_timeout]
        if secure and not keep:
            cmd.append("--secure")
        if keep:
            cmd.append("--keep")
        elif extensions:
            cmd += ["--extensions", *extensions]
        t0 = time.monotonic()
        unset = set(unset_environment)
        env = {k: v for k, v in os.environ.items() if k not in unset}
        env.update(environment or {})
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 600, env=env)
        elapsed = time.monotonic() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"nifi.sh start failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        STARTS.append(elapsed)
        env = _read_env(os.path.join(instance_dir, "instance.env"))
        client = client_for(instance_dir, api_port)
        if secure and not keep:  # a new secured NiFi: its admin grants itself the root group's policies
            client.grant_root_policies()
        return cls(port=port, instance_dir=instance_dir, pid=int(env["PID"]), start_seconds=elapsed, client=client,
                   prefix=prefix)

    def is_running(self) -> bool:
        return subprocess.run(self.prefix + [NIFI_SH, "status", "--instance-dir", self.instance_dir],
                              capture_output=True).returncode == 0

    def stop(self, grace: int = 30) -> None:
        """Run `nifi.sh stop`: TERM to this instance's PID, KILL after `grace` seconds."""
        proc = subprocess.run(self.prefix + [NIFI_SH, "stop", "--instance-dir", self.instance_dir, "--grace", str(grace)],
                              capture_output=True, text=True, timeout=grace + 120)
        if proc.returncode != 0:
            raise RuntimeError(f"nifi.sh stop failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")

    def kill(self) -> None:
        """SIGKILL the NiFi JVM, as a crash would, and wait until it and its port are gone."""
        import signal
        os.kill(self.pid, signal.SIGKILL)
        while os.path.exists(f"/proc/{self.pid}") and not _is_zombie(self.pid):
            time.sleep(0.1)
        while port_is_open(self.port):
            time.sleep(0.1)

    def rss_kib(self) -> int:
        """Resident set size of the NiFi JVM in KiB (from /proc)."""
        with open(f"/proc/{self.pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def __enter__(self) -> "NiFiInstance":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
