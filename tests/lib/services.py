"""Local Kinesis (kinesis-local) and DynamoDB (dynalite) emulators for pytest, via
tests/services/local-services.sh. Standard library only (pytest optional).

In a conftest.py:

    from services import local_services      # session fixture: starts the emulators if they are not
                                              # running, stops them at session end only if it started them
    def test_x(local_services):
        kinesis_call("CreateStream", {"StreamName": "s1", "ShardCount": 1}, local_services.kinesis_endpoint)

Without pytest:  svc = ensure_services(); ...; svc.stop_if_started()
Ports follow the same environment variables as the script: KINESIS_PORT (4568), KINESIS_TLS_PORT (4567),
DYNAMODB_PORT (4571); SERVICES_STATE_DIR for PID files and logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tests", "services", "local-services.sh")

# Dummy credentials/region the emulators accept (they check that a SigV4-shaped header is present).
ACCESS_KEY_ID = "test"
SECRET_ACCESS_KEY = "test"
REGION = "us-east-1"
KINESIS_ACCOUNT_ID = "000000000000"  # kinesis-local's default account (stream ARNs)


def kinesis_endpoint() -> str:
    return f"http://127.0.0.1:{os.environ.get('KINESIS_PORT', '4568')}"


def dynamodb_endpoint() -> str:
    return f"http://127.0.0.1:{os.environ.get('DYNAMODB_PORT', '4571')}"


class AwsJsonError(Exception):
    """An emulator answered with a non-2xx status (or not at all, status None)."""

    def __init__(self, target: str, url: str, status: Optional[int], body: str):
        self.target, self.url, self.status, self.body = target, url, status, body
        try:
            self.error_type = json.loads(body).get("__type", "")
        except (ValueError, AttributeError):
            self.error_type = ""
        super().__init__(f"{target} at {url} -> HTTP {status}: {body[:1000]}")


def aws_json_call(endpoint: str, target: str, payload: dict, json_version: str = "1.1",
                  timeout: float = 30.0) -> dict:
    """POST an AWS JSON-protocol call (X-Amz-Target) with a dummy SigV4-shaped Authorization header."""
    req = urllib.request.Request(endpoint.rstrip("/") + "/", data=json.dumps(payload).encode(), method="POST", headers={
        "Content-Type": f"application/x-amz-json-{json_version}",
        "X-Amz-Target": target,
        "X-Amz-Date": "20260101T000000Z",
        "Authorization": (f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/20260101/{REGION}/x/aws4_request, "
                          "SignedHeaders=host;x-amz-date, Signature=0"),
    })
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read().decode()
    except urllib.error.HTTPError as e:
        raise AwsJsonError(target, endpoint, e.code, e.read().decode(errors="replace")) from None
    except (urllib.error.URLError, OSError) as e:
        raise AwsJsonError(target, endpoint, None, str(getattr(e, "reason", e))) from None
    return json.loads(text) if text.strip() else {}


def kinesis_call(action: str, payload: dict, endpoint: Optional[str] = None) -> dict:
    """e.g. kinesis_call("CreateStream", {"StreamName": "s", "ShardCount": 1})"""
    return aws_json_call(endpoint or kinesis_endpoint(), f"Kinesis_20131202.{action}", payload, "1.1")


def dynamodb_call(action: str, payload: dict, endpoint: Optional[str] = None) -> dict:
    """e.g. dynamodb_call("ListTables", {})"""
    return aws_json_call(endpoint or dynamodb_endpoint(), f"DynamoDB_20120810.{action}", payload, "1.0")


def _script(command: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, command], capture_output=True, text=True, timeout=timeout)


def services_running() -> bool:
    """True if both emulators (started by local-services.sh) are up and answering."""
    return _script("status", timeout=60).returncode == 0


@dataclass
class LocalServices:
    kinesis_endpoint: str
    dynamodb_endpoint: str
    started_by_us: bool

    def stop_if_started(self) -> None:
        """Stop the emulators only if ensure_services() started them."""
        if self.started_by_us:
            stop_services()


def ensure_services() -> LocalServices:
    """Start the emulators unless they are already running; returns their endpoints."""
    started = False
    if not services_running():
        proc = _script("start")
        if proc.returncode != 0:
            raise RuntimeError(f"local-services.sh start failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        started = True
    return LocalServices(kinesis_endpoint(), dynamodb_endpoint(), started)


def stop_services() -> None:
    proc = _script("stop", timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"local-services.sh stop failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is optional for this module
    pytest = None

if pytest is not None:
    @pytest.fixture(scope="session")
    def local_services():
        """Session fixture: emulators up for the session; stopped at the end if this session started them."""
        svc = ensure_services()
        yield svc
        svc.stop_if_started()
