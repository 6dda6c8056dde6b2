"""Conformance: Snowflake's official Snowpipe Streaming SDK (snowpipe-streaming
1.9.1, PyPI) against the stand-in over TLS. The SDK is the oracle: what it
accepts here is what Snowflake answers on the wire."""

import pytest
from snowflake.ingest.streaming import StreamingIngestClient, StreamingIngestError

from conftest import wait_until


@pytest.fixture(scope="module")
def tables(standin):
    standin.sql("CREATE OR REPLACE TABLE DB.PUBLIC.T (id NUMBER NOT NULL, name VARCHAR, kinesisMetadata VARIANT)")
    standin.sql("CREATE OR REPLACE TABLE DB.PUBLIC.EL (id NUMBER, src VARCHAR)")
    standin.sql(
        "CREATE OR REPLACE PIPE DB.PUBLIC.T_PIPE AS COPY INTO DB.PUBLIC.T FROM TABLE(DATA_SOURCE(TYPE => 'STREAMING')) MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE"
    )


def test_named_channel_commit_reopen_and_stale_token(standin, sdk_properties, tables):
    client = StreamingIngestClient.from_table("cli", "DB", "PUBLIC", "T", properties=sdk_properties)
    channel, status = client.open_channel("shard-0")
    assert status.status_code == "SUCCESS"
    assert status.latest_committed_offset_token is None

    meta = {"stream": "s", "shardId": "shardId-0", "sequenceNumber": "49", "subSequenceNumber": 0}
    channel.append_rows([{"id": 1, "name": "a", "kinesisMetadata": meta}, {"id": 2, "name": "b"}, {"ID": 3, "Name": "c"}], "1", "3")
    channel.append_row({"id": 4, "name": "d"}, "4")
    channel.wait_for_commit(lambda token: token is not None and int(token) >= 4, timeout_seconds=30)
    assert channel.get_latest_committed_offset_token() == "4"
    assert client.get_latest_committed_offset_tokens(["shard-0"]) == {"shard-0": "4"}

    # The SDK sent zstd NDJSON with start/end offset tokens and its continuation token.
    appends = [r for r in standin.requests("/rows") if r["status"] == 200]
    assert appends and all(r["headers"].get("content-encoding") == "zstd" for r in appends)
    # (The SDK batches appends, so both calls may travel in one request.)
    assert all("startOffsetToken=" in r["query"] and "continuationToken=" in r["query"] for r in appends)
    assert "endOffsetToken=4" in appends[-1]["query"]

    # A second client reopens the channel: it sees the committed token, and the
    # first client's continuation token is now stale.
    client2 = StreamingIngestClient.from_table("cli2", "DB", "PUBLIC", "T", properties=sdk_properties)
    channel2, status2 = client2.open_channel("shard-0")
    assert status2.latest_committed_offset_token == "4"

    # append_row only queues; the SDK's background insert gets 400
    # STALE_CONTINUATION_TOKEN_SEQUENCER (non-retryable) and invalidates the channel,
    # which wait_for_flush and every later append report.
    channel.append_row({"id": 99, "name": "from the stale client"}, "5")
    with pytest.raises(StreamingIngestError) as flushed:
        channel.wait_for_flush(timeout_seconds=20)
    assert "STALE_CONTINUATION_TOKEN_SEQUENCER" in str(flushed.value)
    with pytest.raises(StreamingIngestError) as appended:
        channel.append_row({"id": 100}, "6")
    assert "invalid state" in str(appended.value)
    stale = [r for r in standin.requests("/rows") if r["status"] == 400]
    assert len(stale) == 1 and "endOffsetToken=5" in stale[0]["query"]

    channel2.append_rows([{"id": 5, "name": "e"}, {"id": 6, "name": "f"}], "5", "6")
    channel2.wait_for_commit(lambda token: token is not None and int(token) >= 6, timeout_seconds=30)
    assert channel2.get_latest_committed_offset_token() == "6"

    rows = standin.query("SELECT id, name, kinesisMetadata FROM DB.PUBLIC.T ORDER BY id")
    assert [r["ID"] for r in rows] == [1, 2, 3, 4, 5, 6]  # unquoted names come back upper-case, as in Snowflake
    assert rows[0]["KINESISMETADATA"] == meta
    assert rows[2]["NAME"] == "c"
    client2.close(wait_for_flush=True, timeout_seconds=10)
    client.close(wait_for_flush=False, timeout_seconds=5)


def test_named_pipe(standin, sdk_properties, tables):
    client = StreamingIngestClient("cli-pipe", "DB", "PUBLIC", "T_PIPE", properties=sdk_properties)
    channel, _ = client.open_channel("pipe-0")
    channel.append_row({"id": 1000, "name": "via named pipe"}, "1")
    channel.wait_for_commit(lambda t: t == "1", timeout_seconds=30)
    assert standin.query("SELECT name FROM DB.PUBLIC.T WHERE id = 1000") == [{"NAME": "via named pipe"}]
    client.close(wait_for_flush=True, timeout_seconds=10)


def test_elastic_channel(standin, sdk_properties, tables):
    client = StreamingIngestClient.from_table("cli-el", "DB", "PUBLIC", "EL", properties=sdk_properties)
    channel = client.get_elastic_channel()
    future = channel.append_rows_with_wait([{"id": 10, "src": "elastic"}, {"id": 11, "src": "elastic"}, {"id": 12, "src": "elastic"}], "batch-1")
    future.result(timeout=30)
    rows = wait_until(lambda: standin.query("SELECT id, src FROM DB.PUBLIC.EL ORDER BY id") or None, timeout=30)
    assert rows == [{"ID": 10, "SRC": "elastic"}, {"ID": 11, "SRC": "elastic"}, {"ID": 12, "SRC": "elastic"}]
    elastic = [r for r in standin.requests("/channels/ELASTIC/rows")]
    assert elastic and all("continuationToken" not in (r["query"] or "") for r in elastic)
    client.close(wait_for_flush=True, timeout_seconds=10)


def test_the_sdk_retries_the_channel_limits_429(standin, sdk_properties, tables):
    """The stand-in enforces Snowflake's per-channel limits (10 requests and 20 MB of rows a second) with 429
    ERR_TOO_MANY_REQUESTS: the SDK, sending as fast as it can, is refused and retries until every row is in."""
    # Past a buffer threshold the SDK writes files to the pipe's stage instead, which the stand-in does not
    # implement: these properties keep it on the REST append (as bench/sink.sh does).
    rest_only = {**sdk_properties, "max_buffered_kb_for_rowset_mode": "1048576", "max_rowset_payload_size_mb": "16"}
    client = StreamingIngestClient.from_table("cli-limits", "DB", "PUBLIC", "T", properties=rest_only)
    channel, _ = client.open_channel("limits-0")
    first, rows, per_call = 2_000_000, 120_000, 1_000
    name = "n" * 400
    for start in range(first, first + rows, per_call):
        batch = [{"id": i, "name": name} for i in range(start, start + per_call)]
        channel.append_rows(batch, str(start), str(start + per_call - 1))
    last = first + rows - 1
    channel.wait_for_commit(lambda t: t is not None and int(t) >= last, timeout_seconds=120)
    refused = [r for r in standin.requests("/channels/limits-0/rows") if r["status"] == 429]
    assert refused, "about 50 MB of rows in a few seconds: some appends were over the limits"
    count = standin.query(f"SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM DB.PUBLIC.T WHERE id >= {first}")
    assert count == [{"n": rows, "d": rows}]
    client.close(wait_for_flush=True, timeout_seconds=10)
