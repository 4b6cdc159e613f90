"""A method record carries its headline result or says why it has none; the reasons that mean
'not copied yet' are counted as a gap by `specatlas stats`."""

import datetime as dt
import subprocess
import sys

import pytest

from specatlas.catalog.validate import validate

TODAY = dt.date(2026, 12, 1)
METHOD = """id: gamma2024case
title: Gamma Case Study of Speculation
authors: [Ada Alpha]
year: 2024
month: 2
venue: arXiv
arxiv: '2402.00003'
taxonomy:
  drafting: [independent-tuning-free]
  verification: [speculative-sampling]
  scope: [{scope}]
lossless: true
summary: >-
  A small model drafts several tokens and the large model checks them in one pass. Rejection sampling keeps the output distribution exact.
reported_results: []
{extra}"""


def _problems(make_catalog, scope="llm-text-generation", extra=""):
    root = make_catalog()
    (root / "papers" / "gamma2024case.yaml").write_text(METHOD.format(scope=scope, extra=extra), encoding="utf-8")
    problems, _, _ = validate(root=root, today=TODAY)
    return [str(p) for p in problems], root


def test_method_without_result_or_reason_is_named_by_file_line_and_field(make_catalog):
    problems, _ = _problems(make_catalog)
    assert problems == ["papers/gamma2024case.yaml:15: reported_results: is empty for a method record (drafting/verification "
                        "tags); copy the paper's headline result, or set no_result_reason to one of survey | theory | position "
                        "| benchmark | analysis | no-speed-metric | not-yet-recorded saying why"]


def test_a_reason_satisfies_the_rule(make_catalog):
    assert _problems(make_catalog, extra="no_result_reason: theory\n")[0] == []


@pytest.mark.parametrize("scope", ["survey", "analysis", "benchmark"])
def test_studies_of_methods_need_no_result(make_catalog, scope):
    assert _problems(make_catalog, scope=scope)[0] == []


def test_an_unknown_reason_is_refused(make_catalog):
    problems, _ = _problems(make_catalog, extra="no_result_reason: too-hard\n")
    assert len(problems) == 1 and problems[0].startswith("papers/gamma2024case.yaml:16: no_result_reason: ")


def test_stats_counts_records_not_yet_recorded_as_a_gap(make_catalog):
    problems, root = _problems(make_catalog, extra="no_result_reason: not-yet-recorded\n")
    assert problems == []
    env = {"SPECATLAS_ROOT": str(root), "PATH": ""}
    out = subprocess.run([sys.executable, "-m", "specatlas", "stats"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "with a reported result: 2/3   without: not-yet-recorded: 1" in out.stdout
    assert "gap: 1 records report a result the catalog has not recorded yet" in out.stdout
