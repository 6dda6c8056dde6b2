"""tests/nifi/nifi.sh --secure and tests/lib/nifi_client.py's login against a real NiFi 2.3.0, secured: HTTPS only
(certificate from a CA nifi.sh makes with openssl), a login and authorization. NiFi's single-user login providers
NAR is not served by the Maven repository reachable here, so this NiFi logs in through a test-only login provider
of ours (tests/nifi/test-login-nar) with the same REST login (POST /nifi-api/access/token with username and
password, bearer token) and authorizes with NiFi's file-based managed authorizer; NiFi's own single-user provider
is not what the tests run. A call without a token, a wrong password, an unknown username, a client that trusts
another CA and plain HTTP are all refused; the client logs in, and logs in again by itself when NiFi refuses its
token (401); a restart of NiFi (`--keep`) keeps the CA, the login and the keystore, and the client goes on.
Run: python3 -m pytest tests/nifi/test_secured.py -v
"""

import os
import stat
import subprocess

import pytest

from nifi_client import NiFiApiError, NiFiClient
from nifi_instance import NiFiInstance, anonymous_status, free_port, read_instance_env, read_login


@pytest.fixture(scope="module")
def nifi():
    inst = NiFiInstance.start(port=free_port(), timeout=300, secure=True)
    yield inst
    inst.stop()


def test_secured_instance_answers_only_https_with_a_login(nifi, tmp_path):
    env = read_instance_env(nifi.instance_dir)
    assert env["SECURE"] == "1" and env["URL"] == f"https://127.0.0.1:{nifi.port}/nifi-api"
    for secret in ("password", "username"):
        mode = os.stat(os.path.join(env["LOGIN_DIR"], secret)).st_mode
        assert stat.S_IMODE(mode) == 0o600, (secret, oct(mode))
    assert nifi.client.about()["version"] == "2.3.0"
    assert anonymous_status(nifi.client) == 401

    plain = NiFiClient(f"http://127.0.0.1:{nifi.port}/nifi-api", timeout=10)
    with pytest.raises(NiFiApiError) as plain_error:
        plain.about()
    assert plain_error.value.status is None, plain_error.value  # no plain HTTP port: TLS only, no HTTP answer

    username, password = read_login(env["LOGIN_DIR"])
    wrong = NiFiClient(nifi.client.base_url, username=username, password=password + "x", ca_file=env["CA_FILE"])
    with pytest.raises(NiFiApiError) as refused:
        wrong.about()
    assert refused.value.status in (400, 401, 403) and password not in str(refused.value), refused.value
    stranger = NiFiClient(nifi.client.base_url, username=username + "x", password=password, ca_file=env["CA_FILE"])
    with pytest.raises(NiFiApiError) as unknown:
        stranger.about()
    assert unknown.value.status in (400, 401, 403) and password not in str(unknown.value), unknown.value

    other = tmp_path / "other-ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other CA",
                    "-keyout", str(tmp_path / "other.key"), "-out", str(other)], check=True, capture_output=True)
    untrusting = NiFiClient(nifi.client.base_url, username=username, password=password, ca_file=str(other))
    with pytest.raises(NiFiApiError) as untrusted:
        untrusting.about()
    assert untrusted.value.status is None and "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value), untrusted.value
    assert password not in repr(nifi.client)


def test_the_client_logs_in_again_when_its_token_is_refused(nifi):
    client = nifi.client
    client.about()
    client._token = "not-a-token"  # as after its expiry: NiFi answers 401
    assert client.about()["version"] == "2.3.0"
    assert client._token and client._token != "not-a-token"


def test_a_restarted_secured_instance_keeps_its_login_and_certificate(nifi):
    env = read_instance_env(nifi.instance_dir)
    nifi.stop()
    restarted = NiFiInstance.start(port=nifi.port, instance_dir=nifi.instance_dir, keep=True, timeout=300)
    nifi.pid = restarted.pid
    again = read_instance_env(nifi.instance_dir)
    assert {k: again[k] for k in ("SECURE", "URL", "CA_FILE", "LOGIN_DIR")} == \
        {k: env[k] for k in ("SECURE", "URL", "CA_FILE", "LOGIN_DIR")}
    assert nifi.client.about()["version"] == "2.3.0"
    assert anonymous_status(restarted.client) == 401
