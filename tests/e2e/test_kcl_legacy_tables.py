"""REAL legacy KCL lease tables (Amazon Kinesis Client Library for Java 2.x, tests/kcl-legacy) written by a
real KCL consumer against kinesis-local and dynalite: the tables kinesnow's one-time migration from KCL
checkpoint tables must read. Needs only the emulators (no NiFi). Each test prints the exact items KCL wrote
(run pytest with -s to see them).

KCL checkpoints after every record it prints (record level), so its checkpoint covers exactly the printed
records.
"""

import base64
import json
import time

from consumer_flow import create_stream, put_record, unique
from kcl_legacy import describe_lease_table, lease_table_items, records, run_legacy_consumer
from kpl import aggregate
from services import kinesis_call, local_services  # noqa: F401  (pytest fixture)

MAX_HASH = 2 ** 128 - 1


def show(title, items):
    print(f"\n=== {title}")
    for item in items:
        print(json.dumps(item, sort_keys=True))


def by_key(items):
    return {i["leaseKey"]["S"]: i for i in items}


def last_seq_per_shard(lines):
    last = {}
    for r in records(lines):
        last[r["shard"]] = r
    return last


def test_two_shards_halt_after_15(local_services):
    stream, app = unique("kcl-two"), unique("kcl-two-app")
    shards = [s["ShardId"] for s in create_stream(stream, 2)]
    sent = {}
    for i in range(40):
        seq, shard = put_record(stream, f"rec-{i}".encode(), f"pk-{i}")
        sent[seq] = (shard, f"pk-{i}", f"rec-{i}")

    lines = run_legacy_consumer(stream, app, max_records=15, exit="halt")
    recs = records(lines)
    assert len(recs) == 15 and len(lines) == 15, lines
    for r in recs:  # exact data: the Java SDK spoke JSON, not CBOR (kinesis-local's CBOR Data is base64 text)
        assert sent[r["seq"]] == (r["shard"], r["pk"], r["data"]) and r["sub"] == 0, r
    for shard in shards:  # per shard in sequence order, from the shard's start
        seqs = [int(r["seq"]) for r in recs if r["shard"] == shard]
        want = sorted(int(s) for s, v in sent.items() if v[0] == shard)[:len(seqs)]
        assert seqs == want

    table = describe_lease_table(app)
    print("\n=== DescribeTable", json.dumps({k: table.get(k) for k in (
        "KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes", "LocalSecondaryIndexes", "BillingModeSummary")}))
    assert table["KeySchema"] == [{"AttributeName": "leaseKey", "KeyType": "HASH"}]
    assert not table.get("GlobalSecondaryIndexes")

    items = lease_table_items(app)
    show("scenario 1: 2 shards, 15 of 40 records, halt", items)
    assert sorted(by_key(items)) == shards
    last = last_seq_per_shard(lines)
    for shard, item in by_key(items).items():
        want = last[shard]["seq"] if shard in last else "TRIM_HORIZON"
        assert item["checkpoint"] == {"S": want}
        assert item["checkpointSubSequenceNumber"] == {"N": "0"}
        assert "S" in item["leaseOwner"] and item["leaseOwner"]["S"].startswith("kcl-legacy-")
        assert int(item["leaseCounter"]["N"]) > 0
        assert item["ownerSwitchesSinceCheckpoint"] == {"N": "0"}
        assert set(item) >= {"startingHashKey", "endingHashKey"}
        assert not {"parentShardId", "childShardIds", "pendingCheckpoint"} & set(item)


def test_kpl_aggregate_halt_in_the_middle(local_services):
    stream, app = unique("kcl-kpl"), unique("kcl-kpl-app")
    create_stream(stream, 1)
    plain_seq, _ = put_record(stream, b"plain-before", "pk-before")
    [agg] = aggregate([[(f"agg-pk-{i}", f"agg-{i}") for i in range(5)]])
    agg_seq, _ = put_record(stream, base64.b64decode(agg["data_b64"]), agg["partition_key"], agg["explicit_hash_key"])
    put_record(stream, b"plain-after", "pk-after")

    # the plain record, then sub-records 0, 1, 2 of the aggregate: stop in its middle
    lines = run_legacy_consumer(stream, app, max_records=4, exit="halt")
    assert [(r["seq"], r["sub"], r["pk"], r["data"]) for r in records(lines)] == [
        (plain_seq, 0, "pk-before", "plain-before"),
        (agg_seq, 0, "agg-pk-0", "agg-0"), (agg_seq, 1, "agg-pk-1", "agg-1"), (agg_seq, 2, "agg-pk-2", "agg-2")]
    [item] = lease_table_items(app)
    show("scenario 2: KPL aggregate of 5, halted after sub-record 2", [item])
    assert item["checkpoint"] == {"S": agg_seq}
    assert item["checkpointSubSequenceNumber"] == {"N": "2"}

    # a second KCL worker (the first one's lease has expired) resumes inside the aggregate, at sub-record 3
    lines = run_legacy_consumer(stream, app, max_records=2, exit="graceful")
    assert [(r["seq"], r["sub"]) for r in records(lines)] == [(agg_seq, 3), (agg_seq, 4)]
    assert lines[-1].get("exit", "").startswith("max records"), lines
    [item] = lease_table_items(app)
    show("scenario 2b: resumed by a 2nd worker, graceful shutdown after sub-record 4", [item])
    assert item["checkpoint"] == {"S": agg_seq} and item["checkpointSubSequenceNumber"] == {"N": "4"}


def test_split_parent_read_to_its_end(local_services):
    """KCL reads the parent before the split (as a running application would), the shard is split, then KCL
    (a new worker, the first one halted) reads the parent to its end and the children.

    Not with the split done before KCL's first start: KCL 2.x's first shard sync lists AT_TRIM_HORIZON, which
    kinesis-local answers with all shards (parent and children), and KCL then fails with "Hash range of shards
    returned ... was incomplete" (real Kinesis returns only the shards open at the trim horizon)."""
    stream, app = unique("kcl-split"), unique("kcl-split-app")
    [parent] = create_stream(stream, 1)
    parent_id = parent["ShardId"]
    parent_seqs = [put_record(stream, f"p-{i}".encode(), f"p-{i}")[0] for i in range(5)]
    lines = run_legacy_consumer(stream, app, max_records=2, exit="halt")
    assert [r["seq"] for r in records(lines)] == parent_seqs[:2]

    kinesis_call("SplitShard", {"StreamName": stream, "ShardToSplit": parent_id, "NewStartingHashKey": str(2 ** 127)})
    deadline = time.monotonic() + 30
    while kinesis_call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    children = sorted((s for s in kinesis_call("ListShards", {"StreamName": stream})["Shards"]
                       if s.get("ParentShardId") == parent_id), key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
    low, high = children[0]["ShardId"], children[1]["ShardId"]
    # records only into the lower child: the upper one stays unread
    low_seqs = []
    for i in range(3):
        seq, shard = put_record(stream, f"low-{i}".encode(), f"low-{i}", explicit_hash_key=str(i + 1))
        assert shard == low
        low_seqs.append(seq)

    lines = run_legacy_consumer(stream, app, idle_exit_seconds=8, exit="halt", timeout=90)
    recs = records(lines)
    assert [(r["shard"], r["seq"]) for r in recs] == [(parent_id, s) for s in parent_seqs[2:]] + [(low, s) for s in low_seqs]
    assert lines.index({"shardEnd": parent_id}) == 3  # the parent ends before any child record

    items = by_key(lease_table_items(app))
    show("scenario 3: split, parent read to its end, lower child read, upper child unread", items.values())
    assert set(items) == {parent_id, low, high}
    assert items[parent_id]["checkpoint"] == {"S": "SHARD_END"}
    assert sorted(items[parent_id]["childShardIds"]["SS"]) == [low, high]  # written with SHARD_END
    assert items[low]["checkpoint"] == {"S": low_seqs[-1]}
    assert items[high]["checkpoint"] == {"S": "TRIM_HORIZON"}
    for child in (low, high):
        assert items[child]["parentShardId"] == {"SS": [parent_id]}  # attribute "parentShardId", a string set

    # More records into the upper child and a KCL with a 1 s lease cleanup: once every child has checkpointed
    # past TRIM_HORIZON, KCL's LeaseCleanupManager deletes the finished parent's lease.
    high_seqs = [put_record(stream, f"high-{i}".encode(), f"high-{i}", explicit_hash_key=str(MAX_HASH - i))[0] for i in range(2)]
    lines = run_legacy_consumer(stream, app, idle_exit_seconds=8, exit="halt", lease_cleanup_millis=1000, timeout=90)
    assert [(r["shard"], r["seq"]) for r in records(lines)] == [(high, s) for s in high_seqs]
    items = by_key(lease_table_items(app))
    show("scenario 3b: upper child read too, lease cleanup every 1 s", items.values())
    assert items[high]["checkpoint"] == {"S": high_seqs[-1]}
    assert parent_id not in items, "KCL did not delete the finished parent's lease"
