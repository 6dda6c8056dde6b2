"""A real Apache NiFi cluster on 127.0.0.1 for the tests: N nodes in clustered mode, started by
tests/nifi/nifi.sh with its cluster options, each with NiFi's embedded ZooKeeper as one peer of an
N-peer quorum (so one node can die and the quorum, the coordinator and the cluster state live on).

    from nifi_cluster import NiFiCluster
    cluster = NiFiCluster.start(3, extensions=[built_nar()], environment={"SNOWFLAKE_HOST": ...})
    try:
        c1 = cluster.client(1)                        # NiFiClient of node 1: the cluster replicates its calls
        ...build a flow through c1...
        cluster.processor_status(proc_id)             # {node index: statusSnapshot} (nodewise status)
        victim = cluster.non_coordinator()
        cluster.kill_9(victim); cluster.restart(victim)   # rejoins, inherits the cluster's flow
        cluster.disconnect(n); cluster.reconnect(n); cluster.offload(n); cluster.remove(n)
    finally:
        cluster.stop_all()

Every node operation goes through the cluster's REST API (/controller/cluster,
/controller/cluster/nodes/{id}), sent to a connected node other than the one it acts on. Only kill_9
and restart touch processes: kill_9 sends SIGKILL to the PID nifi.sh recorded, after checking that it
is this node's NiFi; restart runs `nifi.sh start --keep` on the same instance directory.
Instance directories: tests/nifi/.work/clusters/<name>/node-<i>. Ports: free ports chosen here.
stop_all_clusters() stops every cluster this process started (a session fixture's finalizer).
Standard library only.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Union

from nifi_client import NiFiApiError, NiFiClient, log_position, read_log_errors
from nifi_instance import NIFI_SH, REPO, client_for, port_is_open

__all__ = ["ClusterNode", "NiFiCluster", "ClusterError", "stop_all_clusters", "CLUSTERS_DIR"]

CLUSTERS_DIR = os.path.join(REPO, "tests", "nifi", ".work", "clusters")

# Roles as NiFi names them in the node DTOs of /controller/cluster.
COORDINATOR = "Cluster Coordinator"
PRIMARY = "Primary Node"


class ClusterError(Exception):
    """A cluster operation failed or did not reach the awaited state in time."""


def _free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (all held open together while chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _read_env(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def _process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait(what: str, timeout: float, check: Callable[[], object], interval: float = 0.5):
    """Polls `check` until it returns something truthy; returns that. API errors and a cluster that
    cannot answer yet count as 'not yet'."""
    deadline = time.monotonic() + timeout
    last_error: Optional[Exception] = None
    while True:
        try:
            got = check()
            if got:
                return got
        except (NiFiApiError, ClusterError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            raise ClusterError(f"{what}: not within {timeout:.0f} s" + (f" (last error: {last_error})" if last_error else ""))
        time.sleep(interval)


@dataclass
class ClusterNode:
    """One node: its ports, instance directory, NiFi PID (None while stopped) and REST client."""
    index: int
    instance_dir: str
    http_port: int
    protocol_port: int
    load_balance_port: int
    zookeeper_port: int
    client: NiFiClient = field(repr=False)
    pid: Optional[int] = None
    start_seconds: float = 0.0

    @property
    def name(self) -> str:
        return f"node-{self.index}"

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @property
    def address(self) -> str:
        """host:port as NiFi's bulletins and node DTOs name this node."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def log_path(self) -> str:
        return os.path.join(self.instance_dir, "logs", "nifi-app.log")

    @property
    def extensions_dir(self) -> str:
        return os.path.join(self.instance_dir, "extensions")

    @property
    def flow_path(self) -> str:
        return os.path.join(self.instance_dir, "conf", "flow.json.gz")

    def is_alive(self) -> bool:
        """This node's NiFi process runs (it may not answer yet)."""
        return self.pid is not None and self._is_our_process(self.pid)

    def _is_our_process(self, pid: int) -> bool:
        """The PID is this instance's NiFi JVM (guards against PID reuse), as nifi.sh checks it."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError):
            return False
        props = os.path.join(self.instance_dir, "conf", "nifi.properties")
        return "org.apache.nifi.NiFi" in cmdline and props in cmdline and not _process_gone(pid)

    def rss_kib(self) -> int:
        """Resident set size of the node's JVM in KiB (0 when it is not running)."""
        if not self.is_alive():
            return 0
        with open(f"/proc/{self.pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def local_flow(self) -> dict:
        """The flow this node last wrote to its own conf/flow.json.gz (what it runs, not a merged view)."""
        with gzip.open(self.flow_path, "rt", encoding="utf-8") as f:
            return json.load(f)

    def local_flow_text(self) -> str:
        with gzip.open(self.flow_path, "rt", encoding="utf-8") as f:
            return f.read()

    def log_position(self) -> int:
        return log_position(self.log_path)

    def log_errors(self, logger_prefix: Optional[str] = None, start: int = 0,
                   levels: Iterable[str] = ("ERROR",)) -> list[dict]:
        return read_log_errors(self.log_path, logger_prefix, start, levels)

    def own_summary(self) -> dict:
        """This node's own view: /flow/cluster/summary ({"connectedToCluster", "connectedNodeCount", ...})."""
        return self.client.get("flow/cluster/summary")["clusterSummary"]


NodeRef = Union[int, ClusterNode]

_running: list["NiFiCluster"] = []


class NiFiCluster:
    """N NiFi nodes in one cluster; see the module doc. Build with NiFiCluster.start(...)."""

    def __init__(self, name: str, nodes: list[ClusterNode], environment: dict, heap: str, timeout: int):
        self.name = name
        self.nodes = nodes
        self.environment = environment
        self.heap = heap
        self.timeout = timeout
        self.up_seconds = 0.0            # start(): from the first nifi.sh start to every node CONNECTED
        self.node_ids: dict[int, str] = {}  # node index -> NiFi's node id, as last seen

    # ---- start and stop ---------------------------------------------------------------------------

    @classmethod
    def start(cls, size: int = 3, extensions: Iterable[str] = (), environment: Optional[dict] = None,
              heap: str = "768m", timeout: int = 300, scheduling_timeout: Optional[str] = None,
              name: Optional[str] = None, election_wait: str = "1 min", secure: bool = False) -> "NiFiCluster":
        """Starts `size` nodes at once (fresh instance directories, `extensions` NARs copied into each,
        `environment` added to each NiFi's environment) and waits until every node is CONNECTED and
        a coordinator and primary node are elected. The flow election ends as soon as every node voted
        (`election_wait` is only its upper bound). Stops what it started if that fails.

        `secure`: every node secured (nifi.sh --secure): HTTPS, certificates from one CA (<cluster>/ca), the
        cluster protocol and load balancing over TLS, nifi.sh's test-only login (NiFi's single-user login NAR is
        not served here) with one username and password on every node (<cluster>/login), and the file-based
        managed authorizer with every node's DN as a Node Identity and the login as Initial Admin. Once connected, the admin grants itself
        (and the nodes, for data) the root process group's policies, as NiFi's administration guide tells an
        admin of a new secured NiFi to (grant_root_policies). The clients trust the CA and log in."""
        if size < 1:
            raise ValueError("a cluster has at least one node")
        name = name or f"cluster-{uuid.uuid4().hex[:8]}"
        root = os.path.join(CLUSTERS_DIR, name)
        _stop_leftovers(root)
        for leftover in ("ca", "login"):  # an earlier run's CA and login: a fresh cluster makes its own
            shutil.rmtree(os.path.join(root, leftover), ignore_errors=True)
        ports = _free_ports(6 * size)
        nodes, servers, connect = [], [], []
        for i in range(size):
            http, protocol, lb, zk, quorum, election = ports[6 * i:6 * i + 6]
            nodes.append(ClusterNode(index=i + 1, instance_dir=os.path.join(root, f"node-{i + 1}"), http_port=http,
                                     protocol_port=protocol, load_balance_port=lb, zookeeper_port=zk,
                                     client=NiFiClient(f"http://127.0.0.1:{http}/nifi-api")))
            servers.append(f"127.0.0.1:{quorum}:{election};127.0.0.1:{zk}")
            connect.append(f"127.0.0.1:{zk}")
        cluster = cls(name, nodes, dict(environment or {}), heap, timeout)
        _running.append(cluster)
        key = secrets.token_urlsafe(24)  # every node must decrypt the same flow's sensitive values
        extensions = list(extensions)
        t0 = time.monotonic()
        try:
            procs = []
            for node in nodes:
                cmd = [NIFI_SH, "start", "--port", str(node.http_port), "--instance-dir", node.instance_dir,
                       "--timeout", str(timeout), "--heap", heap, "--sensitive-key", key,
                       "--cluster-protocol-port", str(node.protocol_port),
                       "--cluster-load-balance-port", str(node.load_balance_port),
                       "--zookeeper-connect", ",".join(connect),
                       "--embedded-zookeeper-id", str(node.index),
                       "--embedded-zookeeper-servers", ",".join(servers),
                       "--cluster-candidates", str(size), "--cluster-election-wait", election_wait]
                if scheduling_timeout:
                    cmd += ["--scheduling-timeout", scheduling_timeout]
                if secure:
                    cmd += ["--secure", "--tls-dir", os.path.join(root, "ca"), "--login-dir", os.path.join(root, "login")]
                if extensions:
                    cmd += ["--extensions", *extensions]
                procs.append((node, time.monotonic(), subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster._env())))
            failures = []
            for node, started, proc in procs:
                out, err = proc.communicate(timeout=timeout + 600)
                node.start_seconds = time.monotonic() - started
                cluster._read_pid(node)
                if proc.returncode != 0:
                    failures.append(f"{node.name}: nifi.sh start exit {proc.returncode}\n{out}\n{err}")
            if failures:
                raise ClusterError("cluster start failed:\n" + "\n".join(failures))
            for node in nodes:
                node.client = client_for(node.instance_dir)
            cluster.wait_until_connected(timeout=timeout)
            if secure:
                cluster.grant_root_policies()
            cluster.up_seconds = time.monotonic() - t0
        except BaseException:
            cluster.stop_all(grace=10)
            raise
        return cluster

    def _env(self) -> dict:
        return {**os.environ, **self.environment}

    def grant_root_policies(self) -> None:
        """As the admin (the test login, Initial Admin of the managed authorizer): NiFiClient.grant_root_policies,
        the data policies for every node too."""
        self.client().grant_root_policies()

    def _read_pid(self, node: ClusterNode) -> None:
        env_file = os.path.join(node.instance_dir, "instance.env")
        pid = _read_env(env_file).get("PID") if os.path.exists(env_file) else None
        node.pid = int(pid) if pid and node._is_our_process(int(pid)) else None

    def stop_node(self, node: NodeRef, grace: int = 30) -> None:
        """Graceful stop through `nifi.sh stop` (TERM to the node's PID, KILL after `grace` s). The
        cluster then sees the node as disconnected (it says so on shutdown) until it restarts."""
        node = self.node(node)
        proc = subprocess.run([NIFI_SH, "stop", "--instance-dir", node.instance_dir, "--grace", str(grace)],
                              capture_output=True, text=True, timeout=grace + 120)
        if proc.returncode != 0:
            raise ClusterError(f"nifi.sh stop {node.name} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        node.pid = None

    def stop_all(self, grace: int = 30) -> None:
        """Stops every node that still runs (all at once, each by its PID through nifi.sh stop)."""
        procs = [subprocess.Popen([NIFI_SH, "stop", "--instance-dir", n.instance_dir, "--grace", str(grace)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for n in self.nodes if os.path.exists(os.path.join(n.instance_dir, "nifi.pid"))]
        for p in procs:
            p.communicate(timeout=grace + 120)
        for n in self.nodes:
            if n.is_alive():  # nifi.sh refused (pid file gone?): our own PID, checked, gets KILL
                os.kill(n.pid, signal.SIGKILL)
                self._wait_dead(n)
            n.pid = None
        if self in _running:
            _running.remove(self)

    def __enter__(self) -> "NiFiCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()

    # ---- nodes and clients ------------------------------------------------------------------------

    def node(self, ref: NodeRef) -> ClusterNode:
        """A node by 1-based index (or the node itself)."""
        if isinstance(ref, ClusterNode):
            return ref
        if not 1 <= ref <= len(self.nodes):
            raise IndexError(f"node {ref}: the cluster has nodes 1..{len(self.nodes)}")
        return self.nodes[ref - 1]

    def client(self, ref: Optional[NodeRef] = None) -> NiFiClient:
        """The REST client of a node; without `ref`, of the first node that runs and is connected."""
        if ref is not None:
            return self.node(ref).client
        return self._connected_peer(exclude=None).client

    def node_by_id(self, node_id: str) -> ClusterNode:
        for dto in self.cluster_nodes():
            if dto["nodeId"] == node_id:
                return self._node_of(dto)
        raise ClusterError(f"no node with id {node_id}")

    def node_by_address(self, address: str) -> ClusterNode:
        """The node of a "host:port" (a bulletin's nodeAddress, a node DTO's address:apiPort)."""
        port = int(address.rsplit(":", 1)[1])
        for n in self.nodes:
            if n.http_port == port:
                return n
        raise ClusterError(f"no node at {address}")

    def _node_of(self, dto: dict) -> ClusterNode:
        return self.node_by_address(f"{dto['address']}:{dto['apiPort']}")

    def _connected_peer(self, exclude: Optional[ClusterNode]) -> ClusterNode:
        """A running node, other than `exclude`, that says it is connected (the coordinator first)."""
        candidates = [n for n in self.nodes if n is not exclude and n.is_alive()]
        for n in candidates:
            try:
                if n.own_summary().get("connectedToCluster"):
                    return n
            except NiFiApiError:
                continue
        raise ClusterError(f"no connected node to send the request to (excluding {exclude.name if exclude else None})")

    # ---- cluster state (GET /controller/cluster) --------------------------------------------------

    def cluster_nodes(self, via: Optional[NodeRef] = None) -> list[dict]:
        """The coordinator's node DTOs ({"nodeId","address","apiPort","status","roles","events",...}),
        asked through `via` or any running node that answers."""
        nodes = [self.node(via)] if via is not None else [n for n in self.nodes if n.is_alive()]
        last: Optional[Exception] = None
        for n in nodes:
            try:
                dtos = n.client.get("controller/cluster")["cluster"]["nodes"]
                for dto in dtos:
                    try:
                        self.node_ids[self._node_of(dto).index] = dto["nodeId"]
                    except ClusterError:
                        pass
                return dtos
            except NiFiApiError as e:
                last = e
        raise ClusterError(f"no node answered GET /controller/cluster (last error: {last})")

    def node_status(self) -> dict[int, str]:
        """node index -> status as the coordinator has it (CONNECTED, CONNECTING, DISCONNECTED,
        DISCONNECTING, OFFLOADING, OFFLOADED), or "ABSENT" for a node it does not list."""
        listed = {self._node_of(d).index: d["status"] for d in self.cluster_nodes()}
        return {n.index: listed.get(n.index, "ABSENT") for n in self.nodes}

    def _role_holder(self, role: str) -> Optional[ClusterNode]:
        holders = [self._node_of(d) for d in self.cluster_nodes() if role in (d.get("roles") or [])]
        if len(holders) > 1:
            raise ClusterError(f"{len(holders)} nodes hold the role {role!r}: {[h.name for h in holders]}")
        return holders[0] if holders else None

    def coordinator(self) -> Optional[ClusterNode]:
        """The node elected Cluster Coordinator (None while none is)."""
        return self._role_holder(COORDINATOR)

    def primary(self) -> Optional[ClusterNode]:
        """The Primary Node (None while none is)."""
        return self._role_holder(PRIMARY)

    def non_coordinator(self) -> ClusterNode:
        """A connected node that is neither the coordinator nor the primary node (the last such one)."""
        busy = {n.index for n in (self.coordinator(), self.primary()) if n is not None}
        status = self.node_status()
        others = [n for n in self.nodes if n.index not in busy and status[n.index] == "CONNECTED"]
        if not others:
            raise ClusterError(f"no connected node besides the coordinator and primary: {status}")
        return others[-1]

    def node_id(self, node: NodeRef) -> str:
        """NiFi's id of the node, as the coordinator lists it now."""
        node = self.node(node)
        for dto in self.cluster_nodes():
            if self._node_of(dto) is node:
                return dto["nodeId"]
        raise ClusterError(f"{node.name} is not listed by the coordinator")

    def wait_until_connected(self, nodes: Optional[Iterable[NodeRef]] = None, timeout: float = 180.0) -> float:
        """Waits until the coordinator lists every given node (default: all) as CONNECTED, one
        coordinator and one primary node are elected, and each given node itself says it is connected
        to a cluster of that size. Returns the seconds waited."""
        targets = [self.node(n) for n in (nodes if nodes is not None else self.nodes)]
        t0 = time.monotonic()

        def connected():
            dtos = self.cluster_nodes()
            status = {self._node_of(d).index: d["status"] for d in dtos}
            if any(status.get(n.index) != "CONNECTED" for n in targets):
                return False
            roles = [r for d in dtos for r in (d.get("roles") or [])]
            if roles.count(COORDINATOR) != 1 or roles.count(PRIMARY) != 1:
                return False
            return all(n.own_summary().get("connectedToCluster") for n in targets)
        _wait(f"nodes {[n.name for n in targets]} CONNECTED", timeout, connected)
        return time.monotonic() - t0

    def wait_for_status(self, node: NodeRef, status: str, timeout: float = 120.0) -> float:
        node = self.node(node)
        t0 = time.monotonic()
        _wait(f"{node.name} {status}", timeout, lambda: self.node_status()[node.index] == status)
        return time.monotonic() - t0

    # ---- node operations (REST API only) ----------------------------------------------------------

    def _set_status(self, node: ClusterNode, status: str) -> dict:
        """PUT /controller/cluster/nodes/{id} with the new status, through another connected node."""
        node_id = self.node_id(node)
        via = self._connected_peer(exclude=node)
        return via.client.put(f"controller/cluster/nodes/{node_id}",
                              {"node": {"nodeId": node_id, "status": status}})["node"]

    def disconnect(self, node: NodeRef, timeout: float = 60.0) -> None:
        """DISCONNECTING, then waits for DISCONNECTED. The node keeps running its flow, on its own."""
        node = self.node(node)
        self._set_status(node, "DISCONNECTING")
        self.wait_for_status(node, "DISCONNECTED", timeout)

    def reconnect(self, node: NodeRef, timeout: float = 120.0) -> float:
        """CONNECTING (from DISCONNECTED or OFFLOADED), then waits until the node is CONNECTED again
        (it takes the cluster's flow). Returns the seconds it took."""
        node = self.node(node)
        t0 = time.monotonic()
        self._set_status(node, "CONNECTING")
        self.wait_until_connected([node], timeout)
        return time.monotonic() - t0

    def offload(self, node: NodeRef, timeout: float = 120.0) -> float:
        """Disconnects the node if it is connected, then OFFLOADING, and waits for OFFLOADED: NiFi stops
        its processors and moves its queued FlowFiles to the other connected nodes. Returns the
        seconds from OFFLOADING to OFFLOADED."""
        node = self.node(node)
        if self.node_status()[node.index] in ("CONNECTED", "CONNECTING"):
            self.disconnect(node)
        t0 = time.monotonic()
        self._set_status(node, "OFFLOADING")
        self.wait_for_status(node, "OFFLOADED", timeout)
        return time.monotonic() - t0

    def remove(self, node: NodeRef, timeout: float = 60.0) -> None:
        """DELETE /controller/cluster/nodes/{id} of a DISCONNECTED or OFFLOADED node; waits until the
        coordinator no longer lists it. The removed node's NiFi keeps running, outside the cluster,
        until it is stopped; a restart makes it join again."""
        node = self.node(node)
        node_id = self.node_id(node)
        self._connected_peer(exclude=node).client.delete(f"controller/cluster/nodes/{node_id}")
        self.wait_for_status(node, "ABSENT", timeout)

    def set_processor_state_on(self, node: NodeRef, processor_id: str, state: str) -> dict:
        """Changes a processor's run state ("RUNNING", "STOPPED", ...) on this one node only: the node
        must be DISCONNECTED (a connected node's change is replicated to every node). The request goes
        to the node's own API with disconnectedNodeAcknowledged. A reconnect makes the node take the
        cluster's state again."""
        node = self.node(node)
        status = self.node_status()[node.index]
        if status != "DISCONNECTED":
            raise ClusterError(f"{node.name} is {status}: disconnect it first to change only its processor")
        version = node.client.get_processor(processor_id)["revision"]["version"]
        return node.client.put(f"processors/{processor_id}/run-status", {
            "revision": {"version": version, "clientId": node.client.client_id},
            "state": state, "disconnectedNodeAcknowledged": True})

    # ---- processes ---------------------------------------------------------------------------------

    def kill_9(self, node: NodeRef) -> None:
        """SIGKILL the node's JVM (the PID nifi.sh recorded, checked to be this node's NiFi), as a
        crash would; waits until the process and its HTTP port are gone. Any node, the coordinator too:
        its ZooKeeper peer dies with it, the other two keep the quorum, and they elect a new coordinator
        (about 11 s here, the ZooKeeper session timeout); the coordinator marks a dead node DISCONNECTED
        after 8 missed heartbeats (about 16 s)."""
        node = self.node(node)
        if not node.is_alive():
            raise ClusterError(f"{node.name} does not run (pid {node.pid})")
        os.kill(node.pid, signal.SIGKILL)
        self._wait_dead(node)
        node.pid = None

    @staticmethod
    def _wait_dead(node: ClusterNode) -> None:
        pid = node.pid
        deadline = time.monotonic() + 60
        while pid is not None and not _process_gone(pid):
            if time.monotonic() > deadline:
                raise ClusterError(f"{node.name} PID {pid} still alive 60 s after SIGKILL")
            time.sleep(0.05)
        while port_is_open(node.http_port):
            if time.monotonic() > deadline:
                raise ClusterError(f"{node.name} port {node.http_port} still open")
            time.sleep(0.05)

    def restart(self, node: NodeRef, timeout: Optional[int] = None, wait_connected: bool = True) -> float:
        """Starts a stopped or killed node again on the same instance directory (`nifi.sh start --keep`:
        its flow, repositories, state and ports), with the cluster's environment; it asks the
        coordinator to join and inherits the cluster's flow. Waits until it is CONNECTED (unless
        `wait_connected` is False). Returns the seconds from the start command to CONNECTED."""
        node = self.node(node)
        if node.is_alive():
            raise ClusterError(f"{node.name} still runs (PID {node.pid}); stop or kill it first")
        timeout = timeout or self.timeout
        t0 = time.monotonic()
        proc = subprocess.run([NIFI_SH, "start", "--port", str(node.http_port), "--instance-dir", node.instance_dir,
                               "--timeout", str(timeout), "--heap", self.heap, "--keep"],
                              capture_output=True, text=True, timeout=timeout + 600, env=self._env())
        self._read_pid(node)
        if proc.returncode != 0:
            raise ClusterError(f"nifi.sh start --keep {node.name} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        if wait_connected:
            self.wait_until_connected([node], timeout)
        node.start_seconds = time.monotonic() - t0
        return node.start_seconds

    def rss_kib(self) -> dict[int, int]:
        """node index -> RSS of its JVM in KiB (0 when not running)."""
        return {n.index: n.rss_kib() for n in self.nodes}

    # ---- per-node views of components -------------------------------------------------------------

    def _nodewise(self, path: str, key: str, via: Optional[NodeRef]) -> dict[int, dict]:
        client = self.client(via)
        status = client.get(path, params={"nodewise": "true"})[key]
        return {self.node_by_address(f"{s['address']}:{s['apiPort']}").index: s["statusSnapshot"]
                for s in status.get("nodeSnapshots") or []}

    def processor_status(self, processor_id: str, via: Optional[NodeRef] = None) -> dict[int, dict]:
        """node index -> that node's status snapshot of the processor ({"runStatus",
        "activeThreadCount", "flowFilesOut", "bytesRead", ...}), for every connected node
        (GET /flow/processors/{id}/status?nodewise=true)."""
        return self._nodewise(f"flow/processors/{processor_id}/status", "processorStatus", via)

    def connection_status(self, connection_id: str, via: Optional[NodeRef] = None) -> dict[int, dict]:
        """node index -> that node's status snapshot of a connection ({"flowFilesQueued", ...})."""
        return self._nodewise(f"flow/connections/{connection_id}/status", "connectionStatus", via)

    def queued(self, connection_id: str, via: Optional[NodeRef] = None) -> dict[int, int]:
        """node index -> FlowFiles queued in the connection on that node."""
        return {i: int(s.get("flowFilesQueued", 0)) for i, s in self.connection_status(connection_id, via).items()}

    def bulletins(self, node: Optional[NodeRef] = None, source_id: Optional[str] = None,
                  via: Optional[NodeRef] = None) -> list[dict]:
        """Bulletins of the cluster's bulletin board (each carries the "nodeAddress" it came from),
        only those of `node` when given."""
        found = self.client(via).bulletins(source_id=source_id)
        if node is None:
            return found
        address = self.node(node).address
        return [b for b in found if b.get("nodeAddress") == address]


def _stop_leftovers(root: str) -> None:
    """Stops nodes a killed earlier run left running in this cluster's instance directories (nifi.sh
    stop checks that each PID is that instance's NiFi), so the new start can wipe and reuse them."""
    if not os.path.isdir(root):
        return
    for name in sorted(os.listdir(root)):
        instance = os.path.join(root, name)
        if os.path.exists(os.path.join(instance, "nifi.pid")):
            subprocess.run([NIFI_SH, "stop", "--instance-dir", instance, "--grace", "10"],
                           capture_output=True, text=True, timeout=180)


def stop_all_clusters(grace: int = 30) -> None:
    """Stops every cluster this process started and has not stopped (for a session finalizer)."""
    for cluster in list(_running):
        try:
            cluster.stop_all(grace=grace)
        except Exception as e:  # keep stopping the others
            print(f"stop_all_clusters: {cluster.name}: {e}")
