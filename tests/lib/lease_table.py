"""ConsumeKinesis's DynamoDB lease table as the tests read it (dynalite): which engine holds which
shard, which engines are alive, and on which NiFi node (JVM) each engine runs.

    from lease_table import lease_owners, leases_by_node, live_engines, owner_pid
    lease_owners(app, stream)             # {shard id: owner or None}
    leases_by_node(cluster, app, stream)  # {node index: [shard ids]}, None for free / unknown owners
    live_engines(app, stream)             # owners whose heartbeat row advanced just now

Owner ids are kinesnow-<ms>-<pid>-<random> in hex (rust-core/src/consumer/engine.rs, uuid_like), so the
PID tells the JVM; heartbeat rows are slots __node__slot<N> naming their owner in `nodeOwner`, with a
`heartbeat` counter, tombstoned (`removedAt`) when the engine closes and taken by the next start
(rust-core/src/lease/node_row.rs). Standard library only.
"""

from __future__ import annotations

import time
from typing import Iterable

from services import AwsJsonError, dynamodb_call

NODE_ROW_PREFIX = "__node__"


def lease_rows(app: str, stream: str) -> list[dict]:
    """Every row of the stream in the Application Name's table; [] until a node created the table."""
    try:
        return dynamodb_call("Query", {"TableName": app, "ConsistentRead": True,
                                       "KeyConditionExpression": "streamName = :s",
                                       "ExpressionAttributeValues": {":s": {"S": stream}}})["Items"]
    except AwsJsonError as e:
        if e.error_type.endswith("ResourceNotFoundException"):
            return []
        raise


def lease_owners(app: str, stream: str) -> dict:
    """shard id -> owner (None when free)."""
    return {i["shardId"]["S"]: i.get("leaseOwner", {}).get("S") for i in lease_rows(app, stream)
            if not i["shardId"]["S"].startswith("__")}


def owner_pid(owner: str) -> int:
    """The PID of the JVM whose engine is this owner."""
    return int(owner.split("-")[2], 16)


def heartbeats(app: str, stream: str) -> dict:
    """owner -> heartbeat counter of every engine heartbeat row that is not a tombstone (NiFi's own
    node rows, __node__#<uuid>, are not ours)."""
    return {i["nodeOwner"]["S"]: int(i.get("heartbeat", {}).get("N", "0"))
            for i in lease_rows(app, stream)
            if i["shardId"]["S"].startswith(NODE_ROW_PREFIX) and "nodeOwner" in i and "removedAt" not in i}


def live_engines(app: str, stream: str, gap: float = 4.0) -> set:
    """Owners whose heartbeat advanced within `gap` seconds: the engines running now, whether or not
    they hold a lease."""
    first = heartbeats(app, stream)
    time.sleep(gap)
    return {o for o, beat in heartbeats(app, stream).items() if beat > first.get(o, -1)}


def leases_by_node(cluster, app: str, stream: str) -> dict:
    """node index -> shards whose lease an engine in that node's JVM holds (`cluster` is a
    nifi_cluster.NiFiCluster); key None for free shards and for owners in no running node's JVM."""
    pids = {n.pid: n.index for n in cluster.nodes if n.pid}
    out: dict = {}
    for shard, owner in sorted(lease_owners(app, stream).items()):
        out.setdefault(pids.get(owner_pid(owner)) if owner else None, []).append(shard)
    return out


def leases_spread(cluster, app: str, stream: str, nodes: Iterable[int], shards: int):
    """All `shards` leases are held, each of `nodes` holds at least one through exactly one engine,
    and no one else holds any: the map node -> shards, or False."""
    nodes = set(nodes)
    owners = lease_owners(app, stream)
    engines: dict = {}
    for owner in filter(None, owners.values()):
        engines.setdefault(owner_pid(owner), set()).add(owner)
    got = leases_by_node(cluster, app, stream)
    ok = len(owners) == shards and set(got) == nodes and all(len(e) == 1 for e in engines.values())
    return ok and got
