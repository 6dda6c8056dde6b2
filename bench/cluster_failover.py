"""Failover in a real 3-node NiFi cluster (issue 17): ConsumeKinesis -> PutSnowflake -> the Snowflake
stand-in, on two 4-shard streams side by side in one cluster and one run, one flow per Failover Position:

- SNOWFLAKE_COMMIT: PutSnowflake tells ConsumeKinesis what Snowflake committed, the lease rows keep it
  (`loadedSequenceNumber`), every node writes a shard's rows into one shared channel;
- NIFI_COMMIT: the lease rows keep NiFi's checkpoint only, and each node has its own channels (what the
  product did before issue 17, and what it still does for flows that do not go to PutSnowflake).

A producer writes both streams at the same steady rate throughout (plain records and KPL aggregates).
Per round, the node holding the most shards of the SNOWFLAKE_COMMIT flow is killed with SIGKILL, the
records are let settle, the node is restarted. Measured per flow:

- lease-table writes per shard per second at steady state before the first kill (every UpdateItem,
  PutItem and DeleteItem the policy proxy in front of dynalite let through, heartbeat rows included,
  divided by the shard count and the window);
- failover time: kill to the dead node's leases all taken by others, and kill to the first row in the
  table of a record put after the kill to one of the dead node's shards (only a new owner can load
  it); first shard and last shard;
- records read again per failover: for each of the dead node's shards, the records from where the
  new owner resumes (read from the lease rows right after the kill: the loaded position when it is
  behind the checkpoint, for SNOWFLAKE_COMMIT; the checkpoint for NIFI_COMMIT) to the last record put
  before the kill. The SNOWFLAKE_COMMIT rows also give the checkpoint rule's figure for the same moment.
  The dead node had read all but its last poll's worth of those, so this is an upper bound of re-reads;
- records put before the kill and still not in the table a minute later, before the dead node restarts: with
  NIFI_COMMIT the records NiFi had committed on the dead node wait in its queue until it returns;
- duplicates and losses in each table once everything is loaded, after the last round.

    bench/cluster-failover.sh [--rounds 3] [--rate 100] [--steady 60]

Prints a Markdown table for BENCHMARKS.md and the raw figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import iam_proxy  # noqa: E402
from lease_table import lease_owners, lease_rows, leases_by_node  # noqa: E402
from nifi_cluster import NiFiCluster  # noqa: E402
from services import AwsJsonError, dynamodb_call, ensure_services, kinesis_call  # noqa: E402
from standin import Standin, make_key_pair  # noqa: E402
from test_acceptance import ACCOUNT, DB, USER, Producer, create_table, flow, nar, wait_active  # noqa: E402

SHARDS = 4
MODES = ("SNOWFLAKE_COMMIT", "NIFI_COMMIT")
WRITES = ("dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem")


class Flow:
    """One Failover Position's stream, table, flow and producer."""

    def __init__(self, cluster: NiFiCluster, sf: Standin, work: str, mode: str, run: str, shards: int = SHARDS):
        self.mode, self.sf = mode, sf
        tag = mode.split("_")[0].lower()
        self.stream, self.app, self.table = f"bench-fo-{tag}-{run}", f"bench-fo-{tag}-{run}-app", f"{DB}.BENCH_FO_{tag.upper()}_{run}"
        kinesis_call("CreateStream", {"StreamName": self.stream, "ShardCount": shards})
        wait_active(self.stream)
        create_table(sf, self.table, evolution=True)
        c = cluster.client(1)
        self.ids = flow.apply(c, "local", {"KINESNOW_WORK": work, "SNOWFLAKE_URL": sf.url}, f"bench {mode}",
                              context_suffix=f" [{mode}]")
        self.proxy = iam_proxy.proxy_for(self.stream, self.app)
        c.update_parameters(self.ids["source_context"], {
            "AWS Kinesis Stream Name": self.stream, "AWS Kinesis Application Name": self.app,
            "AWS Kinesis Endpoint Override URL": self.proxy, "AWS DynamoDB Endpoint Override URL": self.proxy})
        c.update_parameters(self.ids["destination_context"], {"Snowflake Destination Table": self.table.split(".")[-1],
                                                              "Schema Evolution Enabled": "true"})
        c.update_processor(self.ids["consumer"], properties={"Failover Position": mode})
        for pid in (self.ids["consumer"], self.ids["sink"]):
            v = c.processor_validation(pid)
            assert v["status"] == "VALID", v
        self.producer = Producer(self.stream)

    def ids_loaded(self, at_least: int = 0) -> list[int]:
        return [r["ID"] for r in self.sf.query(f"SELECT ID FROM {self.table} WHERE ID >= {at_least}")]

    def put_so_far(self) -> set:
        with self.producer.lock:
            return set(self.producer.expected)

    def produce(self, rate: int, stop: threading.Event) -> threading.Thread:
        """Records at about `rate` per second (chunks of 25) until `stop` is set."""
        def run():
            while not stop.is_set():
                t = time.monotonic()
                self.producer.put(25, phase=1)
                time.sleep(max(0.0, 25 / rate - (time.monotonic() - t)))
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def lease_writes(self) -> int:
        allowed = iam_proxy.stats(self.proxy)["allowed"]
        return sum(allowed.get(a, 0) for a in WRITES)

    def missing_before(self, cut: int, timeout: float) -> set:
        """Records put before id `cut` still not in the table after up to `timeout` seconds."""
        want = {i for i in self.put_so_far() if i < cut}
        deadline = time.monotonic() + timeout
        while (missing := want - set(self.ids_loaded())) and time.monotonic() < deadline:
            time.sleep(1)
        return missing

    def settle(self, timeout: float) -> dict:
        """Until every record put so far is loaded; then duplicates and losses."""
        want = self.put_so_far()
        deadline = time.monotonic() + timeout
        while not want <= set(self.ids_loaded()) and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(3)  # anything still in flight shows as a duplicate
        ids = self.ids_loaded()
        return {"rows": len(ids), "records": len(want), "duplicates": len(ids) - len(set(ids)), "lost": len(want - set(ids))}


def position(seq: str, sub) -> tuple:
    return int(seq), None if sub is None else int(sub)


def covered(record: dict, at: tuple) -> bool:
    """The record is at or before position `at` (a checkpoint without a sub-sequence covers the whole aggregate)."""
    seq, sub = int(record["sequenceNumber"]), record["subSequenceNumber"] or 0
    return seq < at[0] or (seq == at[0] and (at[1] is None or sub <= at[1]))


def resume_points(app: str, stream: str, shards: list[str]) -> dict:
    """shard -> {"checkpoint": position or None, "loaded": position, "TRIM_HORIZON" or None} from the lease rows."""
    out = {}
    for row in lease_rows(app, stream):
        shard = row["shardId"]["S"]
        if shard not in shards:
            continue
        n = lambda name: row.get(name, {}).get("N")  # noqa: E731
        s = lambda name: row.get(name, {}).get("S")  # noqa: E731
        checkpoint = s("sequenceNumber")
        loaded = s("loadedSequenceNumber")
        out[shard] = {
            "checkpoint": position(checkpoint, n("subSequenceNumber")) if checkpoint and checkpoint.isdigit() else None,
            "loaded": "TRIM_HORIZON" if loaded == "TRIM_HORIZON" else (position(loaded, n("loadedSubSequenceNumber")) if loaded else None),
        }
    return out


def reread(producer: Producer, shard: str, after, before_id: int) -> int:
    """Records of `shard` put before id `before_id` that lie after `after` (None: from the shard's start)."""
    with producer.lock:
        records = [r for i, r in producer.expected.items() if i < before_id and r["shardId"] == shard]
    return sum(1 for r in records if after is None or not covered(r, after))


def failover_round(cluster: NiFiCluster, flows: dict, number: int) -> dict:
    tracked = flows["SNOWFLAKE_COMMIT"]
    by_node = leases_by_node(cluster, tracked.app, tracked.stream)
    victim = max((n for n in by_node if n is not None), key=lambda n: len(by_node[n]))
    victim_pid = cluster.node(victim).pid
    shards = {m: [s for s, o in lease_owners(f.app, f.stream).items() if o and int(o.split("-")[2], 16) == victim_pid]
              for m, f in flows.items()}
    cut = {m: f.producer.next_id for m, f in flows.items()}
    t0 = time.monotonic()
    cluster.kill_9(victim)
    killed_at = time.monotonic()
    points = {m: resume_points(f.app, f.stream, shards[m]) for m, f in flows.items()}
    taken, first_row = {m: None for m in flows}, {m: {} for m in flows}
    deadline = killed_at + 180
    while time.monotonic() < deadline:
        now = time.monotonic() - t0
        for m, f in flows.items():
            if taken[m] is None:
                owners = lease_owners(f.app, f.stream)
                if all(owners.get(s) and int(owners[s].split("-")[2], 16) != victim_pid for s in shards[m]):
                    taken[m] = now
            for i in f.ids_loaded(cut[m]):
                shard = f.producer.expected.get(i, {}).get("shardId")
                if shard in shards[m] and shard not in first_row[m]:
                    first_row[m][shard] = now
        # a shard no record was put to after the kill has no first row to wait for
        wanted = {m: {f.producer.expected[i]["shardId"] for i in f.put_so_far() if i >= cut[m]} & set(shards[m])
                  for m, f in flows.items()}
        if all(taken[m] is not None and wanted[m] <= set(first_row[m]) for m in flows):
            break
        time.sleep(0.25)
    out = {"victim": victim, "shards": shards}
    for m, f in flows.items():
        rows = first_row[m].values()
        checkpoint_rule = sum(reread(f.producer, s, p["checkpoint"], cut[m]) for s, p in points[m].items())
        loaded_rule = None
        if m == "SNOWFLAKE_COMMIT":
            loaded_rule = 0
            for s, p in points[m].items():
                loaded, cp = p["loaded"], p["checkpoint"]
                if loaded == "TRIM_HORIZON":
                    after = None
                elif loaded is None or (cp is not None and cp < loaded):
                    after = cp
                else:
                    after = loaded
                loaded_rule += reread(f.producer, s, after, cut[m])
        out[m] = {"taken_s": taken[m], "first_row_s": min(rows) if rows else None, "last_shard_row_s": max(rows) if rows else None,
                  "reread_checkpoint_rule": checkpoint_rule, "reread_loaded_rule": loaded_rule, "points": {
                      s: {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()} for s, p in points[m].items()}}
    for m, f in flows.items():
        out[m]["waiting_for_the_dead_node"] = len(f.missing_before(cut[m], 60))
    cluster.restart(victim)
    cluster.wait_until_connected()
    for m, f in flows.items():
        out[m].update(f.settle(240))
    print(f"round {number}: {json.dumps(out)}", flush=True)
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=50, help="records per second into each stream")
    parser.add_argument("--steady", type=int, default=60, help="seconds of the lease-write window")
    args = parser.parse_args()
    run = str(int(time.time()))
    services = ensure_services()
    work = os.path.join(REPO, "bench", ".work", f"failover-{run}")
    os.makedirs(work, exist_ok=True)
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300)
    cluster = None
    flows: dict[str, Flow] = {}
    try:
        sf.register_user(ACCOUNT, USER, public_key)
        cluster = NiFiCluster.start(3, extensions=[nar()], name="bench-failover")
        flows = {m: Flow(cluster, sf, work, m, run) for m in MODES}
        c = cluster.client(1)
        for f in flows.values():
            c.start_processor(f.ids["consumer"])
            c.start_processor(f.ids["sink"])
        stop = threading.Event()
        threads = [f.produce(args.rate, stop) for f in flows.values()]
        time.sleep(30)  # leases spread, first loads done
        before = {m: f.lease_writes() for m, f in flows.items()}
        time.sleep(args.steady)
        writes = {m: (f.lease_writes() - before[m]) / SHARDS / args.steady for m, f in flows.items()}
        print(f"lease-table writes per shard per second: {json.dumps(writes)}", flush=True)
        rounds = [failover_round(cluster, flows, n + 1) for n in range(args.rounds)]
        stop.set()
        for t in threads:
            t.join(timeout=30)
        final = {m: f.settle(240) for m, f in flows.items()}
        print(f"final: {json.dumps(final)}", flush=True)
        print("\n| Failover Position | lease writes / shard / s | kill to leases taken (s) | kill to first new row (s), first / last shard | records read again per failover: loaded rule / checkpoint rule | records put before the kill that wait for the dead node's return | duplicates after all rounds | lost |")
        print("|---|---|---|---|---|---|---|---|")
        for m in MODES:
            r = [x[m] for x in rounds]
            rule = f"{fmt(median([x['reread_loaded_rule'] for x in r]), 0)} / {fmt(median([x['reread_checkpoint_rule'] for x in r]), 0)}" \
                if m == "SNOWFLAKE_COMMIT" else f"- / {fmt(median([x['reread_checkpoint_rule'] for x in r]), 0)}"
            print(f"| {m} | {fmt(writes[m], 2)} | {fmt(median([x['taken_s'] for x in r]))} | "
                  f"{fmt(median([x['first_row_s'] for x in r]))} / {fmt(median([x['last_shard_row_s'] for x in r]))} | {rule} | "
                  f"{', '.join(str(x['waiting_for_the_dead_node']) for x in r)} | {final[m]['duplicates']} | {final[m]['lost']} |")
        print(f"\n(medians of {args.rounds} rounds, {args.rate} records/s into each 4-shard stream, both flows in one 3-node cluster)")
        return 0
    finally:
        if cluster is not None:
            cluster.stop_all()
        sf.stop()
        for f in flows.values():
            for call, action, key, name in ((kinesis_call, "DeleteStream", "StreamName", f.stream),
                                            (dynamodb_call, "DeleteTable", "TableName", f.app)):
                try:
                    call(action, {key: name})
                except AwsJsonError:
                    pass
        iam_proxy.stop_all()
        services.stop_if_started()


if __name__ == "__main__":
    sys.exit(main())
