"""Every deliberately broken record yields its expected file:line: field: message, never a
traceback, and nothing is reported against the valid records beside it."""

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from specatlas.catalog.validate import validate

BROKEN = Path(__file__).resolve().parent.parent / "fixtures" / "broken"
CASES = sorted(p.name for p in BROKEN.iterdir() if p.is_dir())
TODAY = dt.date(2026, 12, 1)


def test_fixture_set_is_large_enough():
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES)
def test_broken_record_is_reported_precisely(case, make_catalog):
    root = make_catalog(BROKEN / case)
    problems, _, _ = validate(root=root, today=TODAY)
    lines = [str(p) for p in problems]
    expected = (BROKEN / case / "expected.txt").read_text(encoding="utf-8").splitlines()
    for want in expected:
        assert any(line.startswith(want) for line in lines), f"expected {want!r}\ngot:\n" + "\n".join(lines)
    assert all(not p.file.startswith(("papers/alpha", "papers/beta")) for p in problems), lines


def test_all_problems_reported_in_one_pass(make_catalog):
    papers = make_catalog() / "papers"
    root = papers.parent
    for i, case in enumerate(("float-arxiv", "html-in-summary", "yaml-syntax-error", "venue-not-controlled")):
        text = (BROKEN / case / "gamma2024case.yaml").read_text(encoding="utf-8")
        text = text.replace("gamma2024case", f"gamma2024case{i}").replace("Gamma Case", f"Gamma{i} Case").replace("[gamma", f"[gamma{i}")
        text = text.replace("2402.00003", f"2402.0001{i}")
        (papers / f"gamma2024case{i}.yaml").write_text(text, encoding="utf-8")
    problems, _, _ = validate(root=root, today=TODAY)
    assert {p.file for p in problems} == {f"papers/gamma2024case{i}.yaml" for i in range(4)}


def test_cli_exit_codes_and_json(make_catalog):
    clean = make_catalog()
    env_ok = {"SPECATLAS_ROOT": str(clean), "PATH": ""}
    ok = subprocess.run([sys.executable, "-m", "specatlas", "validate"], env=env_ok, capture_output=True, text=True)
    assert ok.returncode == 0 and "ok: 2 records" in ok.stderr

    broken = clean / "papers" / "gamma2024case.yaml"
    broken.write_bytes((BROKEN / "bad-encoding" / "gamma2024case.yaml").read_bytes())
    bad = subprocess.run([sys.executable, "-m", "specatlas", "validate", "--format", "json"], env=env_ok, capture_output=True, text=True)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    import json

    report = json.loads(bad.stdout)
    assert report["ok"] is False
    assert report["problems"][0] == {"file": "papers/gamma2024case.yaml", "line": 5, "field": "(encoding)",
                                     "message": "byte 0xe9 is not UTF-8; save the file as UTF-8"}


def test_paths_argument_limits_report_but_sees_whole_catalog(make_catalog):
    root = make_catalog(BROKEN / "same-paper-same-arxiv")
    only_alpha, _, _ = validate([root / "papers" / "alpha2023drafting.yaml"], root=root, today=TODAY)
    assert only_alpha == []
    only_new, _, _ = validate([root / "papers" / "gamma2024case.yaml"], root=root, today=TODAY)
    assert "arxiv" in {p.field for p in only_new}
    assert {p.file for p in only_new} == {"papers/gamma2024case.yaml"}
