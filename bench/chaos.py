"""An hour of faults (issues 34 and 51): ConsumeKinesis -> PutSnowflake -> the Snowflake stand-in in a real 3-node
NiFi cluster, one Application Name, Failover Position SNOWFLAKE_COMMIT, a steady producer (--rate records/s, default
500) into a --shards stream (default 8) of kinesis-local with malformed records mixed in, and every --fault-every
seconds one fault, drawn at random (seeded) from:

  kill9         kill -9 of a node; once its shards are taken over (or 60 s), the node is restarted and rejoins
  sigstop       SIGSTOP of a node until its shards are taken over (past the 7 s Failover Timeout; at most 60 s),
                plus 0-20 s more, then SIGCONT; the node rejoins the cluster by itself (reconnect if it does not)
  consumer      ConsumeKinesis stopped (cluster-wide), 10-45 s, started
  sink          PutSnowflake stopped (cluster-wide), 10-45 s, started
  standin_http  the stand-in answers 20-100 appends with 429 (ReceiverSaturated or MemoryThresholdExceeded), 503 or
                500, or 1-5 requests with what makes a client recreate itself (410 pipe failover, 404
                InvalidClientError, a 404 without envelope), for up to 30 s (its admin fault API)
  slow_commits  the stand-in commits late: commit lag 5-20 s instead of its --commit-lag-ms, or commits withheld,
                for 30-90 s
  reshard       SplitShard or MergeShards (open shards kept between --shards - 1 and --shards + 2)
  refuse_4xx    the stand-in refuses appends with 403 or 400 (a final refusal, which PutSnowflake sends to
                `failure`): either every append on every channel for 5-20 s, or the next 1-5 appends of 1-3 of the
                table's channels (for up to 30 s). PutSnowflake's `failure` is looped back to itself in this flow,
                so the refused FlowFiles come back; the fault reports the refusals and the most FlowFiles seen on
                the loop

Faults are drawn from a shuffled deck of the eight (reshuffled when used up, with the seed), so each kind fires
once in every eight faults. Before each fault the cluster is healed: every node running and CONNECTED.

The flow is the shipped one (parameter-contexts/apply.py: LINE_DELIMITED, INJECT_METADATA, SNOWFLAKE_COMMIT) with
three changes to its queues, so that every record can be accounted for: PutSnowflake's `failure` loops back to
PutSnowflake (as issue 51 asks of the failure loop); its `invalid` and `empty` wait in a queue (none expected: the
shipped flow's malformed records never reach PutSnowflake); and ConsumeKinesis' `parse.failure` goes to a PutFile
(NiFi's standard processors, the test-only NAR of tests/nifi/standard-nar) that writes each FlowFile to a directory
of its own, bench/.work/chaos-RUN/parse-failure/<FlowFile uuid>/ (its failure looped back to it).

Malformed records (--malformed-every N, default 200: every N-th record id; 0 for none) take turns in three forms
that each carry their record id and can never load as a row: `oops <id>` (not JSON), `[<id>]` (JSON, an array) and
`<id>` (JSON, a number), the shapes of `oops`, `[]` and `42` in tests/e2e/test_malformed_records.py. They may be
plain records or user records in KPL aggregates, as the producer's good records are. The shipped flow sends each to
`parse.failure` as a FlowFile of its own.

The cluster, not two standalone NiFis: tests/lib/nifi_cluster.py already does kill -9 and restart of a node
(a checked PID, `nifi.sh start --keep`, rejoin and waiting for CONNECTED), the flow is made once and replicated,
and bench/cluster_failover.py's Flow (reused here) applies it with SNOWFLAKE_COMMIT through the IAM policy proxy,
as tests/e2e/test_cluster_exactly_once.py does. Two standalone NiFis would need the flow applied twice and their
stops and starts done twice. The nodes' ports (HTTP, cluster protocol, load balancing, ZooKeeper) are free ports
the cluster picks when it starts, so they never meet another run's NiFi.

The producer keeps to its schedule (records due = rate x seconds since it started; at most a second's worth in one
PutRecords round), so a slow round is caught up on; the report gives the rate it reached (records PutRecords
confirmed / seconds it ran) and the slowest minute, to show the run really had the rate it names.

Every minute each node's JVM is sampled: RSS (VmRSS of /proc/PID/status) and used heap (usedHeapBytes of
/nifi-api/system-diagnostics?nodewise=true, or the node's own answer while it is disconnected). Flatness is
judged per JVM (a node restarted after kill -9 is a new JVM): its samples from --warmup minutes after its start
(default: 10, or a third of the run if that is shorter) get a least-squares line; flat means the line's change
from the first of those samples to the last is within 10 % of its value at the first (a line, not the two end
samples, so that one GC's sawtooth in the used heap does not decide). At least 4 samples after warm-up are needed.

At the end: the producer stops, the cluster is healed, the stand-in's faults cleared, both processors running;
then up to --drain seconds for every good record put to be in the table and every malformed one in a parse.failure
file, 10 s more (anything still in flight would show as a duplicate), and:
- good records: losses (records PutRecords confirmed and not in the table), duplicates (rows minus distinct ids),
  records whose PutRecords failed (unconfirmed: they may or may not be in the stream);
- malformed records: how many were put, how many of them are in parse.failure files (each must be: a missing one is
  lost), and the copies beyond one (a record read again after a failover is routed again: parse.failure is not part
  of the table's exactly-once), and any file that is not a malformed record put;
- the error table, NiFi's queues (PutSnowflake's input, its failure loop, invalid/empty, PutFile's input and loop),
  the lease table (shard rows and `__node__` heartbeat rows, live and tombstoned by `removedAt`), the IAM proxy's
  denials and the ERROR/WARN lines of io.kinesnow in each node's log.
Exit 1 if good records were lost or loaded twice, or a malformed record is in no parse.failure file; 2 if the run
could not be carried out.

The stand-in commits as Snowflake does by default: each append's commit lag drawn from 4-10 s, in append order
per channel (--commit-lag-ms; runs before issue 50 used a fixed 300 ms).

    bench/chaos.sh [--minutes 60] [--fault-every 180] [--rate 500] [--shards 8] [--malformed-every 200] [--seed S]
                   [--warmup MIN] [--drain SEC] [--commit-lag-ms 4000-10000] [--record-summary PREFIX]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import statistics
import sys
import threading
import time
import urllib.error

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))

import iam_proxy  # noqa: E402
from apply import funnel  # noqa: E402
from cluster_failover import Flow  # noqa: E402
from lease_table import NODE_ROW_PREFIX, heartbeats, lease_owners, lease_rows  # noqa: E402
from nifi_client import NiFiApiError  # noqa: E402
from nifi_cluster import ClusterError, NiFiCluster  # noqa: E402
from nifi_instance import client_for  # noqa: E402
from services import AwsJsonError, dynamodb_call, ensure_services, kinesis_call  # noqa: E402
from shared_nifi import standard_nar  # noqa: E402
from standin import SNOWFLAKE_LIKE_COMMIT_LAG, Standin, make_key_pair  # noqa: E402
from test_acceptance import ACCOUNT, USER, Producer, nar, wait_active  # noqa: E402

FAULTS = ("kill9", "sigstop", "consumer", "sink", "standin_http", "slow_commits", "reshard", "refuse_4xx")
# Malformed records, in turn: not JSON, JSON but an array, JSON but a number (each carries its record id).
MALFORMED_FORMS = ("oops {id}", "[{id}]", "{id}")
REFUSED_CODE = "ERR_REFUSED_BY_CHAOS_BENCH"  # no code PutSnowflake treats specially: a plain 4xx refusal
PUT_FILE = "org.apache.nifi.processors.standard.PutFile"
# tests/nifi/standard-nar/pom.xml's coordinates: named here, not looked up (a cluster replicates the processor-types
# lookup to every node, and the first trial's lookup failed with a node's timeout on a loaded machine).
STANDARD_BUNDLE = {"group": "com.kinesnow.tests", "artifact": "kinesnow-test-standard-processors-nar", "version": "2.3.0"}
COMMIT_LAG_MS = SNOWFLAKE_LIKE_COMMIT_LAG  # --commit-lag-ms sets it
FAILOVER_TIMEOUT_S = 7  # ConsumeKinesis's default Failover Timeout
T0 = time.monotonic()


def log(msg: str) -> None:
    el = int(time.monotonic() - T0)
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} +{el // 60:02d}:{el % 60:02d} {msg}", flush=True)


class Interrupted(KeyboardInterrupt):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


# ---- the producer ------------------------------------------------------------------------------------------------

class ChaosProducer(Producer):
    """test_acceptance.Producer (plain records and KPL aggregates over 16 partition keys), with every
    `malformed_every`-th record id a malformed record (MALFORMED_FORMS in turn) instead of a JSON object."""

    def __init__(self, stream: str, malformed_every: int):
        super().__init__(stream)
        self.malformed_every = malformed_every

    def is_malformed(self, i: int) -> bool:
        return self.malformed_every > 0 and i % self.malformed_every == self.malformed_every - 1

    def event(self, i: int, phase: int) -> str:
        if self.is_malformed(i):
            return MALFORMED_FORMS[(i // self.malformed_every) % len(MALFORMED_FORMS)].format(id=i)
        return super().event(i, phase)


class SteadyProducer:
    """A ChaosProducer at `rate` records per second until stopped, on a schedule: each round puts the records due
    since the start (rate x seconds) not yet tried, at most a second's worth, so a slow PutRecords is caught up on.
    A failed PutRecords is counted and the loop goes on: its ids are 'unconfirmed' (put or not, nobody knows)."""

    def __init__(self, producer: ChaosProducer, rate: int):
        self.producer, self.rate = producer, rate
        self.stop = threading.Event()
        self.errors = 0
        self.last_error = None
        self.tried = 0
        self.started = self.stopped = None
        self.per_minute: list[tuple[float, int]] = []  # (seconds since the producer started, records confirmed)
        self.thread = threading.Thread(target=self.run, daemon=True, name="producer")

    def run(self):
        last_report = 0.0
        self.started = time.monotonic()
        while not self.stop.is_set():
            due = int(self.rate * (time.monotonic() - self.started)) - self.tried
            if due <= 0:
                self.stop.wait(0.05)
                continue
            count = min(due, self.rate)
            self.tried += count
            try:
                self.producer.put(count, phase=1)
            except Exception as e:  # kinesis-local while resharding, a timeout: go on
                self.errors += 1
                self.last_error = f"{type(e).__name__}: {str(e)[:200]}"
                if time.monotonic() - last_report > 30:
                    log(f"producer: PutRecords failed ({self.errors} so far): {self.last_error}")
                    last_report = time.monotonic()
        self.stopped = time.monotonic()

    def note_minute(self) -> None:
        if self.started is not None:
            self.per_minute.append((time.monotonic() - self.started, self.producer.count()))

    def rate_reached(self) -> dict:
        """Records confirmed per second over the producer's whole run, and in its slowest full minute (between two
        of the per-minute notes at least 50 s apart)."""
        if self.started is None:
            return {"per_s": None, "slowest_minute_per_s": None, "seconds": 0}
        seconds = (self.stopped or time.monotonic()) - self.started
        points = [(0.0, 0)] + self.per_minute
        windows = [(c2 - c1) / (t2 - t1) for (t1, c1), (t2, c2) in zip(points, points[1:]) if t2 - t1 >= 50]
        return {"per_s": self.producer.count() / seconds if seconds > 0 else None,
                "slowest_minute_per_s": min(windows) if windows else None, "seconds": seconds}

    def confirmed(self) -> set:
        with self.producer.lock:
            return set(self.producer.expected)

    def unconfirmed(self) -> set:
        with self.producer.lock:
            return set(range(self.producer.next_id)) - set(self.producer.expected)

    def split(self, ids: set) -> tuple[set, set]:
        """(good ids, malformed ids) of `ids`."""
        bad = {i for i in ids if self.producer.is_malformed(i)}
        return ids - bad, bad


def wait_processor_types(cluster: NiFiCluster, timeout: float = 300) -> None:
    """Until the cluster answers its processor-types list (replicated to every node), which making the flow asks for.
    Two trials on a loaded machine (load 17 on 2 cores) saw it fail with HTTP 500 (one node's replicated request
    timed out) right after every node was CONNECTED, with the standard processors' NAR loaded."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster.client(1).get("flow/processor-types")
            return
        except NiFiApiError as e:
            if time.monotonic() > deadline:
                raise
            log(f"the processor types are not listed yet ({str(e)[:120]}): again in 10 s")
            time.sleep(10)


# ---- the flow's queues ------------------------------------------------------------------------------------------

def rewire(cluster: NiFiCluster, flow: Flow, parse_failure_dir: str) -> None:
    """The shipped flow's queues changed so that every record can be accounted for (see the module's documentation):
    PutSnowflake's failure looped back to it, invalid and empty kept in a queue, parse.failure written to files by a
    PutFile. flow.ids gains the new connections' ids."""
    c = cluster.client(1)
    group, consumer, sink = flow.ids["group"], flow.ids["consumer"], flow.ids["sink"]
    c.delete_connection(flow.ids["failure_queue"])  # failure and invalid into a funnel
    c.delete_connection(flow.ids["parse_failure_queue"])  # parse.failure into a funnel
    flow.ids["failure_loop"] = c.connect(group, sink, sink, ["failure"])["id"]
    flow.ids["invalid_queue"] = c.connect(group, sink, funnel(c, group, (400, 600)), ["invalid", "empty"],
                                          destination_type="FUNNEL")["id"]
    writer = c.add_processor(group, PUT_FILE, bundle=STANDARD_BUNDLE, name="parse.failure to files", position=(400, 0),
                             auto_terminate=["success"], properties={
                                 "Directory": os.path.join(parse_failure_dir, "${uuid}"),
                                 "Conflict Resolution Strategy": "replace", "Create Missing Directories": "true"})["id"]
    flow.ids["writer"] = writer
    flow.ids["parse_failure_queue"] = c.connect(group, consumer, writer, ["parse.failure"])["id"]
    flow.ids["writer_failure_loop"] = c.connect(group, writer, writer, ["failure"])["id"]
    for pid in (consumer, sink, writer):
        v = c.processor_validation(pid)
        assert v["status"] == "VALID", v
    c.start_processor(writer)


def routed_malformed(parse_failure_dir: str) -> collections.Counter:
    """Record id -> the parse.failure files holding it (None for a file that holds no record id)."""
    out = collections.Counter()
    for root, _dirs, files in os.walk(parse_failure_dir):
        for name in files:
            if name.startswith("."):  # PutFile's file while it writes it (a node killed then leaves it)
                continue
            with open(os.path.join(root, name), "rb") as f:
                text = f.read(200).decode("utf-8", "replace")
            digits = "".join(ch for ch in text if ch.isdigit())
            out[int(digits) if digits and text.strip() in [form.format(id=digits) for form in MALFORMED_FORMS]
                else None] += 1
    return out


# ---- memory samples ----------------------------------------------------------------------------------------------

class Sampler:
    """Every `every` seconds: RSS and used heap of each node's JVM."""

    def __init__(self, cluster: NiFiCluster, paused: set, every: float = 60.0):
        self.cluster, self.paused, self.every = cluster, paused, every
        self.clients = {n.index: client_for(n.instance_dir, timeout=10) for n in cluster.nodes}
        self.samples: list[dict] = []  # {"t": s since start, "node", "pid", "rss_mib", "heap_mib"}
        self.started: dict[int, float] = {}  # pid -> t of its start (as seen here)
        self.progress = None  # called after each sample (a progress line)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True, name="sampler")

    def note_start(self, pid) -> None:
        if pid:
            self.started.setdefault(pid, time.monotonic() - T0)

    def heaps(self) -> dict:
        """node index -> used heap bytes."""
        out = {}
        answering = [n for n in self.cluster.nodes if n.is_alive() and n.pid not in self.paused]
        for n in answering:  # the first connected node answers for all (nodewise)
            try:
                if not self.clients[n.index].get("flow/cluster/summary")["clusterSummary"].get("connectedToCluster"):
                    continue
                answer = self.clients[n.index].get("system-diagnostics", params={"nodewise": "true"})["systemDiagnostics"]
                for s in answer.get("nodeSnapshots") or []:
                    try:
                        node = self.cluster.node_by_address(f"{s['address']}:{s['apiPort']}")
                        out[node.index] = s["snapshot"]["usedHeapBytes"]
                    except (ClusterError, KeyError):
                        pass
                break
            except (NiFiApiError, KeyError, TypeError):
                continue
        for n in answering:  # a disconnected node answers for itself
            if n.index not in out:
                try:
                    answer = self.clients[n.index].get("system-diagnostics")["systemDiagnostics"]
                    out[n.index] = answer["aggregateSnapshot"]["usedHeapBytes"]
                except (NiFiApiError, KeyError, TypeError):
                    pass
        return out

    def sample(self) -> None:
        t = time.monotonic() - T0
        heaps = self.heaps()
        parts = []
        for n in self.cluster.nodes:
            pid = n.pid
            try:
                rss = n.rss_kib() / 1024 if pid else None
            except OSError:
                rss = None
            heap = heaps.get(n.index)
            heap = heap / 2**20 if heap is not None else None
            self.note_start(pid)
            self.samples.append({"t": t, "node": n.index, "pid": pid, "rss_mib": rss, "heap_mib": heap})
            parts.append(f"node-{n.index} pid={pid} rss={fmt(rss, 0)} MiB heap={fmt(heap, 0)} MiB")
        log("sample: " + " | ".join(parts))

    def run(self):
        while not self.stop.wait(0 if not self.samples else self.every):
            for what in (self.sample, self.progress):
                try:
                    if what:
                        what()
                except Exception as e:  # never let a sample stop the run
                    log(f"{what.__name__} failed: {type(e).__name__}: {e}")

    def flatness(self, warmup_s: float) -> list[dict]:
        """Per JVM (node, pid) with samples: its figures after warm-up and the verdict."""
        out = []
        by_jvm = collections.defaultdict(list)
        for s in self.samples:
            if s["pid"]:
                by_jvm[(s["node"], s["pid"])].append(s)
        for (node, pid), samples in sorted(by_jvm.items(), key=lambda kv: (kv[0][0], kv[1][0]["t"])):
            start = self.started.get(pid, samples[0]["t"])
            after = [s for s in samples if s["t"] >= start + warmup_s]
            row = {"node": node, "pid": pid, "from_min": round(samples[0]["t"] / 60, 1),
                   "to_min": round(samples[-1]["t"] / 60, 1), "samples": len(samples), "after_warmup": len(after)}
            for key in ("rss_mib", "heap_mib"):
                points = [(s["t"], s[key]) for s in after if s[key] is not None]
                if len(points) < 4:
                    row[key] = {"verdict": f"too few samples after warm-up ({len(points)})"}
                    continue
                times, values = [p[0] for p in points], [p[1] for p in points]
                fit = statistics.linear_regression(times, values)
                start, end = fit.intercept + fit.slope * times[0], fit.intercept + fit.slope * times[-1]
                change = (end - start) / start * 100 if start > 0 else 0.0
                row[key] = {"first": round(values[0], 1), "last": round(values[-1], 1), "fit_start": round(start, 1),
                            "fit_end": round(end, 1), "min": round(min(values), 1), "max": round(max(values), 1),
                            "change_pct": round(change, 1),
                            "verdict": "flat" if abs(change) <= 10 else ("grew" if change > 0 else "fell")}
            out.append(row)
        return out


# ---- the cluster's health ----------------------------------------------------------------------------------------

class Chaos:
    def __init__(self, cluster: NiFiCluster, sf: Standin, flow: Flow, rng: random.Random, sampler: Sampler,
                 paused: set, shards: int):
        self.cluster, self.sf, self.flow, self.rng, self.sampler = cluster, sf, flow, rng, sampler
        self.shards = shards  # the stream's shards at the start: reshard keeps between shards - 1 and shards + 2
        self.stopped_pids = paused  # SIGSTOPped, not yet SIGCONTed (shared with the sampler)
        self.events: list[dict] = []

    def client(self):
        return self.cluster.client()

    def heal(self, timeout: float = 300) -> None:
        """Every node running and CONNECTED, both processors RUNNING; raises ClusterError if not reachable."""
        for pid in list(self.stopped_pids):
            os.kill(pid, signal.SIGCONT)
            self.stopped_pids.discard(pid)
            log(f"heal: SIGCONT to PID {pid}")
        for n in self.cluster.nodes:
            if not n.is_alive():
                log(f"heal: node-{n.index} is not running: restart")
                self.cluster.restart(n, wait_connected=False)
                self.sampler.note_start(n.pid)
        try:
            self.cluster.wait_until_connected(timeout=timeout)
        except ClusterError as e:
            log(f"heal: not all CONNECTED ({e}); reconnecting the disconnected ones")
            for index, status in self.cluster.node_status().items():
                if status in ("DISCONNECTED", "OFFLOADED"):
                    self.cluster.reconnect(index, timeout=timeout)
            self.cluster.wait_until_connected(timeout=timeout)
        c = self.client()
        for name in ("consumer", "sink", "writer"):
            pid = self.flow.ids[name]
            if c.processor_state(pid) != "RUNNING":
                log(f"heal: {name} was {c.processor_state(pid)}: start it")
                c.start_processor(pid)

    def wait_taken(self, limit: float) -> tuple:
        """Called right after a node was killed or stopped: which engine went silent, which shards it held and when
        the last of them was taken over (seconds from the call; None if not within `limit` s).

        The engine is found by its heartbeat row, not by the PID in its owner id (lease_table.owner_pid), which
        names the JVM only while no engine ever takes over another's owner id (one did, for a while in issue 34:
        the first shake-down of this script saw node-2 read shards under node-1's old id). The owners whose
        heartbeat counter stood still for 4.5 s (a beat every 3 s at the default Failover Timeout), and still stands
        still at each later read, are the silent node's (the hour of 2026-12-07 counted a live engine that missed one
        beat on the loaded machine, and waited 60 s for shards nobody had to take over)."""
        t0 = time.monotonic()
        time.sleep(1)  # the node can no longer beat: this read is the baseline
        base = heartbeats(self.flow.app, self.flow.stream)
        history = []  # (seconds, {shard: owner})
        silent = None
        while time.monotonic() - t0 < limit:
            now = time.monotonic() - t0
            history.append((now, lease_owners(self.flow.app, self.flow.stream)))
            if now >= 5.5:
                # Still silent: an engine of a live node that missed a beat on a loaded machine (its heartbeat
                # moves again later) is not the silent node's, and its shards are not waited for.
                beats = heartbeats(self.flow.app, self.flow.stream)
                still = {o for o, n in base.items() if beats.get(o, n) <= n}
                silent = still if silent is None else silent & still
            if silent is not None and not any(o in silent for o in history[-1][1].values()):
                break
            time.sleep(0.5)
        if silent is None:
            return set(), [], None
        held = sorted(sh for sh, o in history[0][1].items() if o in silent)
        taken = next((t for t, owners in history if not any(o in silent for o in owners.values())), None)
        return silent, held, taken

    @staticmethod
    def taken_text(silent: set, held: list, taken) -> str:
        if not silent:
            return "no engine went silent (it held no heartbeat row?)"
        if not held:
            return f"its engine ({len(silent)} silent) held no shard"
        return f"its shards {held} " + (f"taken over {taken:.1f} s after" if taken is not None else "NOT taken over within 60 s")

    # ---- the faults ----

    def kill9(self) -> str:
        victim = self.cluster.node(self.rng.randint(1, len(self.cluster.nodes)))
        pid = victim.pid
        self.cluster.kill_9(victim)
        taken = self.taken_text(*self.wait_taken(60))
        t = self.cluster.restart(victim)
        self.sampler.note_start(victim.pid)
        return (f"node-{victim.index} (PID {pid}) killed; {taken}; "
                f"restarted as PID {victim.pid}, CONNECTED {t:.0f} s after the start")

    def sigstop(self) -> str:
        victim = self.cluster.node(self.rng.randint(1, len(self.cluster.nodes)))
        pid = victim.pid
        os.kill(pid, signal.SIGSTOP)
        self.stopped_pids.add(pid)
        t0 = time.monotonic()
        taken = self.taken_text(*self.wait_taken(60))
        extra = self.rng.uniform(0, 20)
        time.sleep(max(0.0, FAILOVER_TIMEOUT_S + 3 - (time.monotonic() - t0)) + extra)
        stopped_for = time.monotonic() - t0
        os.kill(pid, signal.SIGCONT)
        self.stopped_pids.discard(pid)
        try:
            status = self.cluster.node_status().get(victim.index)
        except ClusterError:
            status = "unknown (no node answered)"
        t1 = time.monotonic()
        try:
            self.cluster.wait_until_connected(timeout=180)
            back = f"CONNECTED {time.monotonic() - t1:.0f} s after SIGCONT (status at SIGCONT: {status})"
        except ClusterError:
            self.cluster.reconnect(victim, timeout=180)
            back = f"not back by itself in 180 s (status at SIGCONT: {status}): reconnected"
        return f"node-{victim.index} (PID {pid}) stopped {stopped_for:.1f} s; {taken}; {back}"

    def stop_start(self, name: str) -> str:
        pid = self.flow.ids[name]
        c = self.client()
        t0 = time.monotonic()
        c.stop_processor(pid, timeout=180)
        stopping = time.monotonic() - t0
        pause = self.rng.uniform(10, 45)
        time.sleep(pause)
        self.client().start_processor(pid)
        label = "ConsumeKinesis" if name == "consumer" else "PutSnowflake"
        return f"{label} stopped (stop took {stopping:.1f} s), {pause:.0f} s later started"

    def consumer(self) -> str:
        return self.stop_start("consumer")

    def sink(self) -> str:
        return self.stop_start("sink")

    def standin_http(self) -> str:
        kind = self.rng.choice(["backpressure429", "memory_threshold429", "backpressure503", "retry_request",
                                "pipe_failover", "invalid_client", "no_route404"])
        # What makes a client recreate itself comes rarely; back-pressure in bursts.
        recreate = kind in ("pipe_failover", "invalid_client", "no_route404")
        count = self.rng.randint(1, 5) if recreate else self.rng.randint(20, 100)
        fault = self.sf.fault({"kind": kind, "count": count, "on": "append"})
        time.sleep(30)
        fired = next((f["fired"] for f in self.sf.admin("GET", "/admin/faults").get("faults", [])
                      if isinstance(f, dict) and f.get("id") == fault["id"]), None)
        try:
            self.sf.admin("DELETE", f"/admin/faults/{fault['id']}")
        except urllib.error.HTTPError:
            pass  # used up and gone already
        fired = count if fired is None else fired
        return f"{kind} on {count} appends: {fired} answered with it in 30 s"

    def slow_commits(self) -> str:
        hold = self.rng.uniform(30, 90)
        if self.rng.random() < 0.5:
            lag = self.rng.randint(5000, 20000)
            self.sf.admin("POST", "/admin/settings", {"commit_lag_ms": lag})
            try:
                time.sleep(hold)
            finally:
                self.sf.admin("POST", "/admin/settings", {"commit_lag_ms": COMMIT_LAG_MS})
            return f"commit lag {lag} ms for {hold:.0f} s"
        fault = self.sf.fault({"kind": "withhold_commits", "count": -1})
        try:
            time.sleep(hold)
        finally:
            self.sf.admin("DELETE", f"/admin/faults/{fault['id']}")
        return f"commits withheld for {hold:.0f} s"

    def open_shards(self) -> list[dict]:
        shards, token = [], None
        while True:
            body = {"NextToken": token} if token else {"StreamName": self.flow.stream}
            answer = kinesis_call("ListShards", body)
            shards += answer["Shards"]
            token = answer.get("NextToken")
            if not token:
                break
        # kinesis-local answers "EndingSequenceNumber": null for an open shard
        return [s for s in shards if not s["SequenceNumberRange"].get("EndingSequenceNumber")]

    def reshard(self) -> str:
        wait_active(self.flow.stream, 60)
        shards = sorted(self.open_shards(), key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
        pairs = [(a, b) for a, b in zip(shards, shards[1:])
                 if int(a["HashKeyRange"]["EndingHashKey"]) + 1 == int(b["HashKeyRange"]["StartingHashKey"])]
        low, high = self.shards - 1, self.shards + 2
        split = len(shards) <= low or not pairs or (len(shards) < high and self.rng.random() < 0.5)
        if split:
            shard = self.rng.choice(shards)
            first, last = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
            kinesis_call("SplitShard", {"StreamName": self.flow.stream, "ShardToSplit": shard["ShardId"],
                                        "NewStartingHashKey": str((first + last) // 2)})
            what = f"split of {shard['ShardId']}"
        else:
            a, b = self.rng.choice(pairs)
            kinesis_call("MergeShards", {"StreamName": self.flow.stream, "ShardToMerge": a["ShardId"],
                                         "AdjacentShardToMerge": b["ShardId"]})
            what = f"merge of {a['ShardId']} and {b['ShardId']}"
        d = wait_active(self.flow.stream, 60)
        return f"{what}: {len(shards)} -> {len(self.open_shards())} open shards (stream {d['StreamStatus']})"

    def channels(self) -> list[str]:
        """The stand-in's channels of the flow's table (the shards' shared channels and any at-least-once ones)."""
        pipe = self.flow.table.split(".")[-1] + "-STREAMING"
        return sorted(ch["channel_name"] for ch in self.sf.admin("GET", "/admin/channels")["channels"]
                      if ch["pipe_name"].upper() == pipe.upper())

    def refuse_4xx(self) -> str:
        status = self.rng.choice([403, 400])
        spec = {"kind": "retry_request", "status": status, "code": REFUSED_CODE,
                "message": f"refused by bench/chaos.py (fault refuse_4xx, HTTP {status})"}
        loop = self.flow.ids["failure_loop"]
        if self.rng.random() < 0.5:
            hold, where = self.rng.uniform(5, 20), "every append on every channel"
            faults = [self.sf.fault({**spec, "count": -1})]
        else:
            channels = self.channels()
            if not channels:
                raise RuntimeError("the table has no channel yet")
            chosen = self.rng.sample(channels, min(len(channels), self.rng.randint(1, 3)))
            count = self.rng.randint(1, 5)
            hold = 30.0
            where = f"the next {count} appends of {len(chosen)} channel(s) ({', '.join(c.rsplit('_', 1)[-1] for c in chosen)})"
            faults = [self.sf.fault({**spec, "count": count, "channel": ch}) for ch in chosen]
        fired = {f["id"]: 0 for f in faults}  # refusals so far (a counted fault used up leaves the list: its count)
        looped = 0
        end = time.monotonic() + hold
        try:
            while True:
                listed = {f["id"]: f["fired"] for f in self.sf.admin("GET", "/admin/faults").get("faults", [])
                          if isinstance(f, dict) and f.get("id") in fired}
                for f in faults:
                    fired[f["id"]] = listed.get(f["id"], f["remaining"] if f["remaining"] is not None else fired[f["id"]])
                try:
                    looped = max(looped, sum(self.cluster.queued(loop).values()))
                except (NiFiApiError, ClusterError):
                    pass
                if time.monotonic() >= end or not listed:
                    break
                time.sleep(1)
        finally:
            for i in fired:
                try:
                    self.sf.admin("DELETE", f"/admin/faults/{i}")
                except urllib.error.HTTPError:
                    pass  # used up and gone already
        return (f"HTTP {status} on {where} for up to {hold:.0f} s: {sum(fired.values())} appends refused; at most "
                f"{looped} FlowFiles seen on the failure loop")

    def fire(self, kind: str) -> None:
        t = time.monotonic() - T0
        log(f"FAULT {kind}: start")
        event = {"t_min": round(t / 60, 2), "utc": time.strftime("%H:%M:%S", time.gmtime()), "kind": kind}
        t0 = time.monotonic()
        try:
            event["detail"] = getattr(self, kind)()
            event["ok"] = True
        except (Interrupted, KeyboardInterrupt):
            raise
        except Exception as e:
            event["detail"] = f"FAILED: {type(e).__name__}: {str(e)[:500]}"
            event["ok"] = False
        event["seconds"] = round(time.monotonic() - t0, 1)
        self.events.append(event)
        log(f"FAULT {kind}: {event['detail']} ({event['seconds']} s)")
        if not event["ok"]:
            try:
                self.heal()
            except ClusterError as e:  # the next heal before a fault tries again, and gives up
                log(f"heal after the failed fault: {e}")


# ---- the end -----------------------------------------------------------------------------------------------------

def loaded_ids(sf: Standin, table: str) -> list[int]:
    return [r["ID"] for r in sf.query(f"SELECT ID FROM {table}")]


def drain(sf: Standin, table: str, want: set, want_routed: set, parse_failure_dir: str, timeout: float) -> float:
    """Until every id in `want` is in the table and every id in `want_routed` in a parse.failure file (at most
    `timeout` s); returns the seconds waited."""
    t0 = time.monotonic()
    last_log = 0.0
    while time.monotonic() - t0 < timeout:
        n = sf.query(f"SELECT COUNT(DISTINCT ID) AS D FROM {table}")[0]["D"]
        routed = want_routed & set(routed_malformed(parse_failure_dir))
        if n >= len(want) and not (want - set(loaded_ids(sf, table))) and routed == want_routed:
            break
        if time.monotonic() - last_log > 30:
            log(f"drain: {n} distinct of {len(want)} loaded, {len(routed)} of {len(want_routed)} malformed routed")
            last_log = time.monotonic()
        time.sleep(2)
    return time.monotonic() - t0


def lease_census(app: str, stream: str) -> dict:
    rows = lease_rows(app, stream)
    out = collections.Counter()
    for r in rows:
        key = r["shardId"]["S"]
        kind = "heartbeat" if key.startswith(NODE_ROW_PREFIX) else ("other" if key.startswith("__") else "shard")
        out[f"{kind}_{'tombstone' if 'removedAt' in r else 'live'}"] += 1
    out["rows"] = len(rows)
    owners = {r["leaseOwner"]["S"] for r in rows if "leaseOwner" in r and "removedAt" not in r}
    out["lease_owners"] = len(owners)
    out["shard_rows_ended"] = sum(1 for r in rows if r.get("shardEnd", {}).get("BOOL") is True and "removedAt" not in r)
    return dict(out)


def log_lines(cluster: NiFiCluster) -> dict:
    out = {}
    for n in cluster.nodes:
        events = n.log_errors("io.kinesnow", levels=("ERROR", "WARN"))
        by_msg = collections.Counter(f"{e['level']} {e['logger'].rsplit('.', 1)[-1]}: {e['message'][:160]}" for e in events)
        out[n.index] = {"ERROR": sum(1 for e in events if e["level"] == "ERROR"),
                        "WARN": sum(1 for e in events if e["level"] == "WARN"), "top": by_msg.most_common(6)}
    return out


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def report(args, flow: Flow, sf: Standin, producer: SteadyProducer, chaos: Chaos, sampler: Sampler,
           drained_s: float, leases: dict, queues: dict, logs: dict, denied: dict, warmup_s: float) -> int:
    table = flow.table
    confirmed_all, unconfirmed = producer.confirmed(), producer.unconfirmed()
    confirmed, malformed = producer.split(confirmed_all)
    ids = loaded_ids(sf, table)
    distinct = set(ids)
    lost = confirmed - distinct
    duplicates = len(ids) - len(distinct)
    extra = distinct - confirmed
    routed = routed_malformed(args.parse_failure_dir)
    routed_ids = {i for i in routed if i is not None}
    malformed_lost = malformed - routed_ids
    malformed_copies = sum(n - 1 for i, n in routed.items() if i is not None)
    routed_unknown = sum(n for i, n in routed.items() if i is None or not producer.producer.is_malformed(i))
    rate = producer.rate_reached()
    errors = sf.query(f"SELECT COUNT(*) AS N FROM ERROR_TABLE({table})")[0]["N"]
    fired = collections.Counter(e["kind"] for e in chaos.events)
    failed = collections.Counter(e["kind"] for e in chaos.events if not e["ok"])
    flat = sampler.flatness(warmup_s)

    print("\n## Faults\n")
    print("| # | minute | UTC | fault | seconds | what happened |")
    print("|---|---:|---|---|---:|---|")
    for i, e in enumerate(chaos.events, 1):
        print(f"| {i} | {e['t_min']:.1f} | {e['utc']} | {e['kind']} | {e['seconds']} | {e['detail']} |")

    print("\n## Memory samples (every minute; RSS / used heap, MiB)\n")
    nodes = sorted({s["node"] for s in sampler.samples})
    print("| minute | " + " | ".join(f"node-{n}" for n in nodes) + " |")
    print("|---:|" + "---|" * len(nodes))
    by_t = collections.defaultdict(dict)
    for s in sampler.samples:
        by_t[int(s["t"] // 60)][s["node"]] = s
    for m in sorted(by_t):
        cells = []
        for n in nodes:
            s = by_t[m].get(n)
            cells.append("-" if s is None or s["pid"] is None else f"{fmt(s['rss_mib'], 0)} / {fmt(s['heap_mib'], 0)}")
        print(f"| {m} | " + " | ".join(cells) + " |")

    print(f"\n## Flat after warm-up? (warm-up: the first {warmup_s / 60:.1f} min of each JVM; the change of a "
          "least-squares line through the samples after it, first to last sample, within 10 %)\n")
    print("| node | PID | sampled (min) | samples after warm-up | RSS MiB: line start -> end (min-max) | RSS | "
          "heap MiB: line start -> end (min-max) | heap |")
    print("|---|---|---|---:|---|---|---|---|")
    for r in flat:
        cells = []
        for key in ("rss_mib", "heap_mib"):
            v = r[key]
            if "fit_start" in v:
                cells += [f"{v['fit_start']:.0f} -> {v['fit_end']:.0f} ({v['min']:.0f}-{v['max']:.0f})",
                          f"{v['verdict']} ({v['change_pct']:+.1f} %)"]
            else:
                cells += ["-", v["verdict"]]
        print(f"| node-{r['node']} | {r['pid']} | {r['from_min']}-{r['to_min']} | {r['after_warmup']} | " + " | ".join(cells) + " |")

    print("\n## Log lines of io.kinesnow (ERROR / WARN) per node\n")
    for n, v in logs.items():
        print(f"- node-{n}: {v['ERROR']} ERROR, {v['WARN']} WARN" + "".join(f"\n    - {c}x {m}" for m, c in v["top"]))

    print("\n## Summary\n")
    rows = [
        ("run", f"{args.minutes} min, a fault every {args.fault_every} s, {args.rate} records/s, seed {args.seed}, "
                f"3-node cluster, {args.shards}-shard stream, SNOWFLAKE_COMMIT, commit lag {args.commit_lag_ms} ms, "
                f"every {args.malformed_every}th record malformed"),
        ("faults fired", ", ".join(f"{k} {fired[k]}" + (f" ({failed[k]} failed)" if failed[k] else "") for k in FAULTS)),
        ("producer's rate reached (records confirmed / s; slowest minute)",
         f"{fmt(rate['per_s'])} over {rate['seconds']:.0f} s; {fmt(rate['slowest_minute_per_s'])}"),
        ("good records put (PutRecords confirmed)", len(confirmed)),
        ("records put per shard (PutRecords' answer)", ", ".join(
            f"{shard.rsplit('-', 1)[-1].lstrip('0') or '0'}: {n}" for shard, n in sorted(collections.Counter(
                r["shardId"] for r in producer.producer.expected.values()).items()))),
        ("PutRecords failures (records unconfirmed; of them in the table)",
         f"{producer.errors} ({len(unconfirmed)} records; {len(unconfirmed & distinct)} in the table)"),
        ("drain after the producer stopped", f"{drained_s:.0f} s"),
        ("rows in the table", len(ids)),
        ("distinct ids in the table", len(distinct)),
        ("**losses** (confirmed, not in the table)", f"**{len(lost)}**" + (f" e.g. {sorted(lost)[:10]}" if lost else "")),
        ("**duplicates** (rows - distinct)", f"**{duplicates}**"),
        ("ids in the table never put", len(extra - unconfirmed)),
        ("malformed records put (PutRecords confirmed)", len(malformed)),
        ("**malformed records in no parse.failure file** (lost)",
         f"**{len(malformed_lost)}**" + (f" e.g. {sorted(malformed_lost)[:10]}" if malformed_lost else "")),
        ("malformed records' copies beyond one in parse.failure files (routed again after a re-read)", malformed_copies),
        ("parse.failure files that are no malformed record put", routed_unknown),
        ("error-table rows", errors),
        ("NiFi queues at the end", json.dumps(queues)),
        ("lease table", ", ".join(f"{k} {v}" for k, v in sorted(leases.items()))),
        ("IAM proxy denials", json.dumps(denied) if denied else "0"),
        ("RSS flat after warm-up", ", ".join(f"node-{r['node']}/{r['pid']}: {r['rss_mib']['verdict']}" for r in flat)),
        ("heap flat after warm-up", ", ".join(f"node-{r['node']}/{r['pid']}: {r['heap_mib']['verdict']}" for r in flat)),
    ]
    print("| measure | value |")
    print("|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    result = {"args": vars(args), "faults": chaos.events, "samples": sampler.samples, "flatness": flat,
              "confirmed": len(confirmed), "unconfirmed": len(unconfirmed), "rows": len(ids), "distinct": len(distinct),
              "lost": len(lost), "lost_ids": sorted(lost)[:100], "duplicates": duplicates, "error_rows": errors,
              "rate": rate, "malformed": len(malformed), "malformed_lost": len(malformed_lost),
              "malformed_lost_ids": sorted(malformed_lost)[:100], "malformed_copies": malformed_copies,
              "routed_unknown": routed_unknown,
              "queues": queues, "leases": leases, "denied": denied, "logs": logs, "drain_s": drained_s}
    path = os.path.join(REPO, "bench", ".work", f"chaos-{args.run}", "result.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=str)
    print(f"\n(raw figures: {path})")
    if args.record_summary:
        import summary
        head = summary.head_commit()
        summary.record(args.record_summary, {
            "records": (len(confirmed), "good records put, each in the table once"),
            "malformed": (len(malformed), "malformed records put, each in a parse.failure file"),
            "malformed_lost": (len(malformed_lost), "malformed records in no parse.failure file"),
            "put_per_s": (round(rate["per_s"] or 0),
                          "records put per second of the producer's run (good and malformed, PutRecords confirmed)"),
            "shards": (args.shards, "shards of the stream at the start"),
            "lost": (len(lost), "records lost"),
            "twice": (duplicates, "records loaded twice"),
            "faults": (len(chaos.events), "faults fired"),
            "minutes": (args.minutes, "minutes of faults and production"),
            "nar_commit": (head, "the commit the NAR under test was built from (this tree's HEAD)"),
            "nodes": (len(chaos.cluster.nodes), "NiFi nodes in the cluster"),
        }, "bench/chaos.sh " + " ".join(sys.argv[1:]), section="An hour of faults: `bench/chaos.sh`", commit=head)
    return 0 if not lost and duplicates == 0 and not malformed_lost else 1


def nar_of_this_tree() -> None:
    """The summary names the NAR by this tree's HEAD: exits unless the NAR was built after HEAD's commit from a tree
    without uncommitted changes to tracked files."""
    import subprocess
    from consumer_flow import built_nar, nar_root

    def git(*a):
        return subprocess.run(["git", "-C", REPO, *a], capture_output=True, text=True).stdout.strip()
    committed = int(git("log", "-1", "--format=%ct") or 0)
    problem = ("the NAR is not this tree's (KINESNOW_BENCH_NAR_ROOT)" if os.path.abspath(nar_root()) != REPO
               else "the tree has uncommitted changes" if git("status", "--porcelain", "--untracked-files=no")
               else "the NAR was built before HEAD's commit" if os.path.getmtime(built_nar()) < committed else "")
    if problem:
        sys.exit(f"--record-summary names the NAR by HEAD, but {problem}: ./mvnw package first")


def main() -> int:
    global COMMIT_LAG_MS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60, help="minutes of faults and production")
    parser.add_argument("--fault-every", type=float, default=180, help="seconds from one fault's start to the next's")
    parser.add_argument("--rate", type=int, default=500, help="records per second (issue 51: at least 500 over 8 shards)")
    parser.add_argument("--shards", type=int, default=8, help="shards of the stream at the start")
    parser.add_argument("--malformed-every", type=int, default=200,
                        help="every N-th record id is a malformed record (0: none)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fault choice (default: the time)")
    parser.add_argument("--warmup", type=float, default=None, help="minutes of warm-up per JVM (default: min(10, minutes/3))")
    parser.add_argument("--drain", type=float, default=600, help="seconds at most for the last records to load")
    parser.add_argument("--record-summary", metavar="PREFIX",
                        help="also write the run's counts into bench/results/summary.json under PREFIX. (chaos.hour is "
                             "what the README quotes; bench/summary.py)")
    parser.add_argument("--commit-lag-ms", default=SNOWFLAKE_LIKE_COMMIT_LAG,
                        help="the stand-in's commit lag: fixed (300) or a range drawn from per append (default: "
                             f"{SNOWFLAKE_LIKE_COMMIT_LAG}, as Snowflake commits)")
    args = parser.parse_args()
    COMMIT_LAG_MS = args.commit_lag_ms
    if args.record_summary:
        nar_of_this_tree()  # before an hour is spent
    args.run = str(int(time.time()))
    args.seed = int(args.run) if args.seed is None else args.seed
    warmup_s = 60 * (args.warmup if args.warmup is not None else min(10.0, args.minutes / 3))
    rng = random.Random(args.seed)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    log(f"chaos run {args.run}: {args.minutes} min, a fault every {args.fault_every} s, {args.rate} records/s over "
        f"{args.shards} shards, every {args.malformed_every}th record malformed, seed {args.seed}, warm-up "
        f"{warmup_s / 60:.1f} min, commit lag {COMMIT_LAG_MS} ms")

    work = os.path.join(REPO, "bench", ".work", f"chaos-{args.run}")
    os.makedirs(work, exist_ok=True)
    args.parse_failure_dir = os.path.join(work, "parse-failure")
    services = sf = cluster = flow = producer = sampler = None
    chaos = None
    try:
        services = ensure_services()
        _, public_key = make_key_pair(os.path.join(work, "snowflake"))
        sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=COMMIT_LAG_MS)
        sf.register_user(ACCOUNT, USER, public_key)
        log("starting a 3-node NiFi cluster")
        cluster = NiFiCluster.start(3, extensions=[nar(), standard_nar()], name="bench-chaos")
        log(f"cluster up in {cluster.up_seconds:.0f} s: PIDs {[n.pid for n in cluster.nodes]}, HTTP ports "
            f"{[n.http_port for n in cluster.nodes]}")
        wait_processor_types(cluster)
        flow = Flow(cluster, sf, work, "SNOWFLAKE_COMMIT", args.run, shards=args.shards)
        flow.producer = ChaosProducer(flow.stream, args.malformed_every)
        rewire(cluster, flow, args.parse_failure_dir)
        log(f"stream {flow.stream} ({args.shards} shards), Application Name {flow.app}, table {flow.table}")
        c = cluster.client(1)
        c.start_processor(flow.ids["consumer"])
        c.start_processor(flow.ids["sink"])
        paused: set = set()  # PIDs SIGSTOPped and not yet SIGCONTed
        sampler = Sampler(cluster, paused)
        for n in cluster.nodes:
            sampler.note_start(n.pid)
        sampler.thread.start()
        producer = SteadyProducer(flow.producer, args.rate)

        def progress():
            producer.note_minute()
            d = sf.query(f"SELECT COUNT(*) AS N, COUNT(DISTINCT ID) AS D FROM {flow.table}")[0]
            minutes = producer.per_minute[-2:]
            recent = ((minutes[1][1] - minutes[0][1]) / (minutes[1][0] - minutes[0][0])
                      if len(minutes) == 2 and minutes[1][0] > minutes[0][0] else None)
            log(f"progress: {producer.producer.count()} put ({fmt(recent, 0)}/s in the last minute), {d['D']} "
                f"distinct loaded, {d['N'] - d['D']} duplicate rows so far, "
                f"{sum(routed_malformed(args.parse_failure_dir).values())} parse.failure files, "
                f"{producer.errors} PutRecords failures")
        sampler.progress = progress
        producer.thread.start()
        chaos = Chaos(cluster, sf, flow, rng, sampler, paused, args.shards)
        deck: list[str] = []
        end = time.monotonic() + args.minutes * 60
        next_fault = time.monotonic() + args.fault_every
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_fault:
                try:
                    chaos.heal()
                except (ClusterError, NiFiApiError) as e:
                    log(f"the cluster did not heal ({e}): once more, then give up")
                    chaos.heal()
                if not deck:
                    deck = list(FAULTS)
                    rng.shuffle(deck)
                chaos.fire(deck.pop())
                next_fault = max(next_fault + args.fault_every, time.monotonic() + 30)
            time.sleep(1)

        log("time is up: the producer stops")
        producer.stop.set()
        producer.thread.join(timeout=60)
        sf.clear_faults()
        sf.admin("POST", "/admin/settings", {"commit_lag_ms": COMMIT_LAG_MS})
        try:
            chaos.heal()
        except (ClusterError, NiFiApiError) as e:  # count what there is all the same
            log(f"the cluster did not heal before the drain: {e}")
        want, want_routed = producer.split(producer.confirmed())
        log(f"draining: {len(want)} good and {len(want_routed)} malformed records put (at most {args.drain:.0f} s)")
        drained = drain(sf, flow.table, want, want_routed, args.parse_failure_dir, args.drain)
        time.sleep(10)  # anything still in flight shows as a duplicate
        sampler.stop.set()
        sampler.sample()
        queues = {}
        for name in ("records_queue", "failure_loop", "invalid_queue", "parse_failure_queue", "writer_failure_loop"):
            try:
                queues[name] = sum(cluster.queued(flow.ids[name]).values())
            except (NiFiApiError, ClusterError) as e:
                queues[name] = f"? ({e})"
        leases = lease_census(flow.app, flow.stream)
        denied = iam_proxy.stats(flow.proxy).get("denied", {})
        return report(args, flow, sf, producer, chaos, sampler, drained, leases, queues, log_lines(cluster), denied, warmup_s)
    except (Interrupted, KeyboardInterrupt) as e:
        log(f"interrupted ({e}): cleaning up")
        return 130
    except Exception as e:
        log(f"the run failed: {type(e).__name__}: {e}")
        import traceback
        traceback.print_exc()
        return 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the clean-up runs to its end
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for part in (producer, sampler):
            if part is not None:
                part.stop.set()
        steps = []
        if chaos is not None:
            steps.append(("SIGCONT", lambda: [os.kill(p, signal.SIGCONT) for p in chaos.stopped_pids]))
        if cluster is not None:
            steps.append(("stop the cluster", cluster.stop_all))
        if sf is not None:
            steps.append(("stop the stand-in", sf.stop))
        if flow is not None:
            steps.append(("delete the stream", lambda: kinesis_call("DeleteStream", {"StreamName": flow.stream})))
            steps.append(("delete the lease table", lambda: dynamodb_call("DeleteTable", {"TableName": flow.app})))
        steps.append(("stop the IAM proxies", iam_proxy.stop_all))
        if services is not None:
            steps.append(("stop the emulators (if started here)", services.stop_if_started))
        for what, step in steps:
            try:
                step()
            except (AwsJsonError, Exception) as e:  # keep cleaning up
                log(f"clean-up: {what} failed: {e}")
        log("cleaned up")


if __name__ == "__main__":
    sys.exit(main())
