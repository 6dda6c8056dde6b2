#!/usr/bin/env python3
"""The newest figure of each measured claim the user pages quote: `bench/results/summary.json`.

Benchmarks write it (`--record-summary PREFIX` on bench/sink.sh, bench/consume-source.sh, bench/pipeline.sh and
bench/chaos.sh: each figure of the run under `PREFIX.`), and `tests/docs/check_docs.py` fails when a page marks a
figure (`<!-- figure: KEY -->` right after it) that is not the summary's. The file holds

- `figures`: KEY -> {value, unit, measured (UTC), commit, command, section (of BENCHMARKS.md)}; a new run replaces
  the keys it measured and leaves the others as they were, each with its own date and commit;
- `derived`: KEY -> {expr, unit}: arithmetic over figures (`v('KEY')`), such as a per-core rate from a CPU cost, so
  that a new run updates those too.

`python3 bench/summary.py` prints every figure and derived value, newest first.
"""

import ast
import json
import os
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SUMMARY = os.path.join(REPO, "bench", "results", "summary.json")


def load(path: str = SUMMARY) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def head_commit() -> str:
    out = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def record(prefix: str, figures: dict, command: str, section: str = "", commit: str = "", path: str = SUMMARY) -> None:
    """Writes `figures` (name -> (value, unit)) under `prefix.name`, measured now at `commit` (default: HEAD)."""
    summary = load(path) if os.path.exists(path) else {"figures": {}, "derived": {}}
    measured = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for name, (value, unit) in figures.items():
        entry = {"value": round(value, 4) if isinstance(value, float) else value, "unit": unit, "measured": measured,
                 "commit": commit or head_commit(), "command": command}
        if section:
            entry["section"] = section
        summary["figures"][f"{prefix}.{name}"] = entry
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    print(f"{len(figures)} figure(s) recorded under {prefix}. in {os.path.relpath(path, REPO)}", file=sys.stderr)


class UnknownFigure(KeyError):
    pass


def value(summary: dict, key: str):
    """A figure's value, or a derived one computed from figures."""
    if key in summary.get("figures", {}):
        return summary["figures"][key]["value"]
    derived = summary.get("derived", {}).get(key)
    if derived is None:
        raise UnknownFigure(key)
    return evaluate(derived["expr"], lambda k: value(summary, k))


ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Call, ast.Name, ast.Load, ast.Add, ast.Sub,
           ast.Mult, ast.Div, ast.USub)


def evaluate(expr: str, lookup) -> float:
    """Arithmetic (+ - * /, numbers, `v('KEY')`) and nothing else."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, ALLOWED) or (isinstance(node, ast.Name) and node.id != "v"):
            raise ValueError(f"not allowed in a derived figure: {ast.dump(node)[:60]} in {expr!r}")
    return eval(compile(tree, "<derived figure>", "eval"), {"__builtins__": {}}, {"v": lookup})


def main() -> int:
    summary = load()
    rows = sorted(summary["figures"].items(), key=lambda kv: kv[1].get("measured", ""), reverse=True)
    for key, f in rows:
        print(f"{key:62} {f['value']!s:>10}  {f['unit']}  ({f.get('measured', '?')}, {f.get('commit', '?')})")
    for key, d in sorted(summary.get("derived", {}).items()):
        print(f"{key:62} {value(summary, key):10.3f}  {d['unit']}  (= {d['expr']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
