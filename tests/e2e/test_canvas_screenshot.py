"""The flow as a user sees it: NiFi's own web UI (the Angular app of nifi-ui, inside nifi-server-nar, so
the assembled NiFi serves it at /nifi/) rendered by a headless Chromium (Debian's chromium package,
installed by ensure-chromium.sh when /usr/bin/chromium is missing) while records flow.

Checks through the REST API that both processors are RUNNING and valid and that neither they nor their
group have WARNING or ERROR bulletins; then loads the canvas of the process group
(http://127.0.0.1:<port>/nifi/#/process-groups/<id>) and checks the rendered page itself: both processors
drawn, each with the "running" status icon; and takes a screenshot, kept as
tests/e2e/artifacts/canvas.png (not committed), which must be a real picture (PNG of the window's size,
many colours, no colour covering nearly all of it). KINESNOW_UPDATE_DOCS=1 also copies it to
docs/canvas.png, the image in the README.

Then opens ConsumeKinesis' View State the way a user does (view_state_shot.mjs: puppeteer-core driving the same
Chromium right-clicks the processor on the canvas and clicks "View State" in its menu), once the processor's
local state has a shard: the dialog must list each shard the REST API shows, with its lease counter and what
it waits for, and its screenshot (tests/e2e/artifacts/view-state.png; with KINESNOW_UPDATE_DOCS=1 also
docs/view-state.png, the image in docs/monitoring.md and the README) must be a real picture as above.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

import iam_proxy
from png_stats import png_stats
from services import AwsJsonError, dynamodb_call, kinesis_call, local_services  # noqa: F401  (session fixture)
from standin import Standin, make_key_pair

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "parameter-contexts"))
import apply as flow  # noqa: E402

ARTIFACTS = os.path.join(HERE, "artifacts")
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1600, 1000
RUN = str(int(time.time()))
TABLE = "KINESNOW.PUBLIC.EVENTS"


def chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        subprocess.run([os.path.join(HERE, "ensure-chromium.sh")], check=True, timeout=900)
    return CHROMIUM


def headless(browser: str, profile: str, url: str, *args: str) -> subprocess.CompletedProcess:
    """One headless Chromium run. --virtual-time-budget lets the single-page app load, call the REST API
    and draw the canvas before the page is captured."""
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
                           f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=20000", *args, url],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def running_flow(local_services, shared_nifi, tmp_path_factory):
    """The flow in the session's shared NiFi (tests/e2e/conftest.py), which loaded the built NAR."""
    work = str(tmp_path_factory.mktemp("kinesnow-canvas"))
    _, public_key = make_key_pair(os.path.join(work, "snowflake"))
    stream = f"canvas-{RUN}"
    sf = Standin.start(os.path.join(work, "standin"), commit_lag_ms=500)
    try:
        sf.register_user("kinesnow-local", "KINESNOW", public_key)
        sf.sql(f"CREATE TABLE {TABLE} (ID NUMBER) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")
        kinesis_call("CreateStream", {"StreamName": stream, "ShardCount": 2})
        time.sleep(1)
        nifi = shared_nifi
        try:
            c = nifi.client
            ids = flow.apply(c, "local", {"KINESNOW_WORK": work, "SNOWFLAKE_URL": sf.url}, "Kinesis to Snowflake")
            proxy = iam_proxy.proxy_for(stream, f"{stream}-app")  # Snowflake's IAM policy (tests/lib/iam_proxy.py)
            c.update_parameters(ids["source_context"], {"AWS Kinesis Stream Name": stream,
                                                        "AWS Kinesis Application Name": f"{stream}-app",
                                                        "AWS Kinesis Endpoint Override URL": proxy,
                                                        "AWS DynamoDB Endpoint Override URL": proxy})
            c.start_processor(ids["consumer"])
            c.start_processor(ids["sink"])
            for start in range(0, 500, 250):
                kinesis_call("PutRecords", {"StreamName": stream, "Records": [
                    {"PartitionKey": f"k{i % 7}",
                     "Data": base64.b64encode(('{"id": %d, "kind": "view", "user": "u%d"}' % (i, i % 13)).encode()).decode()}
                    for i in range(start, start + 250)]})
            deadline = time.monotonic() + 120
            while sf.query(f"SELECT COUNT(*) AS N FROM {TABLE}")[0]["N"] < 500 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert sf.query(f"SELECT COUNT(*) AS N FROM {TABLE}")[0]["N"] == 500, "records flow into the table"
            yield {"nifi": nifi, "ids": ids, "work": work}
        finally:
            nifi.clean()  # the flow stopped and removed before the stand-in, the stream and the table go
    finally:
        sf.stop()
        for call, action, target in ((kinesis_call, "DeleteStream", {"StreamName": stream}),
                                     (dynamodb_call, "DeleteTable", {"TableName": f"{stream}-app"})):
            try:  # the emulators are shared; kinesis-local limits the open shards of all streams together
                call(action, target)
            except AwsJsonError:
                pass


def test_both_processors_run_without_bulletins(running_flow):
    c, ids = running_flow["nifi"].client, running_flow["ids"]
    for pid in (ids["consumer"], ids["sink"]):
        assert c.processor_state(pid) == "RUNNING"
        assert c.processor_validation(pid)["status"] == "VALID"
    bulletins = c.bulletins(group_id=ids["group"]) + c.bulletins(source_id=ids["consumer"]) + \
        c.bulletins(source_id=ids["sink"])
    bad = [(b.get("sourceName"), b.get("level"), b.get("message")) for b in bulletins
           if b.get("level") in ("WARNING", "WARN", "ERROR")]
    assert not bad, bad


def test_the_canvas_shows_the_running_flow(running_flow):
    nifi, ids = running_flow["nifi"], running_flow["ids"]
    base = f"http://127.0.0.1:{nifi.port}/nifi/"
    with urllib.request.urlopen(base, timeout=30) as r:
        index = r.read().decode()
    assert "<nifi" in index and re.search(r'<script src="main-[^"]+\.js"', index), "NiFi serves its web UI"
    browser = chromium()
    url = f"{base}#/process-groups/{ids['group']}"
    profile = os.path.join(running_flow["work"], "chromium-profile")

    dom = headless(browser, profile, url, "--dump-dom").stdout
    for pid, name in ((ids["consumer"], "ConsumeKinesis"), (ids["sink"], "PutSnowflake")):
        start = dom.find(f'id="id-{pid}"')
        assert start >= 0, f"{name} is not drawn on the canvas"
        end = dom.find('class="processor component', dom.find(">", start))  # the next processor's box
        drawn = dom[start:end if end > 0 else len(dom)]
        assert name in drawn, f"{name}'s name is not on its box"
        status = re.search(r'class="run-status-icon ([a-z-]+)', drawn)
        assert status and status.group(1) == "running", f"{name} is drawn as {status and status.group(1)}"

    os.makedirs(ARTIFACTS, exist_ok=True)
    png = os.path.join(ARTIFACTS, "canvas.png")
    if os.path.exists(png):
        os.remove(png)
    shot = headless(browser, profile, url, f"--screenshot={png}")
    assert os.path.exists(png), f"no screenshot: {shot.stderr[-2000:]}"
    stats = png_stats(png)
    print(f"\ncanvas screenshot: {png} {stats}")
    assert_real_picture(png, stats)
    if os.environ.get("KINESNOW_UPDATE_DOCS") == "1":
        os.makedirs(os.path.join(REPO, "docs"), exist_ok=True)
        shutil.copyfile(png, os.path.join(REPO, "docs", "canvas.png"))


def assert_real_picture(png: str, stats: dict) -> None:
    assert os.path.getsize(png) > 20_000, "the screenshot is suspiciously small"
    assert (stats["width"], stats["height"]) == (WIDTH, HEIGHT)
    assert stats["colors"] > 100, f"hardly anything is drawn: {stats}"
    assert stats["dominant_share"] < 0.95, f"one colour covers nearly the whole picture: {stats}"


def test_view_state_shows_each_shard(running_flow):
    nifi, ids = running_flow["nifi"], running_flow["ids"]
    c = nifi.client
    deadline = time.monotonic() + 60  # View State is written at most every 5 s
    shards = []
    while time.monotonic() < deadline:
        state = c.local_state(ids["consumer"])
        shards = sorted(k for k in state if k.startswith("shardId-"))
        if len(shards) == 2 and all("waits for" in state[k] for k in shards):
            break
        time.sleep(1)
    assert len(shards) == 2, f"ConsumeKinesis' local state has no line for each of the 2 shards: {state}"

    browser = chromium()
    url = f"http://127.0.0.1:{nifi.port}/nifi/#/process-groups/{ids['group']}"
    os.makedirs(ARTIFACTS, exist_ok=True)
    png = os.path.join(ARTIFACTS, "view-state.png")
    for old in (png, png + ".failed.png"):
        if os.path.exists(old):
            os.remove(old)
    started = time.monotonic()
    shot = subprocess.run(["node", os.path.join(HERE, "view_state_shot.mjs"), url, ids["consumer"], png,
                           str(WIDTH), str(HEIGHT)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "KINESNOW_CHROMIUM": browser})
    assert shot.returncode == 0, f"the View State dialog was not shown (see {png}.failed.png): {shot.stderr[-3000:]}"
    seen = json.loads(shot.stdout.strip().splitlines()[-1])
    print(f"\nView State screenshot in {time.monotonic() - started:.1f} s; the dialog says:\n{seen['text']}")

    text = seen["text"]
    assert "View State" in seen["menu"], seen["menu"]
    assert "Component State" in text and "ConsumeKinesis" in text, text
    for shard in shards:
        line = next((row for row in text.splitlines() if row.startswith(shard)), None)
        assert line, f"the dialog has no row for {shard}: {text}"
        assert "lease counter" in line and "checkpoint" in line and "waits for" in line, line
        # What an operator opens the dialog for comes before the long checkpoint the column cuts.
        assert line.index("ms behind the tip") < line.index("waits for") < line.index("checkpoint"), line
    for key in ("node", "updated"):
        assert re.search(rf"^{key}\b", text, re.M), f"the dialog has no {key} row: {text}"

    stats = png_stats(png)
    print(f"View State screenshot: {png} {stats}")
    assert_real_picture(png, stats)
    if os.environ.get("KINESNOW_UPDATE_DOCS") == "1":
        os.makedirs(os.path.join(REPO, "docs"), exist_ok=True)
        shutil.copyfile(png, os.path.join(REPO, "docs", "view-state.png"))
