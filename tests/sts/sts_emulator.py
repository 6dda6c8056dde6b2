#!/usr/bin/env python3
"""A real STS for the credentials tests: two moto servers (PyPI's moto, run from tests/sts/venv.sh's python).

- "sts": moto with IAM authentication on. It checks every request's signature against the IAM users
  it knows, the caller's policies, and, for AssumeRole, the role's trust policy, including the
  `sts:ExternalId` condition. Set up here (before authentication starts counting):
  - user `nifi` (its keys: "base"), allowed sts:AssumeRole;
  - user `nobody` (its keys: "denied_base"), with no policy: its AssumeRole is denied;
  - role `kinesis-reader`, trusting `nifi` with external ID "ext-kinesnow-1".
- "sts_web": moto without authentication, for AssumeRoleWithWebIdentity, which is unsigned (moto's
  authenticating server fails on unsigned requests). It accepts any token for any role.

Prints one JSON line with both endpoints, the keys and the ARNs, then serves until stdin closes or
SIGTERM, and stops both servers. Only 127.0.0.1.

    python sts_emulator.py
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import boto3
from botocore.config import Config

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/kinesis-reader"
WEB_ROLE = f"arn:aws:iam::{ACCOUNT}:role/kinesis-reader-irsa"
EXTERNAL_ID = "ext-kinesnow-1"
SETUP_ACTIONS = 7  # the IAM calls below, made before authentication starts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(no_auth_actions):
    port = free_port()
    env = dict(os.environ)
    if no_auth_actions is not None:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(no_auth_actions)
    server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    child = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
            return child, url
        except OSError:
            if child.poll() is not None:
                raise SystemExit(f"moto_server exited with {child.returncode}")
            time.sleep(0.1)
    child.kill()
    raise SystemExit("moto_server did not answer within 30 s")


def set_up(url):
    iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1", aws_access_key_id="setup",
                       aws_secret_access_key="setup", config=Config(retries={"max_attempts": 1}))
    iam.create_user(UserName="nifi")
    nifi = iam.create_access_key(UserName="nifi")["AccessKey"]
    allow = {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}
    iam.put_user_policy(UserName="nifi", PolicyName="assume", PolicyDocument=json.dumps(allow))
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/nifi"}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"sts:ExternalId": EXTERNAL_ID}}}]}
    iam.create_role(RoleName="kinesis-reader", AssumeRolePolicyDocument=json.dumps(trust))
    iam.create_user(UserName="nobody")
    nobody = iam.create_access_key(UserName="nobody")["AccessKey"]
    iam.get_user(UserName="nobody")  # the 7th action: authentication starts with the next request
    return nifi, nobody


def main():
    auth, auth_url = start(SETUP_ACTIONS)
    web, web_url = start(None)

    def stop(*_):
        for child in (auth, web):
            child.terminate()
        for child in (auth, web):
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        nifi, nobody = set_up(auth_url)
    except Exception:
        stop()
        raise
    facts = {
        "sts": auth_url,
        "sts_web": web_url,
        "base": {"id": nifi["AccessKeyId"], "secret": nifi["SecretAccessKey"]},
        "denied_base": {"id": nobody["AccessKeyId"], "secret": nobody["SecretAccessKey"]},
        "role_arn": ROLE,
        "external_id": EXTERNAL_ID,
        "web_role_arn": WEB_ROLE,
        "pids": [auth.pid, web.pid],
    }
    print(json.dumps(facts), flush=True)
    try:
        sys.stdin.read()  # until the test closes our stdin (or dies)
    finally:
        stop()


if __name__ == "__main__":
    main()
