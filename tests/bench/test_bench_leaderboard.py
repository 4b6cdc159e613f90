"""The leaderboard page: per-hardware tables, failures never ranked, text escaped, reported
numbers kept apart, and the committed page equal to what the committed results say."""

import json
import shutil

import pytest

from benchruns import HARDWARE, build_run, sample, turn

from specatlas.bench.leaderboard import measured_markdown, render_markdown
from specatlas.cli import main
from specatlas.paths import repo_root


def table_rows(markdown, heading_part):
    """The data rows of the first table after the heading containing `heading_part`."""
    section = markdown[markdown.index(heading_part):]
    lines = section.split("|---", 1)[1].splitlines()[1:]
    return [line for line in lines[: next((i for i, l in enumerate(lines) if not l.startswith("|")), len(lines))]]


def test_lossless_failures_are_listed_not_ranked(two_method_run, write_run):
    folder = write_run(two_method_run).parent
    page = measured_markdown(folder)
    ranked = table_rows(page, "## Test CPU")
    assert len(ranked) == 1 and "baseline" in ranked[0] and ranked[0].startswith("| 1 |")
    failed = page[page.index("**Failed (not ranked)**"):]
    assert "lossless check failed: 1 of 2 outputs differ" in failed and "question 2, turn 1, token 2" in failed


def test_one_table_per_hardware_and_broken_files_shown_as_failed(write_run, tmp_path):
    fast = [sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5))]
    write_run(build_run(fast), "a.json")
    write_run(build_run(fast, hardware={**HARDWARE, "gpu": "Big GPU"}), "b.json")
    folder = write_run(build_run(fast, errors={"fast": "ValueError: refused"}), "c.json").parent
    (folder / "d.json").write_text('{"schema_version": 1')
    (folder / ".partial-0123.jsonl").write_text("{}")  # a run in progress is not a result
    page = measured_markdown(folder)
    assert page.count("\n## ") == 3  # Test CPU, Big GPU, failed files
    cpu, gpu = table_rows(page, "## Test CPU"), table_rows(page, "## Big GPU")
    # a.json and c.json share the CPU table (with a Run column); c.json's "fast" row is failed.
    assert [r.split("|")[1].strip() for r in cpu] == ["1", "2", "3"] and "| 2.00×" in cpu[0] and r"a\.json" in cpu[0]
    assert len(gpu) == 2
    assert "could not run: ValueError: refused" in page
    assert "| d\\.json | does not match the result schema" in page
    assert "partial" not in page


def test_every_text_from_a_result_file_is_escaped(write_run):
    hostile = '<script>alert(1)</script>'
    run = build_run([sample("baseline", "1", "qa", turn([1], 1.0)), sample("x<y", "1", "qa", turn([1], 0.5))],
                    methods=("baseline", "x<y"), names={"x<y": hostile},
                    hardware={**HARDWARE, "cpu": 'CPU "quoted" <b>'})
    page = measured_markdown(write_run(run).parent)
    assert "<script" not in page and "<b>" not in page and "x<y" not in page
    assert "&lt;script&gt;" in page or "&lt;script" in page


def test_reported_numbers_are_a_separate_section(two_method_run, write_run, tmp_path):
    root = tmp_path / "catalog"
    shutil.copytree(repo_root() / "taxonomy", root / "taxonomy")
    (root / "papers").mkdir()
    shutil.copy(repo_root() / "papers" / "saxena2023prompt.yaml", root / "papers")
    run = build_run([sample("baseline", "1", "qa", turn([1], 1.0)), sample("saxena2023prompt", "1", "qa", turn([1], 0.5))],
                    methods=("baseline", "saxena2023prompt"))
    folder = write_run(run, folder=root / "results").parent
    spec_bench = tmp_path / "shared" / "data" / "spec_bench"
    spec_bench.mkdir(parents=True)
    (spec_bench / "reported_leaderboard.json").write_text(json.dumps({
        "source": "test", "settings": "greedy", "hardware": {"X": "GPU X"},
        "rows": [{"device": "X", "target_model": "M", "method": "PLD<1>", "Translation": 1.5, "Overall": 1.2}]}))
    page = render_markdown(folder)
    measured, reported = page.split("## Reported, not measured")
    assert page.startswith(measured_markdown(folder))
    assert "Mistral" not in measured and "[saxena2023prompt](papers/saxena2023prompt.md)" in reported
    assert "### Spec-Bench's published leaderboard" in reported and "PLD&lt;1&gt;" in reported
    (spec_bench / "reported_leaderboard.json").unlink()
    assert "### Spec-Bench's published" not in render_markdown(folder)


def test_committed_leaderboard_matches_committed_results():
    results = repo_root() / "results"
    assert (results / "LEADERBOARD.md").read_text(encoding="utf-8") == measured_markdown(results) + "\n"
    assert main(["leaderboard", "--check"]) == 0


def test_leaderboard_check_fails_when_stale(two_method_run, write_run, capsys):
    folder = write_run(two_method_run).parent
    assert main(["leaderboard", "--results", str(folder), "--check"]) == 1
    assert main(["leaderboard", "--results", str(folder)]) == 0
    assert main(["leaderboard", "--results", str(folder), "--check"]) == 0
    assert "out of date" in capsys.readouterr().err


def test_site_page_embeds_the_leaderboard_and_markdown_keeps_tables_and_charts(two_method_run, write_run, tmp_path):
    markdown = pytest.importorskip("markdown")
    from specatlas.site.catalog import Catalog
    from specatlas.site.pages import leaderboard_page

    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5))])
    folder = write_run(run, folder=tmp_path / "root" / "results").parent
    page = leaderboard_page(Catalog(folder.parent, [], None))
    assert render_markdown(folder) in page
    html = markdown.markdown(measured_markdown(folder), extensions=["tables", "md_in_html"])
    assert html.count("<table>") == 2 and html.count("<svg") == 2 and "<p><figure" not in html
