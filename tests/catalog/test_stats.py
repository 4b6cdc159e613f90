"""`specatlas stats`: counts by posted month make coverage gaps visible."""

import subprocess
import sys
from types import SimpleNamespace

from specatlas.catalog.records import posted_month
from specatlas.catalog.stats import month_counts


def paper(arxiv=None, year=2025, month=None):
    return SimpleNamespace(arxiv=arxiv, year=year, month=month)


def test_posted_month_prefers_the_arxiv_id_then_the_record_date():
    assert posted_month(paper("2604.12989", year=2026, month=9)) == "2026-04"
    assert posted_month(paper("cs/0112017", year=2001, month=12)) == "2001-12"  # old-style id: the record's date
    assert posted_month(paper(None, year=2024, month=3)) == "2024-03"
    assert posted_month(paper(None, year=2024)) is None


def test_month_counts_list_empty_months_between_first_and_last():
    counts = month_counts([paper("2511.00001"), paper("2511.00002"), paper("2602.00003"), paper(None, 2020)])
    assert counts == {"2025-11": 2, "2025-12": 0, "2026-01": 0, "2026-02": 1, "unknown": 1}


def test_stats_cli_prints_the_month_grid_and_newest_month(make_catalog):
    root = make_catalog()
    env = {"SPECATLAS_ROOT": str(root), "PATH": ""}
    out = subprocess.run([sys.executable, "-m", "specatlas", "stats"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "posted month" in out.stdout and "newest posted month covered: 2024-" in out.stdout
    json_out = subprocess.run([sys.executable, "-m", "specatlas", "stats", "--json"], env=env, capture_output=True, text=True)
    assert '"posted_month"' in json_out.stdout
