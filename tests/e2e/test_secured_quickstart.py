"""The README's quick start for plain NiFi, followed as a new user follows it, against a freshly started secured NiFi
(HTTPS and a login, as NiFi 2.x runs by default; tests/e2e/conftest.py's `secured_nifi`), up to the point
where real AWS and Snowflake would be needed: kinesis-local and dynalite (through Snowflake's IAM policy,
tests/lib/iam_proxy.py) stand in for AWS, the stand-in for Snowflake.

Every step goes through the REST calls NiFi's UI makes for it:

1. log in (the login page: POST /access/token with the username and password; a call without it is refused);
2. the NAR the README names is the one NiFi loaded, and both flow definitions name it;
3. on the canvas, drag a Process Group and upload `parameter-contexts/flow/kinesis-to-snowflake.json` into it
   (POST /process-groups/{root}/process-groups/upload, multipart: groupName, positionX, positionY, clientId,
   disconnectedNodeAcknowledged, file). NiFi creates the parameter contexts the definition brings (Kinesis Source,
   Snowflake Destination, and Kinesis to Snowflake (template) inheriting both) and binds the group to the last;
   the processors are invalid until they are filled in;
4. Parameter Contexts -> edit Kinesis Source, then Snowflake Destination -> set the values the README lists -> Apply
   (POST /parameter-contexts/{id}/update-requests, polled, then deleted);
5. both processors valid; start the group (PUT /flow/process-groups/{id} with state RUNNING);
6. records put into the stream arrive in the table.

The second test runs `parameter-contexts/apply.py --definition` (the scripted way to the same flow) against the
same secured NiFi with --username, --password-file and --ca-file, and shows that it fails with a certificate error
when told to trust another CA, and that no output of it carries the password.

NiFi's single-user login providers NAR is not served by the Maven repository reachable here, so this NiFi logs in
through a test-only login provider of ours (tests/nifi/test-login-nar) with the same REST login as NiFi's
single-user one (POST /nifi-api/access/token with username and password, bearer token) and authorizes with NiFi's
file-based managed authorizer; NiFi's own single-user provider, which a user's NiFi runs, is not what this test runs.
"""

import base64
import json
import os
import re
import subprocess
import sys
import time

import pytest

import iam_proxy
from consumer_flow import built_nar
from nifi_instance import anonymous_status, read_instance_env, read_login
from services import kinesis_call, local_services  # noqa: F401  (session fixture)
from standin import Standin, make_key_pair
from test_acceptance import ACCOUNT, RUN, USER, create_table, wait_active

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFINITION = os.path.join(REPO, "parameter-contexts", "flow", "kinesis-to-snowflake.json")
OPENFLOW_DEFINITION = os.path.join(REPO, "parameter-contexts", "flow", "kinesis-to-snowflake-openflow.json")
GROUP = "Kinesis to Snowflake"
RECORDS = 50


@pytest.fixture(scope="module")
def env(local_services, secured_nifi, tmp_path_factory):  # noqa: F811  (the imported fixture)
    work = str(tmp_path_factory.mktemp("kinesnow-secured-quickstart"))
    key_file, public_key = make_key_pair(os.path.join(work, "snowflake"))
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=300)
    state = {"sf": sf, "key_file": key_file, "nifi": secured_nifi, "work": work}
    try:
        sf.register_user(ACCOUNT, USER, public_key)
        yield state
    finally:
        try:
            secured_nifi.clean()
        finally:
            sf.stop()
            if "stream" in state:
                kinesis_call("DeleteStream", {"StreamName": state["stream"]})


def readme_quick_start() -> str:
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return text[text.index("## Quick start against real AWS and Snowflake"):text.index("## Why this rather")]


def bundles(definition_file: str) -> set:
    with open(definition_file, encoding="utf-8") as f:
        return {p["bundle"]["artifact"] for p in json.load(f)["flowContents"]["processors"]}


def put(stream: str, count: int) -> None:
    records = [{"PartitionKey": f"k{i % 7}", "Data": base64.b64encode(json.dumps({"id": i, "kind": "quickstart"}).encode()).decode()}
               for i in range(count)]
    kinesis_call("PutRecords", {"StreamName": stream, "Records": records})


def test_the_readme_quick_start_for_plain_nifi_works_as_written_on_a_secured_nifi(env):
    nifi, sf = env["nifi"], env["sf"]
    c = nifi.client

    # 1. The login page: HTTPS only, nothing without a login.
    assert c.base_url.startswith("https://127.0.0.1:") and c.username, c
    assert anonymous_status(c) == 401, "a call without login must be refused"
    c.login()

    # 2. The NAR: the one the README has a user install, the one both flow definitions name, the one NiFi loaded.
    quick_start = readme_quick_start()
    named = set(re.findall(r"target/(kinesnow[a-z-]*-nar)-0\.1\.0\.nar", quick_start))
    assert len(named) == 1, f"the README's quick start names one NAR to install: {named}"
    nar = named.pop()
    assert os.path.basename(built_nar()).startswith(nar + "-"), (nar, built_nar())
    assert bundles(DEFINITION) == bundles(OPENFLOW_DEFINITION) == {nar}
    loaded = {t["bundle"]["artifact"] for t in c.processor_types("io.kinesnow")}
    assert loaded == {nar}, loaded
    for page in ("install.md", "openflow.md"):
        with open(os.path.join(REPO, "docs", page), encoding="utf-8") as f:
            text = f.read()
        assert f"install **{nar}**" in text.replace("Install", "install"), f"docs/{page} tells a user to install {nar}"

    # 3. Drag a Process Group onto the canvas, "Upload" the flow definition into it.
    with open(DEFINITION, encoding="utf-8") as f:
        definition = json.load(f)
    group = c.upload_flow_definition(definition, GROUP, position=(120.0, 80.0))
    bound = c.get_parameter_context(group["component"]["parameterContext"]["id"])["component"]
    assert bound["name"] == "Kinesis to Snowflake (template)", bound["name"]
    contexts = {x["component"]["name"]: x["id"] for x in bound["inheritedParameterContexts"]}
    assert set(contexts) == {"Kinesis Source", "Snowflake Destination"}, contexts
    flow = c.process_group_flow(group["id"])
    processors = {p["component"]["name"]: p["id"] for p in flow["processors"]}
    assert set(processors) == {"ConsumeKinesis", "PutSnowflake"}, processors
    assert c.processor_validation(processors["ConsumeKinesis"])["status"] == "INVALID", "nothing filled in yet"

    # 4. Fill in the parameters the README lists (endpoint and URL overrides: the emulators and the stand-in).
    stream, app = f"quickstart-{RUN}", f"quickstart-{RUN}-app"
    env["stream"] = stream
    kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 1})
    wait_active(stream)
    table = f"QUICKSTART_{RUN}"
    create_table(sf, f"KINESNOW.PUBLIC.{table}", evolution=True)
    proxy = iam_proxy.proxy_for(stream, app)
    c.update_parameters(contexts["Kinesis Source"], {
        "AWS Access Key ID": "local-access-key", "AWS Secret Access Key": "local-secret-key",
        "AWS Kinesis Region": "us-east-1", "AWS Kinesis Stream Name": stream, "AWS Kinesis Application Name": app,
        "AWS Kinesis Endpoint Override URL": proxy, "AWS DynamoDB Endpoint Override URL": proxy})
    c.update_parameters(contexts["Snowflake Destination"], {
        "Snowflake Account Identifier": ACCOUNT, "Snowflake Username": USER, "Snowflake Role": "KINESNOW_LOADER",
        "Snowflake Private Key File": env["key_file"], "Snowflake Destination Database": "KINESNOW",
        "Snowflake Destination Schema": "PUBLIC", "Snowflake Destination Table": table,
        "Snowflake URL Override": sf.url})

    # 5. Both processors valid; start the group.
    for name, pid in processors.items():
        v = c.processor_validation(pid)
        assert v["status"] == "VALID", (name, v)
    c.set_process_group_state(group["id"], "RUNNING")

    # 6. Records put into the stream arrive in the table.
    put(stream, RECORDS)
    deadline = time.monotonic() + 120
    count = 0
    while time.monotonic() < deadline:
        count = sf.query(f"SELECT COUNT(DISTINCT ID) AS N FROM KINESNOW.PUBLIC.{table}")[0]["N"]
        if count == RECORDS:
            break
        time.sleep(0.5)
    assert count == RECORDS, f"{count} of {RECORDS} records in the table"
    c.set_process_group_state(group["id"], "STOPPED")


def run_apply(nifi, login_dir: str, ca_file: str, group: str, work: str) -> tuple[subprocess.CompletedProcess, str]:
    """apply.py --definition with the secured NiFi's login (password from a file) and `ca_file`; (run, password)."""
    username, password = read_login(login_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("NIFI_PASSWORD", "NIFI_USERNAME")}
    return subprocess.run([sys.executable, os.path.join(REPO, "parameter-contexts", "apply.py"),
                           "--nifi", nifi.client.base_url, "--username", username,
                           "--password-file", os.path.join(login_dir, "password"), "--ca-file", ca_file,
                           "--definition", DEFINITION, "--variant", "local", "--group", group,
                           "--set", f"KINESNOW_WORK={work}", "--set", "SNOWFLAKE_URL=https://127.0.0.1:1"],
                          capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL), password


def test_apply_py_logs_in_and_trusts_only_the_given_ca(env, tmp_path):
    nifi = env["nifi"]
    instance_env = read_instance_env(nifi.instance_dir)
    help_text = subprocess.run([sys.executable, os.path.join(REPO, "parameter-contexts", "apply.py"), "--help"],
                               capture_output=True, text=True, check=True).stdout
    for flag in ("--username", "--password-file", "--ca-file", "--insecure-skip-verify", "NIFI_PASSWORD"):
        assert flag in help_text, flag

    # Another CA than the one that signed NiFi's certificate: refused before any login is sent.
    other = tmp_path / "other-ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other CA",
                    "-keyout", str(tmp_path / "other-ca.key"), "-out", str(other)], check=True, capture_output=True)
    refused, password = run_apply(nifi, instance_env["LOGIN_DIR"], str(other), "refused", env["work"])
    assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr, refused.stderr[-2000:]

    done, _ = run_apply(nifi, instance_env["LOGIN_DIR"], instance_env["CA_FILE"], "applied by apply.py", env["work"])
    assert done.returncode == 0, done.stderr[-3000:]
    ids = json.loads(done.stdout)
    c = nifi.client
    assert {p["component"]["name"] for p in c.process_group_flow(ids["group"])["processors"]} == \
        {"ConsumeKinesis", "PutSnowflake"}
    for run in (refused, done):
        assert password not in run.stdout + run.stderr
