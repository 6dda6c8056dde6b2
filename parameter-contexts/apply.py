#!/usr/bin/env python3
"""Applies the parameter contexts and the Kinesis -> Snowflake flow to a NiFi through its REST API.

    parameter-contexts/apply.py --nifi http://127.0.0.1:8080/nifi-api --variant local \
        --set KINESNOW_WORK=/path --set SNOWFLAKE_URL=https://127.0.0.1:8443

A secured NiFi (NiFi 2.x's default: HTTPS and a login):

    NIFI_PASSWORD=... parameter-contexts/apply.py --nifi https://nifi.example.com:8443/nifi-api \
        --username admin --ca-file nifi-ca.pem --definition parameter-contexts/flow/kinesis-to-snowflake.json \
        --variant template

logs in as NiFi's login page does (username and password for the login identity provider NiFi is set up with,
such as the single-user one NiFi 2.x starts with) and trusts the CA in --ca-file (PEM; without it, the system's
CAs). The password comes from the environment variable NIFI_PASSWORD, else from --password-file, else from a
prompt that does not echo it; it is never printed. NiFi's default self-signed certificate: export its CA as PEM
from conf/truststore.p12 (`keytool -exportcert -rfc -alias <alias> -keystore conf/truststore.p12`) and pass it
as --ca-file. --insecure-skip-verify turns certificate and host name checks off: for a throw-away lab NiFi only.

Creates the source and destination contexts (from template/ or local/), a context inheriting both,
a process group bound to it, ConsumeKinesis -> PutSnowflake with every property bound to its
parameter (processor-bindings.json), and prints the ids as JSON. ${NAME} in context values is
replaced by --set NAME=value. `--variant openflow` instead creates Openflow's single `Kinesis`
context (openflow/kinesis.json, Openflow's ten parameters) and binds only those: PutSnowflake then
uses Openflow's managed token (SNOWFLAKE_HOST and the SPCS token files in NiFi's environment).
"""

import argparse
import getpass
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
from nifi_client import NiFiClient  # noqa: E402

CONSUMER = "io.kinesnow.nifi.processors.ConsumeKinesis"
SINK = "io.kinesnow.nifi.processors.PutSnowflake"


def load_context(variant: str, name: str, substitutions: dict) -> dict:
    with open(os.path.join(HERE, variant, name), encoding="utf-8") as f:
        text = f.read()
    for key, value in substitutions.items():
        text = text.replace("${%s}" % key, value)
    return json.loads(text)


def apply(client: NiFiClient, variant: str, substitutions: dict, group_name: str, context_suffix: str = "") -> dict:
    """`context_suffix` is appended to the context names (NiFi wants them unique), for a second copy of the flow."""
    if variant == "openflow":
        return apply_openflow(client, substitutions, group_name, context_suffix)
    ids = []
    for file in ("kinesis-source.json", "snowflake-destination.json"):
        doc = load_context(variant, file, substitutions)
        ids.append(client.create_parameter_context(doc["name"] + context_suffix, doc["parameters"], doc["description"])["id"])
    combined = client.post("parameter-contexts", {
        "revision": {"version": 0},
        "component": {"name": f"{group_name} ({variant}){context_suffix}", "parameters": [],
                      "inheritedParameterContexts": [{"id": i, "component": {"id": i}} for i in ids]}})
    group = client.create_process_group(group_name, parameter_context_id=combined["id"])
    ids = {"source_context": ids[0], "destination_context": ids[1], "context": combined["id"], "group": group["id"]}
    return {**ids, **add_flow(client, group["id"], bindings())}


def apply_openflow(client: NiFiClient, substitutions: dict, group_name: str, context_suffix: str = "") -> dict:
    """Openflow's shape: one context named `Kinesis` with exactly the ten parameters of Openflow's Kinesis
    connector; the processors bind only to those, PutSnowflake authenticates with Openflow's managed token."""
    doc = load_context("openflow", "kinesis.json", substitutions)
    context = client.create_parameter_context(doc["name"] + context_suffix, doc["parameters"], doc["description"])["id"]
    group = client.create_process_group(group_name, parameter_context_id=context)
    ids = {"source_context": context, "destination_context": context, "context": context, "group": group["id"]}
    return {**ids, **add_flow(client, group["id"], bindings({p["name"] for p in doc["parameters"]}, "openflow"))}


def bindings(parameters=None, variant: str = "") -> dict:
    """processor-bindings.json: {processor: {property: value}}, each bound property as a parameter reference;
    with `parameters`, only the properties whose parameter is among them; then the variant's fixed values."""
    with open(os.path.join(HERE, "processor-bindings.json"), encoding="utf-8") as f:
        doc = json.load(f)
    out = {}
    for processor in ("ConsumeKinesis", "PutSnowflake"):
        out[processor] = {k: "#{%s}" % v for k, v in doc[processor].items() if parameters is None or v in parameters}
        out[processor].update(doc.get(f"{processor} fixed", {}))
        if variant:
            out[processor].update(doc.get(f"{processor} fixed ({variant})", {}))
    return out


def add_flow(client: NiFiClient, group_id: str, properties: dict) -> dict:
    """ConsumeKinesis -> PutSnowflake in the group, with what no processor takes queued in front of funnels."""
    consumer = client.add_processor(group_id, CONSUMER, name="ConsumeKinesis",
                                    properties=properties["ConsumeKinesis"], position=(0, 0))
    sink = client.add_processor(group_id, SINK, name="PutSnowflake", properties=properties["PutSnowflake"],
                                auto_terminate=["success"], position=(0, 300))
    records = client.connect(group_id, consumer["id"], sink["id"], ["success"])
    # Records NiFi must not lose but no processor takes wait in visible queues in front of funnels.
    unparsed = funnel(client, group_id, (400, 0))
    rejected = funnel(client, group_id, (400, 300))
    parse_failure = client.connect(group_id, consumer["id"], unparsed, ["parse.failure"], destination_type="FUNNEL")
    failed = client.connect(group_id, sink["id"], rejected, ["failure", "invalid"], destination_type="FUNNEL")
    return {"consumer": consumer["id"], "sink": sink["id"], "records_queue": records["id"],
            "parse_failure_queue": parse_failure["id"], "failure_queue": failed["id"]}


def import_definition(client: NiFiClient, definition_file: str, variant: str, substitutions: dict,
                      group_name: str) -> dict:
    """Imports the versioned flow definition (as the canvas's "Upload flow definition" does), then fills the
    parameter contexts NiFi created for it with the variant's values (sensitive ones included)."""
    with open(definition_file, encoding="utf-8") as f:
        definition = json.load(f)
    group = client.upload_flow_definition(definition, group_name)
    bound = client.get_parameter_context(group["component"]["parameterContext"]["id"])
    if variant == "openflow":
        doc = load_context("openflow", "kinesis.json", substitutions)
        client.update_parameters(bound["id"], {p["name"]: p["value"] for p in doc["parameters"] if p["value"] is not None})
        return {**processors_of(client, group["id"]), "source_context": bound["id"]}
    contexts = {c["component"]["name"]: c["id"] for c in bound["component"]["inheritedParameterContexts"]}
    for file in ("kinesis-source.json", "snowflake-destination.json"):
        doc = load_context(variant, file, substitutions)
        wanted = [n for n in contexts if n.split(" (")[0] == doc["name"].split(" (")[0]]
        if not wanted:
            raise SystemExit(f"the definition did not bring a context named like '{doc['name']}'")
        client.update_parameters(contexts[wanted[0]], {p["name"]: p["value"] for p in doc["parameters"]
                                                        if p["value"] is not None})
    return {**processors_of(client, group["id"]),
            "source_context": contexts[[n for n in contexts if n.startswith("Kinesis Source")][0]]}


def processors_of(client: NiFiClient, group_id: str) -> dict:
    flow = client.get(f"flow/process-groups/{group_id}")["processGroupFlow"]["flow"]
    by_name = {p["component"]["name"]: p["id"] for p in flow["processors"]}
    return {"group": group_id, "consumer": by_name["ConsumeKinesis"], "sink": by_name["PutSnowflake"],
            "connections": {c["component"]["selectedRelationships"][0]: c["id"] for c in flow["connections"]}}


def funnel(client: NiFiClient, group_id: str, position: tuple) -> str:
    entity = client.post(f"process-groups/{group_id}/funnels", {
        "revision": {"version": 0}, "component": {"position": {"x": position[0], "y": position[1]}}})
    return entity["id"]


def password(args: argparse.Namespace):
    """The login's password: $NIFI_PASSWORD, else --password-file's content (one trailing newline dropped), else
    a prompt without echo; None without --username."""
    if not args.username:
        return None
    if os.environ.get("NIFI_PASSWORD"):
        return os.environ["NIFI_PASSWORD"]
    if args.password_file:
        with open(args.password_file, encoding="utf-8") as f:
            text = f.read()
        return text[:-1] if text.endswith("\n") else text
    return getpass.getpass(f"NiFi password for {args.username}: ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nifi", default="http://127.0.0.1:8080/nifi-api")
    parser.add_argument("--variant", choices=["local", "template", "openflow"], default="local")
    parser.add_argument("--group", default="Kinesis to Snowflake")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--definition", metavar="FILE",
                        help="import this flow definition (flow/kinesis-to-snowflake.json) instead of building the flow")
    parser.add_argument("--export", metavar="FILE", help="after building the flow, save it as a flow definition")
    secured = parser.add_argument_group("secured NiFi (HTTPS and a login, NiFi 2.x's default)")
    secured.add_argument("--username", default=os.environ.get("NIFI_USERNAME"),
                         help="log in with this username (default: $NIFI_USERNAME; none: no login)")
    secured.add_argument("--password-file", metavar="FILE",
                         help="read the password from FILE (used when $NIFI_PASSWORD is not set; "
                              "with neither, the password is prompted for without echo)")
    secured.add_argument("--ca-file", metavar="PEM", help="trust only this CA certificate (PEM) for NiFi's HTTPS "
                                                          "certificate (default: the system's CAs)")
    secured.add_argument("--insecure-skip-verify", action="store_true",
                         help="LABS ONLY: do not check NiFi's certificate nor its host name")
    args = parser.parse_args()
    substitutions = dict(s.split("=", 1) for s in args.set)
    client = NiFiClient(args.nifi, username=args.username, password=password(args),
                        ca_file=args.ca_file, insecure_skip_verify=args.insecure_skip_verify)
    if args.definition:
        ids = import_definition(client, args.definition, args.variant, substitutions, args.group)
    else:
        ids = apply(client, args.variant, substitutions, args.group)
        if args.export:
            with open(args.export, "w", encoding="utf-8") as f:
                json.dump(client.download_flow_definition(ids["group"]), f, indent=2, sort_keys=True)
                f.write("\n")
    print(json.dumps(ids, indent=2))


if __name__ == "__main__":
    main()
