#!/usr/bin/env python3
"""Puts sample JSON messages (shaped like the example message of Snowflake's Kinesis connector docs,
with varied keys so schema evolution shows) into a Kinesis stream, forever or --count times."""

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "lib"))
from services import kinesis_call  # noqa: E402

NAMES = ["Steve", "Ana", "Kenji", "Olu", "Marta", "Priya", "Lars"]
COFFEE = ["Espresso", "Doppio", "Ristretto", "Lungo", "Cortado"]


def message(i: int) -> dict:
    m = {
        "id": i,
        "name": random.choice(NAMES),
        "body_temperature": round(random.uniform(36.0, 37.5), 1),
        "approved_coffee_types": random.sample(COFFEE, k=random.randint(1, 4)),
        "animals_possessed": {"dogs": random.random() < 0.5, "cats": random.random() < 0.5},
        "options": {"can_walk": True, "can_talk": random.random() < 0.3},
        "date_added": time.strftime("%Y-%m-%d"),
    }
    if i % 5 == 0:
        m["favourite_colour"] = random.choice(["green", "blue", "orange"])  # a key that appears later
    return m


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--endpoint", default="http://127.0.0.1:4568")
    p.add_argument("--stream", default="kinesnow-demo")
    p.add_argument("--rate", type=float, default=20.0, help="messages per second")
    p.add_argument("--count", type=int, default=0, help="0 = forever")
    args = p.parse_args()
    i = 1
    while args.count == 0 or i <= args.count:
        batch = [message(i + k) for k in range(10)]
        kinesis_call("PutRecords", {"StreamName": args.stream, "Records": [
            {"PartitionKey": str(m["id"] % 16), "Data": __import__("base64").b64encode(json.dumps(m).encode()).decode()}
            for m in batch]}, endpoint=args.endpoint)
        i += len(batch)
        time.sleep(len(batch) / args.rate)


if __name__ == "__main__":
    main()
