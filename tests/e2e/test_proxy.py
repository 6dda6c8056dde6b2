"""Both processors behind an authenticating HTTP proxy, in a real NiFi that can reach nothing else.

NiFi runs in a network namespace of this test's own (tests/lib/proxy.py) with only loopback. Its one
way out is a bridge to tinyproxy (Debian's package), which runs in this machine's namespace beside
kinesis-local, dynalite (both behind Snowflake's IAM policy proxy, as in every consumer test) and the
Snowflake stand-in. Each test first shows that a direct connection from NiFi's namespace to those
ports is refused, so a record that arrives went through the proxy; tinyproxy's access log shows the
requests themselves.

- NiFi's StandardProxyConfigurationService (HTTP with a user name and password) on ConsumeKinesis and
  PutSnowflake: Kinesis, DynamoDB and Snowflake calls all go through it, with polling and with
  Enhanced Fan-Out (kinesis-local speaks plain HTTP, so SubscribeToShard's event stream goes through
  the proxy as an absolute-form HTTP/1.1 request; HTTP/2 through CONNECT is shown by the engine test
  rust-core/tests/proxy.rs, against a TLS endpoint).
- A wrong password: bulletins on both processors name the proxy and say it refused the call, and
  carry no password. tinyproxy answers a wrong password with 401 (not the 407 RFC 7235 asks for; it
  answers missing credentials with 407); the engine reads both as the proxy's refusal.
- No service: NiFi's environment (HTTP_PROXY with the credentials in the URL) carries the calls.
"""

import base64
import json
import os
import sys
import time
import urllib.parse

import pytest

import iam_proxy
from nifi_instance import NiFiInstance, free_port
from proxy import Namespace, Tinyproxy
from services import dynamodb_endpoint, kinesis_call, kinesis_endpoint, local_services  # noqa: F401  (fixture)
from standin import Standin, make_key_pair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402

from consumer_flow import built_nar, unique  # noqa: E402

PROXY_USER = "kinesnow-proxy"
PROXY_PASSWORD = "proxy-pw-7c1d"
WRONG_PASSWORD = "not-the-pw-42aa"
ACCOUNT, USER, TABLE = "kinesnow-local", "KINESNOW", "KINESNOW.PUBLIC.PROXIED"
PROXY_SERVICE = "org.apache.nifi.proxy.StandardProxyConfigurationService"


def port_of(url: str) -> int:
    return urllib.parse.urlsplit(url).port


@pytest.fixture(scope="module")
def net(local_services, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("kinesnow-proxy"))
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300)
    sf.register_user(ACCOUNT, USER, public_key)
    sf.sql(f"CREATE OR REPLACE TABLE {TABLE} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE")
    proxy = Tinyproxy(user=PROXY_USER, password=PROXY_PASSWORD)
    ns = Namespace()
    inside_proxy = ns.reach(proxy.port)
    nifi_port = free_port()
    nifi = NiFiInstance.start(port=nifi_port, extensions=[built_nar()], prefix=ns.prefix, api_port=ns.expose(nifi_port))
    yield {"work": work, "sf": sf, "proxy": proxy, "ns": ns, "inside_proxy": inside_proxy, "nifi": nifi}
    if nifi.is_running():
        nifi.stop()
    ns.close()
    proxy.stop()
    sf.stop()


def put(stream: str, first: int, count: int) -> None:
    records = [{"PartitionKey": f"k{i % 7}", "Data": base64.b64encode(json.dumps({"id": i, "stream": stream}).encode()).decode()}
               for i in range(first, first + count)]
    for start in range(0, len(records), 250):
        kinesis_call("PutRecords", {"StreamName": stream, "Records": records[start:start + 250]})


def rows(sf: Standin, stream: str) -> tuple[int, int]:
    row = sf.query(f"SELECT COUNT(*) AS C, COUNT(DISTINCT ID) AS D FROM {TABLE} WHERE STREAM = '{stream}'")[0]
    return row["C"], row["D"]


def wait_rows(sf: Standin, stream: str, n: int, timeout: float) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    got = (0, 0)
    while time.monotonic() < deadline:
        try:
            got = rows(sf, stream)
        except Exception:  # noqa: BLE001  (the STREAM column appears with the first row)
            got = (0, 0)
        if got[1] >= n:
            return got
        time.sleep(0.5)
    return got


def applied(net, name: str, stream: str, **consumer: str) -> dict:
    """The local flow (ConsumeKinesis -> PutSnowflake) for `stream`, writing into TABLE."""
    c = net["nifi"].client
    ids = flow.apply(c, "local", {"KINESNOW_WORK": net["work"], "SNOWFLAKE_URL": net["sf"].url}, name, context_suffix=f" [{name}]")
    app = f"{stream}-app"
    endpoint = iam_proxy.proxy_for(stream, app)
    c.update_parameters(ids["source_context"], {"AWS Kinesis Stream Name": stream, "AWS Kinesis Application Name": app,
                                                "AWS Kinesis Endpoint Override URL": endpoint,
                                                "AWS DynamoDB Endpoint Override URL": endpoint})
    c.update_parameters(ids["destination_context"], {"Snowflake Destination Table": TABLE.rsplit(".", 1)[-1]})
    if consumer:
        c.update_processor(ids["consumer"], properties=consumer)
    ids["endpoint"] = endpoint
    return ids


def use_proxy_service(net, ids: dict, password: str) -> str:
    c = net["nifi"].client
    service = c.create_controller_service(ids["group"], PROXY_SERVICE, properties={
        "proxy-type": "HTTP", "proxy-server-host": "127.0.0.1", "proxy-server-port": str(net["inside_proxy"]),
        "proxy-user-name": PROXY_USER, "proxy-user-password": password})["id"]
    c.set_controller_service_state(service, "ENABLED")
    for processor in (ids["consumer"], ids["sink"]):
        c.update_processor(processor, properties={"proxy-configuration-service": service})
        v = c.processor_validation(processor)
        assert v["status"] == "VALID", v
    return service


def assert_only_through_proxy(net, ids: dict) -> None:
    """Nothing NiFi is told to reach answers it directly."""
    for port in (port_of(ids["endpoint"]), port_of(net["sf"].url), port_of(kinesis_endpoint()), port_of(dynamodb_endpoint())):
        assert net["ns"].refuses(port), f"NiFi's namespace reaches 127.0.0.1:{port} without the proxy"


def targets(net, since: int = 0) -> list[str]:
    return [t for _, t in net["proxy"].requests()[since:]]


def test_both_processors_go_through_an_authenticating_proxy_service_polling_and_fan_out(net):
    sf, c = net["sf"], net["nifi"].client
    polled, fanned = unique("px-poll"), unique("px-efo")
    for stream in (polled, fanned):
        kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 2})
    time.sleep(1)
    put(polled, 0, 300)
    put(fanned, 0, 200)
    first = applied(net, "proxied-polling", polled)
    second = applied(net, "proxied-fan-out", fanned, **{"Consumer Type": "ENHANCED_FAN_OUT"})
    assert_only_through_proxy(net, first)
    before = len(net["proxy"].requests())
    for ids in (first, second):
        use_proxy_service(net, ids, PROXY_PASSWORD)
        c.start_processor(ids["consumer"])
        c.start_processor(ids["sink"])

    assert wait_rows(sf, polled, 300, 150) == (300, 300)
    assert wait_rows(sf, fanned, 200, 150) == (200, 200)
    put(fanned, 200, 100)  # read by the open subscriptions, through the proxy
    assert wait_rows(sf, fanned, 300, 120) == (300, 300)
    time.sleep(2)
    assert rows(sf, polled) == (300, 300) and rows(sf, fanned) == (300, 300), "no record twice"

    seen = targets(net, before)
    for ids in (first, second):
        assert any(port_of(t) == port_of(ids["endpoint"]) for t in seen), "Kinesis and DynamoDB calls in the proxy's log"
    snowflake = [t for t in seen if port_of(t) == port_of(sf.url)]
    assert any("/v2/streaming/" in t for t in snowflake), f"Snowflake's streaming calls in the proxy's log: {snowflake[:5]}"
    known = {port_of(first["endpoint"]), port_of(second["endpoint"]), port_of(sf.url)}
    assert {port_of(t) for t in seen} <= known, f"requests to other places: {sorted({t for t in seen if port_of(t) not in known})[:5]}"
    for ids in (first, second):
        c.stop_processor(ids["consumer"])
        c.stop_processor(ids["sink"])


def wait_bulletin(c, processor: str, timeout: float = 90) -> list[str]:
    """The processor's bulletin messages, once one says a proxy refused a call."""
    deadline = time.monotonic() + timeout
    messages: list[str] = []
    while time.monotonic() < deadline:
        messages = [b["message"] for b in c.bulletins(source_id=processor)]
        if any("refused" in m and "proxy" in m for m in messages):
            return messages
        time.sleep(1)
    raise AssertionError(f"no bulletin about the proxy's refusal: {messages[:5]}")


def test_a_wrong_proxy_password_is_a_bulletin_naming_the_proxy_without_a_secret(net):
    """ConsumeKinesis with the wrong password first; then it reads through the right one while
    PutSnowflake has the wrong one, so PutSnowflake has FlowFiles to send (it calls Snowflake only
    then) and sends them to failure."""
    c = net["nifi"].client
    stream = unique("px-wrong")
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 1})
    time.sleep(1)
    put(stream, 0, 20)
    ids = applied(net, "wrong-proxy-password", stream)
    wrong = use_proxy_service(net, ids, WRONG_PASSWORD)
    c.start_processor(ids["consumer"])
    consumer_messages = wait_bulletin(c, ids["consumer"])
    c.stop_processor(ids["consumer"])
    right = c.create_controller_service(ids["group"], PROXY_SERVICE, name="right", properties={
        "proxy-type": "HTTP", "proxy-server-host": "127.0.0.1", "proxy-server-port": str(net["inside_proxy"]),
        "proxy-user-name": PROXY_USER, "proxy-user-password": PROXY_PASSWORD})["id"]
    c.set_controller_service_state(right, "ENABLED")
    c.update_processor(ids["consumer"], properties={"proxy-configuration-service": right})
    assert c.get_processor(ids["sink"])["component"]["config"]["properties"]["proxy-configuration-service"] == wrong
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    sink_messages = wait_bulletin(c, ids["sink"])
    deadline = time.monotonic() + 60
    while c.connection_queue_count(ids["failure_queue"]) == 0 and time.monotonic() < deadline:
        time.sleep(1)
    assert c.connection_queue_count(ids["failure_queue"]) > 0, "the FlowFiles PutSnowflake could not send went to failure"

    for role, messages in (("consumer", consumer_messages), ("sink", sink_messages)):
        assert not any(WRONG_PASSWORD in m or PROXY_PASSWORD in m for m in messages), f"{role}: a password in a bulletin"
    consumer_text = " ".join(consumer_messages)
    assert f"http://127.0.0.1:{net['inside_proxy']}" in consumer_text and PROXY_USER in consumer_text, consumer_text[:500]
    with open(net["nifi"].log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    assert WRONG_PASSWORD not in log and PROXY_PASSWORD not in log, "a proxy password in nifi-app.log"
    print("ConsumeKinesis:", consumer_messages[0][:400])
    print("PutSnowflake:", [m for m in sink_messages if "proxy" in m][0][:400])
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])


def test_without_a_service_the_proxy_environment_variables_carry_the_calls(net):
    """NiFi restarted with HTTP_PROXY (credentials in the URL) in its environment; no service set."""
    nifi = net["nifi"]
    nifi.stop()
    url = net["proxy"].url(net["inside_proxy"], PROXY_USER, PROXY_PASSWORD)
    restarted = NiFiInstance.start(port=nifi.port, instance_dir=nifi.instance_dir, keep=True, prefix=net["ns"].prefix,
                                   api_port=int(urllib.parse.urlsplit(nifi.client.base_url).port),
                                   environment={"HTTP_PROXY": url, "HTTPS_PROXY": url})
    nifi.pid, c = restarted.pid, restarted.client
    stream = unique("px-env")
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 1})
    time.sleep(1)
    put(stream, 0, 120)
    ids = applied(net, "proxy-from-environment", stream)
    for processor in (ids["consumer"], ids["sink"]):
        assert c.get_processor(processor)["component"]["config"]["properties"].get("proxy-configuration-service") is None
    assert_only_through_proxy(net, ids)
    before = len(net["proxy"].requests())
    c.start_processor(ids["consumer"])
    c.start_processor(ids["sink"])
    assert wait_rows(net["sf"], stream, 120, 150) == (120, 120)
    seen = targets(net, before)
    assert any(port_of(t) == port_of(ids["endpoint"]) for t in seen) and any(port_of(t) == port_of(net["sf"].url) for t in seen)
    c.stop_processor(ids["consumer"])
    c.stop_processor(ids["sink"])
