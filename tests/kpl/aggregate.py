"""Aggregates user records into KPL aggregates with aws-kinesis-agg (run with the venv python of
venv.sh), for the end-to-end tests.

stdin:  a JSON list of groups, each a list of user records [partition_key, data], data UTF-8 text or, for
        binary records (Avro), {"b64": base64};
stdout: a JSON list, one entry per group: {"partition_key", "explicit_hash_key", "data_b64"} -- the
        Kinesis record to put, as the aggregator made it (one aggregate per group; a group that does not
        fit into one aggregate is an error). The package's own de-aggregator reads each aggregate back
        and must find the same records.
"""

import base64
import json
import sys

# aggregator first: it puts the package folder on sys.path, which its messages_pb2 needs.
from aws_kinesis_agg.aggregator import RecordAggregator
from aws_kinesis_agg.deaggregator import iter_deaggregate_records


def data_bytes(data) -> bytes:
    return base64.b64decode(data["b64"]) if isinstance(data, dict) else data.encode("utf-8")


def aggregate(group):
    agg = RecordAggregator()
    for partition_key, data in group:
        if agg.add_user_record(partition_key, data_bytes(data)) is not None:
            raise SystemExit("a group does not fit into one aggregate")
    partition_key, explicit_hash_key, blob = agg.clear_and_get().get_contents()
    read_back = [
        (r["kinesis"]["partitionKey"], base64.b64decode(r["kinesis"]["data"]))
        for r in iter_deaggregate_records([{"kinesis": {
            "kinesisSchemaVersion": "1.0", "sequenceNumber": "1", "partitionKey": partition_key,
            "approximateArrivalTimestamp": 0.0, "data": base64.b64encode(blob)}}])
    ]
    if read_back != [(key, data_bytes(data)) for key, data in group]:
        raise SystemExit("the package's de-aggregator does not read the aggregate back")
    return {"partition_key": partition_key, "explicit_hash_key": explicit_hash_key,
            "data_b64": base64.b64encode(blob).decode("ascii")}


def main():
    groups = json.load(sys.stdin)
    json.dump([aggregate(g) for g in groups], sys.stdout)


if __name__ == "__main__":
    main()
