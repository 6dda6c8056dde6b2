"""Exercises tests/nifi (assemble.sh, nifi.sh) and tests/lib/nifi_client.py against a real NiFi.

NiFi is started once for the module with NO product NAR. The trimmed NiFi has no standard processors
(nifi-standard-nar 2.x is not resolvable here), so processor calls are exercised by hot-loading a tiny
test-only fixture NAR (tests/nifi/fixture-nar) into the running instance, after the bare-NiFi checks.
Run: python3 -m pytest tests/nifi -v
"""

import json
import os
import shutil
import subprocess
import time

import pytest

from nifi_client import (NiFiApiError, NiFiClient, load_parameter_context_file, log_position,
                         read_log_errors)
from nifi_instance import NiFiInstance, free_port, pinned_nifi_version, port_is_open, REPO

HERE = os.path.dirname(os.path.abspath(__file__))
MEASUREMENTS = os.path.join(HERE, ".work", "measurements.json")


def _record(**values):
    os.makedirs(os.path.dirname(MEASUREMENTS), exist_ok=True)
    data = {}
    if os.path.exists(MEASUREMENTS):
        with open(MEASUREMENTS) as f:
            data = json.load(f)
    data.update(values)
    with open(MEASUREMENTS, "w") as f:
        json.dump(data, f, indent=2)
    print(values)


@pytest.fixture(scope="module")
def nifi():
    inst = NiFiInstance.start(port=free_port(), timeout=300)
    yield inst
    inst.stop()


@pytest.fixture
def client(nifi) -> NiFiClient:
    return nifi.client


def test_assembly_is_cached_and_fast_on_rerun():
    t0 = time.monotonic()
    out = subprocess.run([os.path.join(HERE, "assemble.sh")], capture_output=True, text=True, check=True)
    warm = time.monotonic() - t0
    home = out.stdout.strip().splitlines()[-1]
    assert home.endswith("nifi-" + pinned_nifi_version())
    assert os.path.isfile(os.path.join(home, "lib", f"nifi-runtime-{pinned_nifi_version()}.jar"))
    assert os.path.isfile(os.path.join(home, "lib", f"nifi-framework-nar-{pinned_nifi_version()}.nar"))
    for name in ("nifi.properties", "logback.xml", "state-management.xml", "bootstrap.conf"):
        assert os.path.isfile(os.path.join(home, "conf", name))
    assert os.path.isdir(os.path.join(home, "extensions"))
    size = int(subprocess.run(["du", "-sk", home], capture_output=True, text=True).stdout.split()[0])
    _record(warm_assembly_seconds=round(warm, 2), assembly_size_mib=round(size / 1024, 1))
    assert warm < 10, f"warm assemble.sh took {warm:.1f}s"


def test_nifi_up_reports_pinned_version(nifi, client):
    about = client.wait_until_up(timeout=10)
    assert about["version"] == pinned_nifi_version()
    assert client.version() == pinned_nifi_version()
    assert os.path.exists(f"/proc/{nifi.pid}")
    assert os.path.isfile(nifi.log_path)
    assert nifi.is_running()
    # the instance is bound to loopback on the requested port, plain HTTP
    with open(os.path.join(nifi.instance_dir, "conf", "nifi.properties")) as f:
        props = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line and not line.startswith("#"))
    assert props["nifi.web.http.host"] == "127.0.0.1"
    assert props["nifi.web.http.port"] == str(nifi.port)
    assert props["nifi.web.https.port"] == ""
    assert props["nifi.sensitive.props.key"]
    time.sleep(5)  # let it settle before sampling idle RSS
    _record(nifi_start_seconds=round(nifi.start_seconds, 1), nifi_idle_rss_mib=round(nifi.rss_kib() / 1024))


def test_processor_types_list(client):
    types = client.processor_types()
    assert isinstance(types, list)
    for t in types:
        assert t["type"] and {"group", "artifact", "version"} <= set(t["bundle"])
    # The trimmed assembly has no standard processors and no product NAR at this point.
    assert not [t for t in types if t["type"].startswith("org.apache.nifi.processors.standard.")]
    assert isinstance(client.controller_service_types(), list)


def test_parameter_context_from_file_bound_to_new_process_group(client, tmp_path):
    doc = {"name": "harness-ctx", "description": "harness test context", "parameters": [
        {"name": "stream_name", "value": "orders", "sensitive": False, "description": "Kinesis stream"},
        {"name": "snowflake_password", "value": "s3cret", "sensitive": True, "description": "secret"},
        {"name": "empty_one", "value": None, "sensitive": False, "description": "no value yet"},
    ]}
    path = tmp_path / "ctx.json"
    path.write_text(json.dumps(doc))
    assert load_parameter_context_file(str(path))["name"] == "harness-ctx"

    name = f"harness-ctx-{time.time_ns()}"
    ctx = client.create_parameter_context_from_file(str(path), name=name)
    try:
        assert ctx["component"]["name"] == name
        assert ctx["component"]["description"] == "harness test context"
        values = client.parameter_values(ctx["id"])
        assert values["stream_name"] == "orders"
        assert values["snowflake_password"] != "s3cret"  # masked by NiFi
        assert values["empty_one"] is None
        assert client.find_parameter_context(name)["id"] == ctx["id"]

        pg = client.create_process_group("harness-pg", parameter_context_id=ctx["id"])
        try:
            assert client.get_process_group(pg["id"])["component"]["parameterContext"]["id"] == ctx["id"]
            client.set_process_group_parameter_context(pg["id"], None)
            assert not client.get_process_group(pg["id"])["component"].get("parameterContext")
            client.set_process_group_parameter_context(pg["id"], ctx["id"])
            assert client.get_process_group(pg["id"])["component"]["parameterContext"]["id"] == ctx["id"]
            root_groups = client.process_group_flow(client.root_process_group_id())["processGroups"]
            assert pg["id"] in [g["id"] for g in root_groups]

            req = client.update_parameters(ctx["id"], {"stream_name": "payments", "empty_one": "x"},
                                           remove=["snowflake_password"])
            assert req["complete"] and not req.get("failureReason")
            values = client.parameter_values(ctx["id"])
            assert values == {"stream_name": "payments", "empty_one": "x"}
        finally:
            client.delete_process_group(pg["id"])
    finally:
        client.delete_parameter_context(ctx["id"])
    assert client.find_parameter_context(name) is None


def test_product_parameter_context_files_load_into_nifi(client):
    """Every context file in the product's parameter-contexts/ folder is accepted by NiFi."""
    import glob
    def is_context(path):
        with open(path) as f:
            doc = json.load(f)
        return isinstance(doc, dict) and "parameters" in doc  # skips e.g. processor-bindings.json

    files = [f for f in sorted(glob.glob(os.path.join(REPO, "parameter-contexts", "**", "*.json"), recursive=True))
             if is_context(f)]
    for path in files:
        doc = load_parameter_context_file(path)
        ctx = client.create_parameter_context_from_file(path, name=f"{doc['name']} {time.time_ns()}")
        try:
            values = client.parameter_values(ctx["id"])
            assert set(values) == {p["name"] for p in doc["parameters"]}, path
            for p in doc["parameters"]:
                if not p.get("sensitive"):
                    assert values[p["name"]] == p.get("value"), (path, p["name"])
        finally:
            client.delete_parameter_context(ctx["id"])
    print(f"{len(files)} product parameter-context files loaded")


def test_bad_parameter_context_file_is_rejected(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "x", "parameters": [{"name": "a", "value": 1}]}))
    with pytest.raises(ValueError):
        load_parameter_context_file(str(path))


def test_bulletins_endpoint(client):
    assert isinstance(client.bulletins(), list)
    assert client.bulletins(source_id="no-such-component") == []


def test_api_errors_carry_status_and_body(client):
    with pytest.raises(NiFiApiError) as err:
        client.get_processor("does-not-exist")
    assert err.value.status == 404
    assert "does-not-exist" in err.value.body
    assert "404" in str(err.value)


def test_log_reader_filters_by_level_and_logger(tmp_path):
    log = tmp_path / "nifi-app.log"
    log.write_text(
        "2026-01-01 00:00:00,000 INFO [main] org.apache.nifi.Foo started\n"
        "2026-01-01 00:00:01,000 ERROR [Timer-Driven Process Thread-1] com.kinesnow.Consumer boom\n"
        "java.lang.IllegalStateException: boom\n"
        "\tat com.kinesnow.Consumer.run(Consumer.java:1)\n"
        "2026-01-01 00:00:02,000 ERROR [main] org.apache.nifi.Bar other\n")
    errs = read_log_errors(str(log), "com.kinesnow")
    assert len(errs) == 1 and errs[0]["logger"] == "com.kinesnow.Consumer"
    assert "IllegalStateException" in errs[0]["text"]
    assert len(read_log_errors(str(log))) == 2
    assert read_log_errors(str(log), start=log_position(str(log))) == []


def test_processor_lifecycle_with_hot_loaded_fixture_nar(nifi, client):
    """Test-only fixture NAR (not the product): add/validate/connect/start/stop/bulletins/log/delete."""
    nar = subprocess.run([os.path.join(HERE, "fixture-nar", "build.sh")], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    shutil.copy(nar, nifi.extensions_dir)
    ptype = "com.kinesnow.tests.harness.HarnessProbe"
    deadline = time.monotonic() + 120
    while not client.processor_types(ptype):
        assert time.monotonic() < deadline, "fixture NAR was not autoloaded"
        time.sleep(0.5)
    entry = client.find_processor_type(ptype)
    bundle = entry["bundle"]
    assert {k: bundle[k] for k in ("group", "artifact", "version")} == {
        "group": "com.kinesnow.tests", "artifact": "kinesnow-harness-probe-nar", "version": "1.0.0"}
    definition = client.processor_definition(ptype, bundle)
    assert set(definition["propertyDescriptors"]) == {"Message", "Fail On Trigger"}
    assert [r["name"] for r in definition["supportedRelationships"]] == ["success"]

    ctx = client.create_parameter_context(f"probe-ctx-{time.time_ns()}", [{"name": "msg", "value": "hello"}])
    pg = client.create_process_group("probe-pg", parameter_context_id=ctx["id"])
    try:
        src = client.add_processor(pg["id"], ptype, bundle, name="source", properties={"Message": "#{msg}"},
                                   scheduling_period="200 millis", concurrent_tasks=1)
        dst = client.add_processor(pg["id"], ptype, name="sink", auto_terminate=["success"])
        assert src["component"]["config"]["schedulingPeriod"] == "200 millis"

        v = client.processor_validation(src["id"])
        assert v["status"] == "INVALID" and any("success" in e for e in v["errors"])
        v = client.processor_validation(dst["id"])
        assert v["status"] == "INVALID" and any("Message" in e for e in v["errors"])

        conn = client.connect(pg["id"], src["id"], dst["id"], ["success"])
        client.update_processor(dst["id"], properties={"Message": "unused"})
        assert client.processor_validation(src["id"]) == {"status": "VALID", "errors": []}
        assert client.processor_validation(dst["id"])["status"] == "VALID"

        client.start_processor(src["id"])
        assert client.processor_state(src["id"]) == "RUNNING"
        deadline = time.monotonic() + 30
        while client.connection_queue_count(conn["id"]) == 0:
            assert time.monotonic() < deadline, "no FlowFiles queued"
            time.sleep(0.5)
        client.stop_processor(src["id"])
        assert client.processor_state(src["id"]) == "STOPPED"

        # parameter update while referenced: NiFi restarts referencing components itself
        client.start_processor(src["id"])
        client.update_parameters(ctx["id"], {"msg": "bye"})
        assert client.processor_state(src["id"]) == "RUNNING"
        client.stop_processor(src["id"])

        # failure path: ERROR log line -> bulletin (filtered by source id) and nifi-app.log entry
        pos = log_position(nifi.log_path)
        client.update_processor(src["id"], properties={"Fail On Trigger": "true"})
        client.start_processor(src["id"])
        deadline = time.monotonic() + 30
        while not client.bulletins(source_id=src["id"]):
            assert time.monotonic() < deadline, "no bulletin"
            time.sleep(0.5)
        client.stop_processor(src["id"])
        b = client.bulletins(source_id=src["id"])[0]
        assert b["level"] == "ERROR" and "failure requested" in b["message"] and b["sourceId"] == src["id"]
        assert client.bulletins(source_id=dst["id"]) == []
        errors = read_log_errors(nifi.log_path, "com.kinesnow.tests.harness", start=pos)
        assert errors and "failure requested, message [bye]" in errors[0]["message"]

        client.set_auto_terminated(dst["id"], [])
        assert client.processor_validation(dst["id"])["status"] == "INVALID"
        client.empty_queue(conn["id"])
        assert client.connection_queue_count(conn["id"]) == 0
        client.delete_connection(conn["id"])
        client.delete_processor(dst["id"])
        assert [p["id"] for p in client.process_group_flow(pg["id"])["processors"]] == [src["id"]]
    finally:
        client.delete_process_group(pg["id"])
        client.delete_parameter_context(ctx["id"])


def test_stop_kills_pid_and_closes_port(nifi):
    assert port_is_open(nifi.port)
    t0 = time.monotonic()
    nifi.stop()
    _record(nifi_stop_seconds=round(time.monotonic() - t0, 1))
    assert not os.path.exists(f"/proc/{nifi.pid}")
    assert not port_is_open(nifi.port)
    assert not nifi.is_running()
    assert not os.path.exists(os.path.join(nifi.instance_dir, "nifi.pid"))
    nifi.stop()  # idempotent
