"""The site reads nothing outside its catalog: a folder beside the checkout changes no page, and
the published numbers it shows come from results/published/, which must be there and well formed."""

import json
import os
import subprocess
import sys

import pytest

from sitecatalog import make_root
from specatlas.bench.published import SPEC_BENCH_FILE, PublishedDataError, load_spec_bench
from specatlas.site.catalog import load_catalog
from specatlas.site.mkdocs_build import build

DECOY = {"source": "decoy", "url": "https://example.org/decoy", "licence": "none", "settings": "decoy",
         "hardware": {"X": "Decoy GPU"},
         "rows": [{"device": "X", "target_model": "Decoy-7B", "method": "DECOY", "Overall": 99.0}]}


def built_files(site):
    # the compressed sitemap's gzip header holds the build time
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*"))
            if p.is_file() and p.name != "sitemap.xml.gz"}


def test_a_shared_folder_beside_the_catalog_changes_nothing(tmp_path):
    root = make_root(tmp_path / "checkout" / "catalog")
    build(tmp_path / "alone", load_catalog(root))
    decoys = tmp_path / "checkout" / "shared" / "data"
    (decoys / "spec_bench").mkdir(parents=True)
    (decoys / "spec_bench" / "reported_leaderboard.json").write_text(json.dumps(DECOY), encoding="utf-8")
    (decoys / "speculative_decoding_papers_list.json").write_text('{"papers": []}', encoding="utf-8")
    build(tmp_path / "beside-shared", load_catalog(root))
    alone, beside = built_files(tmp_path / "alone"), built_files(tmp_path / "beside-shared")
    assert alone.keys() == beside.keys() and len(alone) > 60
    assert [name for name in alone if alone[name] != beside[name]] == []
    assert b"Vicuna-7B-v1.3" in alone["results/index.html"] and b"Decoy" not in alone["results/index.html"]


@pytest.mark.parametrize("content, message", [
    (None, "results/published/spec-bench-leaderboard.json is missing"),
    ("{", "results/published/spec-bench-leaderboard.json is not valid JSON"),
    ("[" * 100_000, "results/published/spec-bench-leaderboard.json is not valid JSON: nested too deeply"),
    (json.dumps({**DECOY, "rows": []}), "results/published/spec-bench-leaderboard.json: rows: lists no rows"),
    (json.dumps({**DECOY, "rows": [{"device": "X", "method": "M", "Overall": 2.0}]}), "row 1 has no target_model"),
    (json.dumps({**DECOY, "rows": [{**DECOY["rows"][0], "Overall": "fast"}]}), "row 1: Overall must be numbers"),
    (json.dumps({key: value for key, value in DECOY.items() if key != "licence"}), "licence: Field required"),
])
def test_missing_or_malformed_published_numbers_are_named_in_one_line(tmp_path, content, message):
    path = tmp_path / SPEC_BENCH_FILE
    if content is not None:
        path.parent.mkdir(parents=True)
        path.write_text(content, encoding="utf-8")
    with pytest.raises(PublishedDataError) as raised:
        load_spec_bench(tmp_path)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_site_build_stops_when_the_published_numbers_are_missing(tmp_path):
    root = make_root(tmp_path / "catalog")
    (root / SPEC_BENCH_FILE).unlink()
    result = subprocess.run([sys.executable, "-m", "specatlas", "site", "build", "--out", str(tmp_path / "site")],
                            cwd=root, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "SPECATLAS_ROOT": str(root), "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert "specatlas: results/published/spec-bench-leaderboard.json is missing" in errors[0]
    assert not (tmp_path / "site").exists()
