#!/usr/bin/env python3
"""The NAR's LICENSE and NOTICE (licenses/nar/, copied into each NAR's META-INF/ by the NAR poms), regenerated and
compared with the committed ones. Fails when they differ, when a dependency's licence is not on an allow-list, or
when a built NAR's copies are not these.

- The native library: cargo-about (tests/licenses/cargo-about.sh installs it) lists the crates kinesnow-core's
  cdylib links for x86_64 Linux (normal dependencies; no dev- or build-dependencies) by licence, with each licence's
  text, from the crates' own manifests and license files (licenses/about.toml); `--fail` makes
  a licence outside about.toml's `accepted` list an error. A crate shipping a NOTICE file has it copied into NOTICE,
  as the Apache License asks.
- The Java side: license-maven-plugin's `add-third-party` on java-shim lists the processors jar's runtime
  dependencies (what the NAR bundles beside it; NiFi provides the rest), failing on a licence outside the allow-list
  in the root pom.
- Each NAR built (nar-packaging*/target/*.nar): its META-INF/LICENSE and NOTICE equal licenses/nar/, and it bundles
  no jar but the processors jar (the Java list covers nothing else).

    python3 tests/licenses/check.py            # check (tests/run-all.sh runs this after the NAR is built)
    python3 tests/licenses/check.py --write    # regenerate licenses/nar/ after a dependency change
    python3 tests/licenses/check.py --full     # regenerate and compare even when the inputs did not change

--write also records the digest of what the lists are made from (Cargo.lock, licenses/about.toml, every pom.xml)
in licenses/nar/INPUTS.sha256. While those are unchanged, the check compares the digest instead of running
cargo-about (whose install is a long compile and whose scan takes minutes): a new or updated dependency changes
Cargo.lock or a pom, and then the full check runs (and fails until the lists are regenerated and committed).
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAR_DIR = os.path.join(REPO, "licenses", "nar")
TARGET = "x86_64-unknown-linux-gnu"
JAVA_LIST = "java-shim/target/generated-sources/license/THIRD-PARTY.txt"
RULE = "=" * 80


def run(cmd, **kw):
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-4000:]}{done.stdout[-2000:]}")
    return done.stdout


def cargo_about(reuse=None):
    """cargo-about's answer as JSON: every licence with its text and the crates under it, and every crate."""
    if reuse:
        with open(reuse, encoding="utf-8") as f:
            return json.load(f)
    run(["cargo", "fetch", "--locked", "--manifest-path", "rust-core/Cargo.toml"])  # the sources it reads, offline
    about = run(["bash", "tests/licenses/cargo-about.sh"]).strip().splitlines()[-1]
    return json.loads(run([about, "generate", "--fail", "--offline", "--locked", "--target", TARGET,
                           "-c", "licenses/about.toml", "-m", "rust-core/Cargo.toml", "--format", "json"]))


def rust_licenses(about):
    """Each licence cargo-about chose, the crates under it, and its text as the first of those crates ships it."""
    parts = []
    for licence in about["licenses"]:
        crates = sorted({(u["crate"]["name"], u["crate"]["version"]) for u in licence["used_by"]})
        parts += ["", "-" * 80, f"{licence['name']} ({licence['id']}), for:"]
        parts += [f"  {name} {version}" for name, version in crates]
        parts += ["", licence["text"].replace("\r\n", "\n").replace("\r", "\n").strip("\n")]
    return "\n".join(parts)


def crate_notices(about):
    """The NOTICE files of the crates cargo-about lists, with their crate's name and version."""
    notices = []
    for crate in sorted(about["crates"], key=lambda c: (c["package"]["name"], c["package"]["version"])):
        package = crate["package"]
        folder = os.path.dirname(package["manifest_path"])
        for entry in sorted(os.listdir(folder)):
            if entry.upper().startswith("NOTICE") and os.path.isfile(os.path.join(folder, entry)):
                with open(os.path.join(folder, entry), encoding="utf-8", errors="replace") as f:
                    notices.append((f"{package['name']} {package['version']}", f.read().strip()))
    return notices


def java_third_party():
    mvnw = ["./mvnw", "-B", "-q", "-DskipCargo=true", "-pl", "java-shim", "license:add-third-party"]
    run(["bash", "-c", "source build/java-home.sh && \"$@\"", "mvnw", *mvnw])
    with open(os.path.join(REPO, JAVA_LIST), encoding="utf-8") as f:
        return f.read().strip()


def nar_license(rust, java):
    with open(os.path.join(REPO, "LICENSE"), encoding="utf-8") as f:
        own = f.read().rstrip()
    return "\n".join([
        own, "", RULE,
        "THIRD-PARTY COMPONENTS",
        "",
        "This NAR bundles, besides kinesnow's own code (under the license above), the following third-party",
        "components under their own licenses.",
        "",
        f"META-INF/bundled-dependencies/native/libkinesnow_core.so links these Rust crates ({TARGET}),",
        "grouped by license, each license's text following its list:",
        rust.strip(),
        "", RULE,
        "Java libraries bundled in META-INF/bundled-dependencies/ besides kinesnow-processors:",
        "",
        java,
        "",
    ])


def nar_notice(notices):
    with open(os.path.join(REPO, "NOTICE"), encoding="utf-8") as f:
        own = f.read().split("\n\n")[0].rstrip()  # the project's name and copyright
    parts = [own, "", "This NAR bundles third-party components; their licenses are listed in META-INF/LICENSE."]
    if notices:
        parts += ["", "NOTICE files of the bundled Rust crates, as they ship them:"]
        for name, text in notices:
            parts += ["", RULE, name, RULE, text]
    else:
        parts += ["None of the bundled Rust crates ships a NOTICE file."]
    return "\n".join(parts) + "\n"


DIGEST = os.path.join(NAR_DIR, "INPUTS.sha256")


def inputs_digest():
    """The SHA-256 of what the lists are made from: Cargo.lock, the cargo-about config and every pom.xml."""
    import hashlib
    paths = ["Cargo.lock", "licenses/about.toml"] + sorted(
        os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "**", "pom.xml"), recursive=True)
        if "/target/" not in p and "/.work/" not in p and "/node_modules/" not in p)
    h = hashlib.sha256()
    for rel in paths:
        h.update(rel.encode() + b"\0")
        with open(os.path.join(REPO, rel), "rb") as f:
            h.update(f.read() + b"\0")
    return h.hexdigest()


def inputs_unchanged():
    return os.path.exists(DIGEST) and open(DIGEST, encoding="utf-8").read().strip() == inputs_digest()


def committed_lists():
    return {name: open(os.path.join(NAR_DIR, name), encoding="utf-8").read() for name in ("LICENSE", "NOTICE")}


def nar_problems(expected):
    problems = []
    for nar in sorted(glob.glob(os.path.join(REPO, "nar-packaging*/target/*.nar"))):
        with zipfile.ZipFile(nar) as z:
            names = set(z.namelist())
            for name, text in expected.items():
                entry = f"META-INF/{name}"
                if entry not in names:
                    problems.append(f"{os.path.relpath(nar, REPO)} has no {entry}")
                elif z.read(entry).decode("utf-8") != text:
                    problems.append(f"{os.path.relpath(nar, REPO)}: {entry} is not licenses/nar/{name} (rebuild the NAR)")
            jars = sorted(n for n in names if n.startswith("META-INF/bundled-dependencies/") and n.endswith(".jar"))
            others = [j for j in jars if not os.path.basename(j).startswith("kinesnow-processors-")]
            if others:
                problems.append(f"{os.path.relpath(nar, REPO)} bundles jars the Java list does not cover: {others}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write licenses/nar/LICENSE and NOTICE anew")
    parser.add_argument("--about-json", metavar="FILE",
                        help="cargo-about's JSON answer from an earlier run (cargo about generate --format json), "
                             "instead of running it (minutes)")
    parser.add_argument("--full", action="store_true",
                        help="run cargo-about and Maven's licence goal even when the inputs' digest is unchanged")
    parser.add_argument("--inputs-changed", action="store_true",
                        help="only say (exit 0) whether the inputs changed since the lists were made, so the full "
                             "check (and cargo-about) is needed; exit 1 when they did not")
    args = parser.parse_args()
    if args.inputs_changed:
        return 1 if inputs_unchanged() else 0
    if not args.write and not args.full and not args.about_json and inputs_unchanged():
        problems = nar_problems(committed_lists())
        for p in problems:
            print(f"licenses: {p}", file=sys.stderr)
        print(f"licenses: the inputs are those the lists were made from (licenses/nar/INPUTS.sha256); "
              f"the built NARs: {len(problems)} problem(s)")
        return 1 if problems else 0
    about = cargo_about(args.about_json)
    expected = {
        "LICENSE": nar_license(rust_licenses(about), java_third_party()),
        "NOTICE": nar_notice(crate_notices(about)),
    }
    problems = []
    for name, text in expected.items():
        path = os.path.join(NAR_DIR, name)
        if args.write:
            os.makedirs(NAR_DIR, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            continue
        committed = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if committed != text:
            problems.append(f"licenses/nar/{name} is not what the dependencies give: "
                            "run python3 tests/licenses/check.py --write and commit it")
    if args.write:
        with open(DIGEST, "w", encoding="utf-8") as f:
            f.write(inputs_digest() + "\n")
        print("licenses: wrote licenses/nar/LICENSE, NOTICE and INPUTS.sha256")
        return 0
    nars = glob.glob(os.path.join(REPO, "nar-packaging*/target/*.nar"))
    problems += nar_problems(expected)
    for p in problems:
        print(f"licenses: {p}", file=sys.stderr)
    checks = len(expected) + 3 * len(nars)  # per NAR: its LICENSE, its NOTICE, its bundled jars
    print(f"licenses: {checks - len(problems)} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
