"""The docs gate's figure check (check_docs.check_figures) on pages made up here: a stale figure fails it, the
newest passes, and so do the repository's own pages against bench/results/summary.json.

Run by the docs gate of tests/run-all.sh: python3 -m pytest -q tests/docs/test_check_docs.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import check_docs  # noqa: E402

SUMMARY = {
    "figures": {
        "consume.16.LINE_DELIMITED.cpu": {"value": 5.4, "unit": "CPU-s"},
        "consume.16.FLOW_FILE.cpu": {"value": 20.8, "unit": "CPU-s"},
        "sink.1ch.sdk_over_engine": {"value": 2.47, "unit": "ratio"},
        "sink.8ch.sdk_over_engine": {"value": 1.87, "unit": "ratio"},
        "chaos.records": {"value": 161700, "unit": "records"},
        "chaos.nar": {"value": "49f4299", "unit": "commit"},
    },
    "derived": {
        "sink.1ch.engine_over_sdk": {"expr": "1 / v('sink.1ch.sdk_over_engine')", "unit": "ratio"},
        "sink.8ch.engine_over_sdk": {"expr": "1 / v('sink.8ch.sdk_over_engine')", "unit": "ratio"},
    },
}


def problems_of(page: str, md: str = "README.md") -> list:
    problems: list = []
    check_docs.check_figures(md, page, problems, SUMMARY)
    return problems


def test_the_newest_figures_pass():
    page = (
        "| CPU | 5.4<!-- figure: consume.16.LINE_DELIMITED.cpu --> CPU-s, **20.8**<!-- figure: consume.16.FLOW_FILE.cpu --> "
        "(BENCHMARKS) |\n"
        "The engine needs 0.40-0.53x<!-- figure: sink.1ch.engine_over_sdk sink.8ch.engine_over_sdk --> the SDK's CPU.\n"
        "An hour: 161,700<!-- figure: chaos.records --> records on the NAR of `49f4299`<!-- figure: chaos.nar -->.\n"
        "About 5<!-- figure: consume.16.LINE_DELIMITED.cpu -->.\n"
    )
    assert problems_of(page) == []


def test_a_stale_figure_fails():
    page = "| CPU | 12.1<!-- figure: consume.16.LINE_DELIMITED.cpu --> CPU-s (BENCHMARKS) |\n"
    problems = problems_of(page)
    assert len(problems) == 1 and "says 12.1, the newest measurement gives 5.4" in problems[0], problems


def test_a_stale_range_fails():
    page = "the SDK's Rust core needs 0.5-0.9x<!-- figure: sink.1ch.engine_over_sdk sink.8ch.engine_over_sdk --> ours\n"
    problems = problems_of(page)
    assert len(problems) == 1 and "newest measurements give 0.4-0.5" in problems[0], problems


def test_a_stale_commit_and_an_unknown_key_fail():
    page = "on the NAR of `abc1234`<!-- figure: chaos.nar --> with 3<!-- figure: chaos.nodes --> nodes\n"
    problems = problems_of(page)
    assert len(problems) == 2, problems
    assert "no figure chaos.nodes" in problems[1]


def test_a_marker_with_no_figure_before_it_fails():
    assert problems_of("the figure<!-- figure: chaos.records --> is gone\n")


def test_a_figure_citing_benchmarks_without_a_marker_fails_on_user_pages_only():
    line = "RECORD costs about 2.6-2.8x LINE_DELIMITED's CPU (BENCHMARKS.md, \"Record strategies\")\n"
    assert problems_of(line, md="docs/overview.md")
    assert problems_of(line, md="BENCHMARKS.md") == []


def test_rounding_is_to_the_decimals_the_page_writes():
    assert check_docs.rounded(0.5348, "0.53") == "0.53"
    assert check_docs.rounded(3.96, "4") == "4"
    assert check_docs.rounded(20.8, "21") == "21"
    assert check_docs.rounded(161700, "161700") == "161700"


def test_the_repository_pages_carry_the_newest_figures():
    summary = check_docs.bench_summary.load(check_docs.SUMMARY)
    problems: list = []
    for md in check_docs.markdown_files():
        with open(os.path.join(check_docs.REPO, md), encoding="utf-8") as f:
            check_docs.check_figures(md, f.read(), problems, summary)
    assert problems == []


def test_an_issue_number_on_a_user_page_fails():
    problems: list = []
    check_docs.check_issue_numbers("docs/guarantees.md", "| Upgrading from a version before issue 15 |\n", problems)
    check_docs.check_issue_numbers("docs/overview.md", "fixed in #52, PKCS#8 keys\n", problems)
    check_docs.check_issue_numbers("CHANGELOG.md", "| Documentation (issue 37) |\n", problems)
    assert [p.split(":")[0] for p in problems] == ["docs/guarantees.md", "docs/overview.md"], problems
