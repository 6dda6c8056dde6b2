#!/usr/bin/env python3
"""Checks the user-facing Markdown (README.md, CHANGELOG.md, BENCHMARKS.md, docs/, the processors'
additionalDetails.md) against the repository:

- every relative link names a file that exists, and its #anchor a heading of that file (GitHub's slugs);
- every repository path written in backticks (`tests/run-all.sh`, `parameter-contexts/flow/...json`) exists;
- every command in a fenced shell block or in backticks that runs one of the repository's scripts names a script
  that exists and is executable, and each --option it passes appears in that script (its usage);
- every warning and error the engine logs (`warn!`/`error!` in rust-core/src) and the processors log
  (`getLogger().warn/error`) is in docs/troubleshooting.md: the longest literal part of its message (between
  placeholders; its first 60 characters) must appear there. Messages with no literal part of 12 characters or more are passed through from
  elsewhere and are covered by that page's last section;
- every measured figure a user page (README.md, docs/, the processors' additionalDetails.md) quotes is the newest
  measurement: the page marks it with `<!-- figure: KEY -->` right after it (a range `a-b` with several keys: the
  lowest and highest of them), and the figure must be the value of KEY in bench/results/summary.json (which the
  benchmarks write, see bench/summary.py), rounded as the page writes it; a line that cites BENCHMARKS with a
  decimal figure or a ratio and carries no marker is a problem too;
- no user page (all but CHANGELOG.md and BENCHMARKS.md) cites an internal issue number.

Prints each problem and exits 1 if there is any. Run from anywhere: python3 tests/docs/check_docs.py
"""

import os
import re
import sys
from decimal import ROUND_HALF_EVEN, Decimal

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOP = {"bench", "build", "demo", "docs", "fuzz", "java-shim", "nar-packaging", "nar-packaging-aws", "parameter-contexts",
       "rust-core", "tests", ".ci"}
SCRIPT = re.compile(r"(?:^|\s)(\./)?((?:tests|bench|demo|parameter-contexts|build|\.ci)/[\w./-]+\.(?:sh|py)|demo\.sh|mvnw|run)"
                    r"((?:[ \t]+[^\s`|;&#]+)*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
TICKED = re.compile(r"`([^`\s]+)`")
MARKER = re.compile(r"<!--\s*figure:\s*([^>]*?)\s*-->")
NUMBER = r"\d[\d,]*(?:\.\d+)?"
# The figure right before a marker: a number or a range, then perhaps a unit sign and the end of bold or code.
FIGURE_BEFORE = re.compile(rf"({NUMBER})(?:\s*(?:-|–|to)\s*({NUMBER}))?\s*(?:x|×|%)?[*`]*\s*$")
SUMMARY = os.path.join(REPO, "bench", "results", "summary.json")
sys.path.insert(0, os.path.join(REPO, "bench"))
import summary as bench_summary  # noqa: E402  (bench/summary.py: the figures and their derived values)


def markdown_files():
    files = ["README.md", "CHANGELOG.md", "BENCHMARKS.md"]
    files += [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(REPO, "docs"))) if f.endswith(".md")]
    docs = os.path.join("java-shim", "src", "main", "resources", "docs")
    for root, _, names in os.walk(os.path.join(REPO, docs)):
        files += [os.path.relpath(os.path.join(root, n), REPO) for n in names if n.endswith(".md")]
    return files


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: str) -> set:
    with open(path, encoding="utf-8") as f:
        return {slug(line.lstrip("#")) for line in f if line.startswith("#")}


def without_code_blocks(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def check_links(md: str, text: str, problems: list) -> None:
    base = os.path.dirname(os.path.join(REPO, md))
    for target in LINK.findall(without_code_blocks(text)):
        if re.match(r"[a-z]+:", target):
            continue  # an address, not a file here
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(base, path)) if path else os.path.join(REPO, md)
        if not os.path.exists(full):
            problems.append(f"{md}: link to {target}: no such file")
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            problems.append(f"{md}: link to {target}: no heading with that anchor")


def check_paths(md: str, text: str, problems: list) -> None:
    for ticked in TICKED.findall(text):
        path = ticked.rstrip(".,:;")
        if "/" not in path or path.split("/")[0] not in TOP or re.search(r"[<>${}*\[\]]|\.\.\.|/target/", path):
            continue  # not a path here, a pattern, or what a build makes
        path = path.split("#")[0].split(":")[0]
        if not os.path.exists(os.path.join(REPO, path)):
            problems.append(f"{md}: `{ticked}`: no such file or directory")


def commands(text: str):
    """Lines of fenced shell blocks, and backticked text with a space in it (a bare path is a reference, not a run)."""
    for block in re.findall(r"```(?:bash|sh|shell)?\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            yield line.split("#")[0].strip()
    for ticked in re.findall(r"`([^`]+)`", without_code_blocks(text)):
        if " " in ticked.strip():
            yield ticked


def usage_text(script: str) -> str:
    """The script's text, and that of the Python program of the same name it hands its options to (`x-y.sh` runs
    `x_y.py`), where there is one."""
    with open(script, encoding="utf-8", errors="replace") as f:
        text = f.read()
    program = os.path.join(os.path.dirname(script), os.path.basename(script).rsplit(".", 1)[0].replace("-", "_") + ".py")
    if program != script and os.path.isfile(program):
        with open(program, encoding="utf-8", errors="replace") as f:
            text += f.read()
    return text


def check_commands(md: str, text: str, problems: list) -> None:
    for command in commands(text):
        for match in SCRIPT.finditer(command):
            script = match.group(2)
            full = os.path.join(REPO, script)
            if script == "run" or not os.path.isfile(full):
                if script != "run" and "/" in script and script.split("/")[0] in TOP:
                    problems.append(f"{md}: `{command}`: {script} does not exist")
                continue
            if not os.access(full, os.X_OK):
                problems.append(f"{md}: `{command}`: {script} is not executable")
            source = usage_text(full)
            for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", match.group(3) or ""):
                if option not in source:
                    problems.append(f"{md}: `{command}`: {script} knows no {option}")


def logged_messages():
    """(where, message template) of every warning and error the engine and the processors log."""
    src = os.path.join(REPO, "rust-core", "src")
    for root, _, names in os.walk(src):
        for name in sorted(names):
            path = os.path.join(root, name)
            if not name.endswith(".rs") or name in ("tests.rs", "model.rs", "failover_model.rs", "layers.rs") or "/tests" in path:
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            cut = text.find("#[cfg(test)]\nmod tests")
            text = text[:cut] if cut > 0 else text
            for m in re.finditer(r"\b(?:warn|error)!\(", text):
                depth, end = 0, m.end() - 1
                for end in range(m.end() - 1, len(text)):
                    depth += {"(": 1, ")": -1}.get(text[end], 0)
                    if depth == 0:
                        break
                literals = re.findall(r'"((?:[^"\\]|\\[\s\S])*)"', text[m.start():end])
                message = re.sub(r"\\\n\s*", "", "".join(literals))
                yield f"{os.path.relpath(path, REPO)}:{text[:m.start()].count(chr(10)) + 1}", message
    java = os.path.join(REPO, "java-shim", "src", "main", "java")
    for root, _, names in os.walk(java):
        for name in sorted(names):
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for m in re.finditer(r'getLogger\(\)\.(?:warn|error)\("((?:[^"\\]|\\.)*)"', text):
                yield f"{os.path.relpath(path, REPO)}:{text[:m.start()].count(chr(10)) + 1}", m.group(1)


def check_troubleshooting(problems: list) -> None:
    with open(os.path.join(REPO, "docs", "troubleshooting.md"), encoding="utf-8") as f:
        page = re.sub(r"[`'\\]", "", f.read())
    for where, message in logged_messages():
        parts = [p.strip(" ;:,.()'") for p in re.split(r"\{[^}]*\}", message.replace("\\'", "'"))]
        longest = max(parts, key=len, default="").replace("'", "")[:60]
        if len(longest) >= 12 and longest not in page:
            problems.append(f"docs/troubleshooting.md: no entry for the message at {where}: \"{longest}\"")


def rounded(value: float, like: str) -> str:
    """`value` with as many decimals as `like` has (half to even, on the value's shortest decimal form)."""
    places = len(like.split(".")[1]) if "." in like else 0
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))


def figure_problem(before: str, keys: list, summary: dict):
    """Why the figure at the end of `before` is not the summary's for `keys`, or None."""
    try:
        values = [bench_summary.value(summary, k) for k in keys]
    except bench_summary.UnknownFigure as e:
        return f"no figure {e.args[0]} in bench/results/summary.json"
    if not keys:
        return "a figure marker without a key"
    if all(isinstance(v, str) for v in values):
        written = before.rstrip(" `*")
        return None if len(values) == 1 and written.endswith(values[0]) else f"says {written[-20:]!r}, the summary {values}"
    m = FIGURE_BEFORE.search(before)
    if not m:
        return f"no figure right before the marker (\"...{before[-30:]}\")"
    low, high = m.group(1).replace(",", ""), (m.group(2) or "").replace(",", "")
    if high:
        want_low, want_high = rounded(min(values), low), rounded(max(values), high)
        if (want_low, want_high) != (low, high):
            return f"says {low}-{high}, the newest measurements give {want_low}-{want_high}"
        return None
    wrong = sorted({rounded(v, low) for v in values} - {low})
    return f"says {low}, the newest measurement gives {', '.join(wrong)}" if wrong else None


def user_page(md: str) -> bool:
    return md not in ("BENCHMARKS.md", "CHANGELOG.md") and md != os.path.join("docs", "testing.md")


def check_figures(md: str, text: str, problems: list, summary: dict) -> None:
    """Marked figures against the summary; lines citing BENCHMARKS with a figure but no marker."""
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)  # line numbers kept
    for number, line in enumerate(prose.splitlines(), 1):
        line = re.sub(r"`[^`]*<!--[^`]*`", "", line)  # a marker shown as code is an example, not a figure
        for m in MARKER.finditer(line):
            problem = figure_problem(MARKER.sub("", line[:m.start()]), m.group(1).split(), summary)
            if problem:
                problems.append(f"{md}:{number}: figure {m.group(1)}: {problem}")
        if (user_page(md) and "BENCHMARKS" in line and not MARKER.search(line)
                and re.search(rf"{NUMBER}\.\d|\b\d+(?:\.\d+)?x\b", line)):
            problems.append(f"{md}:{number}: cites BENCHMARKS with a figure but marks none (<!-- figure: KEY -->)")


def check_issue_numbers(md: str, text: str, problems: list) -> None:
    """User pages speak of versions and behaviour: no internal issue numbers (CHANGELOG.md and BENCHMARKS.md may)."""
    if md in ("BENCHMARKS.md", "CHANGELOG.md"):
        return
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(r"\bissues? #?\d+|(?<![\w&])#\d+\b", line, flags=re.I):
            problems.append(f"{md}:{number}: cites an internal issue number; say the version or the behaviour")


def main() -> int:
    problems: list = []
    check_troubleshooting(problems)
    summary = bench_summary.load(SUMMARY)
    for md in markdown_files():
        with open(os.path.join(REPO, md), encoding="utf-8") as f:
            text = f.read()
        check_links(md, text, problems)
        check_paths(md, text, problems)
        check_commands(md, text, problems)
        check_figures(md, text, problems, summary)
        check_issue_numbers(md, text, problems)
    for p in problems:
        print(p)
    print(f"{len(markdown_files())} Markdown files checked: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
