"""NiFi's record services for the benchmarks of issue 18 (bench/consume_source.py's RECORD strategies and
bench/put_records.py): JsonTreeReader, JsonRecordSetWriter, AvroReader and AvroRecordSetWriter from
nifi-record-serialization-services-nar (in the test NiFi of tests/nifi/assemble.sh), created in a process group
and enabled before any processor that uses them starts; and the checks that a processor of this build has the
properties a strategy needs, so that a run against a build without them stops with a clear message instead of
an INVALID processor.

Properties are given by display name and sent by property name (NiFi 2.3.0 keeps older names for some, e.g.
JsonTreeReader's "Schema Access Strategy" is "schema-access-strategy").
"""

from __future__ import annotations


def service(client, group: str, type_name: str, properties: dict) -> str:
    """A controller service of `type_name` in `group`, configured and ENABLED; returns its id."""
    entity = client.create_controller_service(group, type_name)
    names = {d["displayName"]: n for n, d in entity["component"]["descriptors"].items()}
    named = {names.get(k, k): v for k, v in properties.items()}
    unknown = sorted(k for k in named if k not in entity["component"]["descriptors"])
    if unknown:
        raise SystemExit(f"{type_name} has no properties {unknown}: is this NiFi's record services NAR 2.3.0?")
    client.put(f"controller-services/{entity['id']}",
               {"revision": client._revision(f"controller-services/{entity['id']}"),
                "component": {"id": entity["id"], "properties": named}})
    client.set_controller_service_state(entity["id"], "ENABLED")
    return entity["id"]


def json_reader(client, group: str) -> str:
    return service(client, group, "JsonTreeReader", {"Schema Access Strategy": "infer-schema"})


def json_writer(client, group: str) -> str:
    return service(client, group, "JsonRecordSetWriter", {"Schema Write Strategy": "no-schema",
                                                          "Output Grouping": "output-oneline"})


def avro_reader(client, group: str, schema_text: str = "") -> str:
    """An AvroReader of bare datums with `schema_text`, or (no text) of container files with their embedded schema."""
    if schema_text:
        return service(client, group, "AvroReader", {"Schema Access Strategy": "schema-text-property",
                                                     "Schema Text": schema_text})
    return service(client, group, "AvroReader", {"Schema Access Strategy": "embedded-avro-schema"})


def avro_writer(client, group: str) -> str:
    return service(client, group, "AvroRecordSetWriter", {"Schema Write Strategy": "avro-embedded"})


def descriptors(client, processor_id: str) -> dict:
    return client.get_processor(processor_id)["component"]["config"]["descriptors"]


def require(client, processor_id: str, what: str, properties: dict) -> None:
    """Stops the benchmark with a clear message unless the processor has every property of `properties`
    (display name -> value) and, where the property lists allowable values, the value is one of them."""
    desc = descriptors(client, processor_id)
    by_display = {d["displayName"]: d for d in desc.values()}
    for name, value in properties.items():
        d = by_display.get(name) or desc.get(name)
        if d is None:
            raise SystemExit(f"{what} needs the property {name!r}, which this build of the processor does not have "
                             f"(issue 18's feature is not in this NAR yet?). Its properties: {sorted(by_display)}")
        allowed = [a["allowableValue"]["value"] for a in d.get("allowableValues") or []]
        if allowed and value not in allowed and not d.get("identifiesControllerService"):
            raise SystemExit(f"{what} needs {name!r} = {value!r}, which this build of the processor does not allow "
                             f"(allowed: {allowed}): issue 18's feature is not in this NAR yet?")


def auto_terminate_all(client, processor_id: str) -> None:
    """Auto-terminates every relationship the processor has now (they may depend on its properties)."""
    rels = client.get_processor(processor_id)["component"].get("relationships") or []
    client.set_auto_terminated(processor_id, [r["name"] for r in rels])
