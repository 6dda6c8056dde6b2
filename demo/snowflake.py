#!/usr/bin/env python3
"""The demo's Snowflake side, on the stand-in: `setup` registers the demo user's public key and
creates the destination table; `watch` prints the rows as they arrive, with kinesisMetadata."""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "lib"))
from standin import Standin  # noqa: E402

TABLE = "KINESNOW.PUBLIC.EVENTS"


class Remote(Standin):
    """A stand-in started elsewhere (by demo.sh): only its URL is known here."""

    def __init__(self, url: str):  # noqa: super().__init__ not wanted: no process to own
        self.url = url


def setup(sf: Remote, key_file: str) -> None:
    public = subprocess.run(["openssl", "pkey", "-in", key_file, "-pubout"], check=True, capture_output=True,
                            text=True).stdout
    sf.register_user("kinesnow-local", "KINESNOW", public)
    sf.sql(f"CREATE TABLE IF NOT EXISTS {TABLE} (ID NUMBER, NAME VARCHAR) "
           "ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE")


def watch(sf: Remote, every: float) -> None:
    seen = 0
    while True:
        count = sf.query(f"SELECT COUNT(*) AS N FROM {TABLE}")[0]["N"]
        columns = [c["name"] for c in sf.admin("GET", "/admin/tables")["tables"][0]["columns"]]
        print(f"{time.strftime('%H:%M:%S')}  {TABLE}: {count} rows (+{count - seen})  columns: {', '.join(columns)}",
              flush=True)
        if count > seen:
            for row in sf.query(f"SELECT * FROM {TABLE} ORDER BY ID DESC LIMIT 2"):
                print("   ", json.dumps(row, default=str)[:400], flush=True)
        seen = count
        time.sleep(every)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("command", choices=["setup", "watch"])
    p.add_argument("--url", required=True)
    p.add_argument("--key-file")
    p.add_argument("--every", type=float, default=5.0)
    args = p.parse_args()
    sf = Remote(args.url)
    if args.command == "setup":
        setup(sf, args.key_file)
    else:
        try:
            watch(sf, args.every)
        except (KeyboardInterrupt, OSError):
            pass  # Ctrl-C: demo.sh stops the stand-in and everything else it started


if __name__ == "__main__":
    main()
