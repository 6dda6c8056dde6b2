"""PutSnowflake with Openflow's SNOWFLAKE_MANAGED authentication in a real NiFi whose environment has
SNOWFLAKE_HOST, as Openflow's Snowflake deployments set it: valid without account, user or key; the account URL
is https://<SNOWFLAKE_HOST> (here a closed port, which the bulletins name); with Snowflake URL Override set, the
session token file's token (no service account token mounted) reaches the stand-in as Openflow sends it, and
appears nowhere in NiFi's logs.

The stand-in serves plain HTTP here: the NAR trusts only the public web roots, so https://<SNOWFLAKE_HOST>
cannot reach a stand-in with a generated CA from inside NiFi; rust-core/tests/sink_standin.rs covers that path
over TLS."""

import os
import time

import pytest

from nifi_instance import NiFiInstance, free_port
from services import kinesis_call, local_services  # noqa: F401  (session fixture)
from standin import Standin

from test_put_snowflake import RUN, applied, nar, put

TABLE = "KINESNOW.PUBLIC.EVENTS"
TOKEN = "session-e2e-3f9c1d"
CLOSED = "127.0.0.1:9"  # SNOWFLAKE_HOST: nothing listens there


@pytest.fixture(scope="module")
def managed(local_services, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("kinesnow-managed"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300)
    sf.sql(f"CREATE OR REPLACE TABLE {TABLE} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE")
    sf.admin("PUT", "/admin/managed-tokens", {"tokens": [{"kind": "session", "token": TOKEN, "label": "e2e-session"}]})
    session = os.path.join(work, "session-token")
    with open(session, "w") as f:
        f.write(TOKEN + "\n")
    before = os.environ.get("SNOWFLAKE_HOST")
    os.environ["SNOWFLAKE_HOST"] = CLOSED  # NiFi inherits the environment of the process that starts it
    try:
        nifi = NiFiInstance.start(port=free_port(), extensions=[nar()])
    finally:
        if before is None:
            os.environ.pop("SNOWFLAKE_HOST", None)
        else:
            os.environ["SNOWFLAKE_HOST"] = before
    yield {"work": work, "sf": sf, "nifi": nifi, "session": session}
    if nifi.is_running():
        nifi.stop()
    sf.stop()


def test_snowflake_managed_uses_snowflake_host_and_the_session_token(managed):
    c, sf = managed["nifi"].client, managed["sf"]
    stream = f"e2e-snowflake-managed-{RUN}"
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 1})
    time.sleep(1)
    put(stream, 0, 20)
    ids = applied(managed, "managed", stream)  # the local flow, then PutSnowflake switched to Openflow's managed auth
    sink = ids["sink"]
    c.update_processor(sink, properties={
        "Authentication Strategy": "SNOWFLAKE_MANAGED",
        "Account Identifier": None, "Snowflake URL Override": None,
        "Session Token File": managed["session"],
        "Service Account Token File": os.path.join(managed["work"], "no-serviceaccount-token"),
        "Commit Timeout": "5 sec",
    })

    v = c.processor_validation(sink)
    assert v["status"] == "VALID", f"no Account Identifier, User or key needed with SNOWFLAKE_HOST set: {v}"

    # No URL Override: the account URL is https://<SNOWFLAKE_HOST>, a closed port here, named in the bulletins.
    c.start_processor(ids["consumer"])
    c.start_processor(sink)
    deadline = time.monotonic() + 60
    messages: list = []
    while time.monotonic() < deadline and not any(CLOSED in m for m in messages):
        time.sleep(1)
        messages = [b["message"] for b in c.bulletins(source_id=sink)]
    assert any(CLOSED in m for m in messages), f"the bulletins name https://{CLOSED}: {messages}"
    c.stop_processor(sink)

    # With the override, the stand-in gets the session token as Openflow sends it.
    c.update_processor(sink, properties={"Snowflake URL Override": sf.url})
    c.start_processor(sink)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sf.query(f"SELECT COUNT(DISTINCT ID) AS C FROM {TABLE}")[0]["C"] < 20:
        time.sleep(0.5)
    c.stop_processor(ids["consumer"])
    c.stop_processor(sink)
    row = sf.query(f"SELECT COUNT(*) AS N, COUNT(DISTINCT ID) AS D FROM {TABLE}")[0]
    assert (row["N"], row["D"]) == (20, 20), f"every record once: {row}"
    requests = sf.admin("GET", "/admin/requests?path_contains=/v2/streaming")["requests"]
    assert requests and all(r["auth"] == {"kind": "session", "label": "e2e-session", "valid": True} for r in requests), \
        [r["auth"] for r in requests]
    assert not any("x-snowflake-authorization-token-type" in r["headers"] for r in requests), "no token type, as Openflow"
    assert all(r["status"] == 200 for r in requests), [(r["path"], r["status"]) for r in requests]
    with open(managed["nifi"].log_path, errors="replace") as f:
        assert TOKEN not in f.read(), "the token appears nowhere in NiFi's log"
