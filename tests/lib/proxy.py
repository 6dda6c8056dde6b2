"""A real HTTP proxy and a network namespace whose only way out is that proxy, for the proxy tests.

    with Tinyproxy(user="nifi", password="pw") as proxy, Namespace() as ns:
        inside = ns.reach(proxy.port)          # 127.0.0.1:<inside> in the namespace is the proxy
        api = ns.expose(nifi_port)             # 127.0.0.1:<api> here is NiFi's port in the namespace
        NiFiInstance.start(port=nifi_port, prefix=ns.prefix, api_port=api)
        ns.refuses(4568)                       # nothing else is reachable from inside
        proxy.requests()                       # [("POST", "http://127.0.0.1:4568/"), ("CONNECT", ...)]

Tinyproxy is Debian's package (tests/proxy/tinyproxy.sh unpacks it into the cache); it logs every
request line it serves. The namespace is made by `unshare --net` (as root; `-r` otherwise) and
holds only loopback: the emulators and the stand-in stay in this machine's namespace, so a
process inside reaches them through the proxy or not at all. Bridges between the namespaces
(tests/proxy/bridge.py) relay through Unix sockets, which the file system shares. Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINYPROXY_SH = os.path.join(REPO, "tests", "proxy", "tinyproxy.sh")
BRIDGE = os.path.join(REPO, "tests", "proxy", "bridge.py")

REQUEST = re.compile(r"Request \(file descriptor \d+\): (\S+) (\S+) HTTP/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(check, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up in {timeout:.0f} s")
        time.sleep(0.05)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Tinyproxy:
    """tinyproxy on 127.0.0.1 of this namespace, with basic authentication when `user` is given."""

    def __init__(self, user: Optional[str] = None, password: Optional[str] = None):
        binary = subprocess.run([TINYPROXY_SH], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        self.dir = tempfile.mkdtemp(prefix="kinesnow-tinyproxy-")
        self.port = _free_port()
        self.log = os.path.join(self.dir, "access.log")
        lines = [f"Port {self.port}", "Listen 127.0.0.1", "Timeout 900", f'LogFile "{self.log}"', "LogLevel Connect",
                 "MaxClients 200", "DisableViaHeader Yes"]
        if user:
            lines.append(f"BasicAuth {user} {password}")
        # No ConnectPort line: CONNECT is allowed to every port (tinyproxy's default without one).
        conf = os.path.join(self.dir, "tinyproxy.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        self.process = subprocess.Popen([binary, "-d", "-c", conf], stdout=subprocess.DEVNULL,
                                        stderr=open(os.path.join(self.dir, "stderr.log"), "w"))
        _wait_for(lambda: _port_open(self.port), f"tinyproxy on 127.0.0.1:{self.port}")

    def url(self, port: Optional[int] = None, user: Optional[str] = None, password: Optional[str] = None) -> str:
        auth = f"{user}:{password}@" if user else ""
        return f"http://{auth}127.0.0.1:{port or self.port}"

    def requests(self) -> list[tuple[str, str]]:
        """(method, target) of every request the proxy has read, in order (CONNECT targets are host:port)."""
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return [(m.group(1), m.group(2)) for m in REQUEST.finditer(f.read())]

    def stop(self) -> None:
        _end(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Tinyproxy":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Namespace:
    """A network namespace of the test's own, with only loopback up."""

    def __init__(self):
        root = os.geteuid() == 0
        self.dir = tempfile.mkdtemp(prefix="kinesnow-netns-")
        unshare = ["unshare", "--net"] if root else ["unshare", "-r", "--net"]
        self.holder = subprocess.Popen(unshare + ["--", "sh", "-c", "ip link set lo up && echo ready && exec sleep 86400"],
                                       stdout=subprocess.PIPE, text=True)
        if self.holder.stdout.readline().strip() != "ready":
            raise RuntimeError("could not make a network namespace with loopback (unshare, ip link)")
        self.prefix = ["nsenter", "-t", str(self.holder.pid), "-n"] + ([] if root else ["-U", "--preserve-credentials"])
        self.bridges: list[subprocess.Popen] = []

    def _bridge(self, inside: bool, listen: str, to: str) -> None:
        argv = [sys.executable, BRIDGE, "--listen", listen, "--to", to]
        proc = subprocess.Popen((self.prefix if inside else []) + argv, stdout=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"bridge {listen} -> {to} did not start")
        self.bridges.append(proc)

    def reach(self, port: int, inside_port: Optional[int] = None) -> int:
        """Makes 127.0.0.1:`port` of this namespace reachable inside at 127.0.0.1:`inside_port`
        (the same number by default); returns the inside port."""
        inside_port = inside_port or port
        sock = os.path.join(self.dir, f"in-{inside_port}.sock")
        self._bridge(False, f"unix:{sock}", f"tcp:{port}")
        self._bridge(True, f"tcp:{inside_port}", f"unix:{sock}")
        return inside_port

    def expose(self, inside_port: int) -> int:
        """Makes 127.0.0.1:`inside_port` inside reachable here; returns the port here."""
        port = _free_port()
        sock = os.path.join(self.dir, f"out-{inside_port}.sock")
        self._bridge(True, f"unix:{sock}", f"tcp:{inside_port}")
        self._bridge(False, f"tcp:{port}", f"unix:{sock}")
        return port

    def refuses(self, port: int) -> bool:
        """Whether a connection from inside to 127.0.0.1:`port` is refused."""
        probe = ("import socket,sys\ns=socket.socket()\ns.settimeout(3)\n"
                 f"sys.exit(0 if s.connect_ex(('127.0.0.1', {port})) != 0 else 1)")
        return subprocess.run(self.prefix + [sys.executable, "-c", probe]).returncode == 0

    def close(self) -> None:
        for proc in self.bridges:
            _end(proc)
        if self.holder.poll() is None:
            self.holder.send_signal(signal.SIGTERM)
            self.holder.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Namespace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
