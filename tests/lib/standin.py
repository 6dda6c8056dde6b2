"""The Snowflake stand-in for end-to-end tests and the demo: built by its build script (once,
cached), started over plain HTTP on 127.0.0.1, stopped by its PID. A key pair for the loading user
is generated with openssl and registered; the private key is written where a Private Key File
parameter can point at it.

    with Standin.start(state_dir, port=0) as sf:
        sf.sql("CREATE TABLE DB.PUBLIC.T (ID NUMBER)")
        sf.query("SELECT COUNT(*) AS N FROM DB.PUBLIC.T")
"""

import json
import os
import re
import subprocess
import urllib.request
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, "tests", "snowflake-standin", "build.sh")


def standin_binary() -> str:
    """$STANDIN_BIN, else whatever build.sh builds (in the repository's target/suite)."""
    if os.environ.get("STANDIN_BIN"):
        return os.environ["STANDIN_BIN"]
    out = subprocess.run(["bash", BUILD], check=True, stdout=subprocess.PIPE, text=True).stdout
    path = out.strip().splitlines()[-1]
    os.environ["STANDIN_BIN"] = path
    return path


def make_key_pair(directory: str) -> tuple[str, str]:
    """A fresh RSA key pair (PKCS#8 private key file, public key PEM text), made for this run only."""
    os.makedirs(directory, exist_ok=True)
    private = os.path.join(directory, "rsa_key.p8")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", private],
                   check=True, capture_output=True)
    os.chmod(private, 0o600)
    public = subprocess.run(["openssl", "pkey", "-in", private, "-pubout"], check=True, capture_output=True,
                            text=True).stdout
    return private, public


# Snowflake's commit lag as the stand-in draws it per append (per channel, in append order): Snowflake describes the
# high-performance architecture as "end-to-end ingest to query latencies within 5 to 10 seconds" (issue 50).
SNOWFLAKE_LIKE_COMMIT_LAG = "4000-10000"


class Standin:
    def __init__(self, proc: subprocess.Popen, url: str, state_dir: str, log):
        self.proc, self.url, self.state_dir, self._log = proc, url, state_dir, log

    @classmethod
    def start(cls, state_dir: str, port: int = 0, commit_lag_ms: int | str = 1000, bench_mode: bool = False,
              in_memory: bool = False) -> "Standin":
        """`commit_lag_ms`: a fixed lag (1000) or a range each append draws its lag from ("4000-10000",
        SNOWFLAKE_LIKE_COMMIT_LAG), committed in append order per channel.
        `bench_mode`: --bench-mode (rows counted, not stored: GET /admin/bench-counts and /admin/bench-commits).
        `in_memory`: no --state-dir (catalog, channels and tables in memory, nothing written per commit); the log
        still goes to `state_dir`."""
        binary = standin_binary()
        os.makedirs(state_dir, exist_ok=True)
        log = open(os.path.join(state_dir, "standin.log"), "a")
        proc = subprocess.Popen([binary, "--plain", "--port", str(port)] + ([] if in_memory else ["--state-dir", state_dir])
                                + ["--commit-lag-ms", str(commit_lag_ms)] + (["--bench-mode"] if bench_mode else []),
                                stdout=subprocess.PIPE, stderr=log, text=True)
        line = proc.stdout.readline()
        m = re.search(r"url=(\S+)", line)
        if not m:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the stand-in did not start: {line!r}; see {state_dir}/standin.log")
        return cls(proc, m.group(1), state_dir, log)

    def admin(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def register_user(self, account: str, user: str, public_key_pem: str) -> dict:
        return self.admin("POST", "/admin/users", {"account": account, "user": user, "public_key_pem": public_key_pem})

    def sql(self, statement: str):
        return self.admin("POST", "/admin/sql", {"sql": statement})

    def query(self, sql: str) -> list:
        return self.admin("POST", "/admin/query", {"sql": sql})["rows"]

    def fault(self, fault: dict) -> dict:
        return self.admin("POST", "/admin/faults", fault)

    def clear_faults(self) -> None:
        self.admin("DELETE", "/admin/faults")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> "Standin":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
