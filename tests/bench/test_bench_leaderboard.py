"""The leaderboard page: per-hardware tables, failures never ranked, text escaped, reported
numbers kept apart, and the committed page equal to what the committed results say."""

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest

from benchruns import HARDWARE, build_run, sample, turn

from specatlas.bench.leaderboard_page import measured_markdown, render_markdown
from specatlas.bench.published import SPEC_BENCH_FILE, PublishedDataError
from specatlas.bench.results import config_hash
from specatlas.bench.protocol import _arguments
from specatlas.cli import main
from specatlas.paths import repo_root


def table_rows(markdown, heading_part):
    """The data rows of the first table after the heading containing `heading_part`."""
    section = markdown[markdown.index(heading_part):]
    lines = section.split("|---", 1)[1].splitlines()[1:]
    return [line for line in lines[: next((i for i, l in enumerate(lines) if not l.startswith("|")), len(lines))]]


def test_a_failed_lossless_claim_fails_the_file_as_results_check_does(two_method_run, write_run):
    folder = write_run(two_method_run).parent
    page = measured_markdown(folder)
    assert "## Test CPU" not in page
    failed = page[page.index("## Result files that failed checks"):]
    assert ("| run\\.json | method fast: claims to be lossless but 1 of 2 outputs differ" in failed
            and "question 2, turn 1, token 2" in failed)


def test_one_table_per_hardware_and_broken_files_shown_as_failed(write_run, tmp_path):
    def fast(seconds):  # each run its own measurements: a copy of one would count once
        return [sample("baseline", "1", "qa", turn([1, 2], seconds)), sample("fast", "1", "qa", turn([1, 2], seconds / 2))]

    on_gpu = build_run(fast(0.9), hardware={**HARDWARE, "gpu": "Big GPU"})
    on_gpu.config["device"] = "cuda"
    on_gpu.config_hash = config_hash(on_gpu.config)
    write_run(build_run(fast(1.0)), "a.json")
    write_run(on_gpu, "b.json")
    folder = write_run(build_run(fast(1.1), errors={"fast": "ValueError: refused"}), "c.json").parent
    (folder / "d.json").write_text('{"schema_version": 1')
    (folder / ".partial-0123.jsonl").write_text("{}")  # a run in progress is not a result
    page = measured_markdown(folder)
    assert page.count("\n## ") == 4  # Test CPU, Big GPU, failed files, reading the tables
    cpu, gpu = table_rows(page, "## Test CPU"), table_rows(page, "## Big GPU")
    # a.json and c.json share the CPU table: one row per method; c.json's "fast" failed, so
    # fast's row is a.json's alone, and the failure is listed with its run.
    assert [r.split("|")[1].strip() for r in cpu] == ["1", "2"] and "| **2.00×** |" in cpu[0]
    assert cpu[0].rstrip().endswith("| 1 |") and cpu[1].rstrip().endswith("| 2 |")
    assert len(gpu) == 2
    assert "| could not run: ValueError: refused | c\\.json |" in page
    assert "| d\\.json | not valid JSON" in page
    assert "partial" not in page


def test_runs_of_a_table_aggregate_into_one_row_per_method_and_policy(write_run):
    def run(seconds, policy=None):
        built = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], seconds))])
        if policy:
            built.config["policy"] = policy
            built.config_hash = config_hash(built.config)
        return built

    write_run(run(0.5), "a.json")
    write_run(run(0.25), "b.json")
    folder = write_run(run(0.4, policy="paper"), "c.json").parent
    page = measured_markdown(folder)
    rows = table_rows(page, "## Test CPU")
    methods = [(r.split("|")[2].strip(), r.split("|")[3].strip().replace("\\", "")) for r in rows]
    # the baseline drafts nothing, so it has no policy and one row over all three runs
    # rows are named by the method's name (its paper's id in the link's title)
    assert methods == [("fast", "cost-aware"), ("fast", "paper"), ("baseline", "–")]
    assert rows[2].rstrip().endswith("| 3 |")
    # cost-aware "fast": 2x and 4x -> mean 3.00x, sample standard deviation 1.41
    assert "| **3.00×\u00a0±1.41** |" in rows[0] and rows[0].rstrip().endswith("| 2 |")
    assert "| **2.50×** |" in rows[1] and rows[1].rstrip().endswith("| 1 |")
    runs = page[page.index("<summary>Runs"):]
    assert "a\\.json" in runs and "| fast | cost\\-aware | 2.00× | 4.00× | – |" in runs
    assert "| fast | paper | – | – | 2.50× |" in runs


def test_method_names_link_to_their_papers_and_drafter_and_kind_are_explained(write_run, tmp_path):
    root = tmp_path / "root"
    (root / "papers").mkdir(parents=True)
    (root / "papers" / "fast.yaml").write_text("id: fast\n")
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5))])
    run.methods[1].setup = "shallow slice of the target (first 6 layers; its head); cost-aware draft length (0..8)"
    folder = write_run(run, folder=root / "results").parent
    page = measured_markdown(folder)
    assert '[fast](../papers/fast.yaml "fast")' in page and "[baseline" not in page
    assert "| shallow slice of the target \\(first 6 layers; its head\\) |" in page
    assert "**Kind**" in page and "**Drafter**" in page and "**Policy**" in page
    site = measured_markdown(folder, link=lambda i: f"papers/{i}.md")
    assert '[fast](papers/fast.md "fast")' in site and '[baseline](papers/baseline.md "baseline")' in site


def test_a_method_that_drafted_nothing_is_explained(write_run):
    idle = turn([1, 2, 3, 4], 1.0, steps=4, widths={1: 4}, drafted=[1], accepted=[0])
    run = build_run([sample("baseline", "1", "qa", turn([1, 2, 3, 4], 1.0)), sample("fast", "1", "qa", idle)])
    page = measured_markdown(write_run(run).parent)
    assert "drafted (almost) nothing: fast (0.25 drafted tokens per step)" not in page  # 0.25 is drafting
    run = build_run([sample("baseline", "1", "qa", turn([1] * 40, 1.0)),
                     sample("fast", "1", "qa", turn([1] * 40, 1.0, steps=40, widths={1: 40}, drafted=[1], accepted=[0]))])
    run.config["max_new_tokens"] = 40
    run.config_hash = config_hash(run.config)
    page = measured_markdown(write_run(run).parent)
    assert "drafted (almost) nothing: fast (0.03 drafted tokens per step)" in page


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
    spec_bench = root / SPEC_BENCH_FILE
    spec_bench.parent.mkdir(parents=True)
    spec_bench.write_text(json.dumps({
        "source": "test", "url": "https://example.org/t", "licence": "Apache-2.0", "settings": "greedy",
        "hardware": {"X": "GPU X"},
        "rows": [{"device": "X", "target_model": "M", "method": "PLD<1>", "Translation": 1.5, "Overall": 1.2}]}))
    page = render_markdown(folder)
    measured, reported = page.split("## Reported, not measured")
    assert page.startswith(measured_markdown(folder))
    assert "Mistral" not in measured and "[saxena2023prompt](../papers/saxena2023prompt.yaml)" in reported
    assert "### Spec-Bench's published leaderboard" in reported and "PLD&lt;1&gt;" in reported
    assert "[test](https://example.org/t) (Apache\\-2\\.0)" in reported
    # the page promises Spec-Bench's numbers: without them it is refused in one line, not cut short
    spec_bench.unlink()
    with pytest.raises(PublishedDataError, match=r"^results/published/spec-bench-leaderboard.json is missing"):
        render_markdown(folder)
    assert main(["leaderboard", "--print", "--results", str(folder)]) == 1


def test_committed_leaderboard_matches_committed_results():
    results = repo_root() / "results"
    assert (results / "LEADERBOARD.md").read_text(encoding="utf-8") == measured_markdown(results) + "\n"
    assert main(["leaderboard", "--check"]) == 0


def test_committed_results_record_no_machine_paths():
    # a file path of the machine that ran the bench says nothing to a reader and leaks its layout
    absolute_path = re.compile(r'(?<![\w:/.~-])/(?:[\w.+-]+/){2,}[\w.+-]+')
    for path in sorted((repo_root() / "results").glob("*.json")):
        assert absolute_path.findall(path.read_text(encoding="utf-8")) == [], path.name


def test_charts_draw_in_the_text_colour_and_scatter_labels_never_overlap():
    from specatlas.bench import charts

    crowded = [(f"method-{i}", 1.0 + (i % 3) * 0.001, 1.0 + (i % 2) * 0.001) for i in range(20)]
    scatter = charts.accepted_vs_speedup(crowded, "caption")
    ys = sorted(float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" class="sa-point-label"', scatter))
    assert len(ys) == 20 and all(b - a >= charts.LINE - 1e-9 for a, b in zip(ys, ys[1:]))
    bars = charts.speedup_bars([("a", 1.5, 1.4, 1.6), ("b", 0.5, 0.5, 0.5)], "caption")
    for svg in (scatter, bars):
        assert 'fill="currentColor"' in svg and "#333" not in svg and "black" not in svg
        assert all("fill=" in t or "<text" not in t for t in re.findall(r"<svg[^>]*>", svg))
    assert bars.count("<path") == 1  # a whisker only where runs differ


def test_spread_labels_keep_order_and_gap_inside_bounds():
    from specatlas.bench.charts import spread_labels

    assert spread_labels([50, 50, 50], 0, 100, gap=10) == [50, 60, 70]
    assert spread_labels([95, 99, 100], 0, 100, gap=10) == [80, 90, 100]
    assert spread_labels([30, 5], 0, 100, gap=10) == [30, 5]


def test_leaderboard_check_fails_when_stale(two_method_run, write_run, capsys):
    folder = write_run(two_method_run).parent
    assert main(["leaderboard", "--results", str(folder), "--check"]) == 1
    assert main(["leaderboard", "--results", str(folder)]) == 0
    assert main(["leaderboard", "--results", str(folder), "--check"]) == 0
    assert "out of date" in capsys.readouterr().err


def test_site_page_embeds_the_leaderboard_and_markdown_keeps_tables_and_charts(two_method_run, write_run, tmp_path):
    markdown = pytest.importorskip("markdown")
    from specatlas.site.catalog import Catalog
    from specatlas.site.pages import leaderboard_page, measured_results

    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5))])
    folder = write_run(run, folder=tmp_path / "root" / "results").parent
    shutil.copytree(repo_root() / SPEC_BENCH_FILE.parent, folder.parent / SPEC_BENCH_FILE.parent)
    catalog = Catalog(folder.parent, [], None)
    page = leaderboard_page(catalog, measured_results(catalog))
    assert render_markdown(folder, link=lambda _: None, papers={}, raw=lambda name: f"runs/{name}") in page
    assert "1 run (result files: [run\\.json](runs/run.json))" in page
    html = markdown.markdown(measured_markdown(folder), extensions=["tables", "md_in_html"])
    # ranked (the top rows, then every row folded), by subtask, time, and each run's numbers (folded);
    # the top rows' chart, accepted vs speedup
    assert html.count("<table>") == 5 and html.count("<svg") == 2 and "<p><figure" not in html
    assert "<details>" in html and "<summary>" in html


def test_rows_under_another_policy_share_the_papers_id():
    from specatlas.bench.aggregate import method_paper_id

    assert method_paper_id("saxena2023prompt@cost-aware") == "saxena2023prompt"
    assert method_paper_id("saxena2023prompt@fixed-4") == "saxena2023prompt"
    assert method_paper_id("hf-prompt-lookup") == "hf-prompt-lookup"


def test_headings_state_sample_size_prompt_set_hardware_model_and_kernels(write_run):
    def run(questions, tokens, packed=None):
        built = build_run([sample(m, str(q), "qa", turn([1, 2], 1.0 if m == "baseline" else 0.5))
                           for q in range(questions) for m in ("baseline", "fast")])
        built.config.update(max_new_tokens=tokens, **({} if packed is None else {"packed_linears": packed}))
        built.config_hash = config_hash(built.config)
        return built

    write_run(run(1, 4, packed=0), "a-small.json")
    folder = write_run(run(3, 8, packed=5), "z-large.json").parent
    page = measured_markdown(folder)
    headings = [line for line in page.splitlines() if line.startswith("## Test CPU")]
    # the largest run (3 questions × 8 tokens) heads the hardware, though its file sorts last
    assert headings == [
        "## Test CPU \\(2 cores, 2 torch threads\\) · tiny float32, 5 linears packed for oneDNN · test\\-set, 3 questions × 8 tokens × 1 repeat",
        "## Test CPU \\(2 cores, 2 torch threads\\) · tiny float32, default kernels · test\\-set, 1 question × 4 tokens × 1 repeat"]
    large, small = page.split(headings[1])
    assert "The largest run on this hardware: its headline table. 1 run (result files: [z\\-large\\.json](z-large.json))" in large
    assert "Another table on this hardware" in small and "[a\\-small\\.json](a-small.json)" in small
    assert "- Test CPU \\(2 cores, 2 torch threads\\): **fast**, 2.00× (cost\\-aware) (test\\-set, 3 questions × 8 tokens × 1 repeat" in page


def test_spec_bench_is_named_by_its_digest_not_its_file_name():
    page = (repo_root() / "results" / "LEADERBOARD.md").read_text(encoding="utf-8")
    headings = [line for line in page.splitlines() if line.startswith("## ") and "Spec" in line]
    assert headings and all(" · Spec\\-Bench, " in h and "· question" not in h for h in headings)
    assert ("## AMD EPYC \\(2 cores, 2 torch threads\\) · smollm2\\-135m\\-instruct float32, 211 linears packed for oneDNN"
            " · Spec\\-Bench, 6 questions × 64 tokens × 1 repeat") in headings
    assert "(2026-12-03-smollm2-135m-instruct-cpu-9abfbd69.json)" in page


def test_paper_settings_and_cost_aware_rows_side_by_side(write_run):
    run = build_run([sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], 0.5)),
                     sample("fast@cost-aware", "1", "qa", turn([1, 2], 0.25))], methods=("baseline", "fast", "fast@cost-aware"))
    run.methods[1].policy, run.methods[2].policy = "paper", "cost-aware"
    page = measured_markdown(write_run(run).parent)
    rows = table_rows(page, "**Paper settings beside cost-aware (tuned)**")
    assert rows == ['| [fast](../papers/fast.yaml "fast") | 2.00× | 1.00 | 4.00× | 1.00 |'] or rows == ["| fast | 2.00× | 1.00 | 4.00× | 1.00 |"]
    assert "baseline" not in page[page.index("**Paper settings beside"):page.index("**Speedup by subtask")]


def test_a_copied_or_linked_result_is_not_a_second_run(tmp_path):
    from specatlas.bench.aggregate import load_all

    committed = sorted((repo_root() / "results").glob("2026-*.json"))[-1]
    shutil.copy(committed, tmp_path / committed.name)
    data = json.loads(committed.read_text())
    (tmp_path / "z-reformatted-copy.json").write_text(json.dumps(data, indent=4))  # same run, other bytes
    (tmp_path / "z-link.json").symlink_to(committed)
    runs, failed = load_all(tmp_path)
    assert [name for _, name in runs] == [committed.name]
    assert dict(failed)["z-reformatted-copy.json"].startswith(f"the same run as {committed.name}")
    assert dict(failed)["z-link.json"].startswith("a link, not a result file")


def test_chart_labels_stay_inside_the_drawing_area():
    # long method names (a record id and its policy) used to run past the scatter's right edge and
    # the bars' left edge, where the SVG cuts them off
    from specatlas.bench import charts

    long = ["santilli2023accelerating (cost-aware)", "a", "spector2023accelerating (paper) with a longer tail"]
    scatter = charts.accepted_vs_speedup([(name, 1.5 + i, 1.2 + i) for i, name in enumerate(long)], "caption")
    bars = charts.speedup_bars([(name, 1.5 + i, 1.5, 1.5 + i) for i, name in enumerate(long)], "caption")
    for svg in (scatter, bars):
        width = float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))
        for x, anchor, text in re.findall(r'<text x="([\d.]+)" y="[\d.]+"( text-anchor="\w+")?(?: class="[\w-]+")?>([^<]*)<', svg):
            start = {"": 0.0, ' text-anchor="end"': 1.0, ' text-anchor="middle"': 0.5}[anchor]
            left = float(x) - start * charts.text_width(text)
            assert 0 <= left and left + charts.text_width(text) <= width, (text, x, width)


def test_fastest_here_is_the_fastest_lossless_method_measured_on_this_hardware(write_run, tmp_path, capsys):
    from specatlas.bench.measured import fastest_here
    from specatlas.bench.provenance import label

    methods = ("baseline", "saxena2023prompt", "cai2024medusa", "hu2025sam@cost-aware", "fast")
    seconds = {"baseline": 1.0, "saxena2023prompt": 0.5, "cai2024medusa": 0.25, "hu2025sam@cost-aware": 0.8, "fast": 0.1}
    run = build_run([sample(m, "1", "qa", turn([1, 2, 3, 4], s)) for m, s in seconds.items()], methods=methods)
    folder = write_run(run).parent
    # Medusa (relaxed acceptance) and "fast" (no registered method) are faster but never chosen.
    row, here = fastest_here(folder, label(HARDWARE), "cpu", "tiny")
    assert (row.method_id, row.speedup, here) == ("saxena2023prompt", 2.0, True)
    row, here = fastest_here(folder, "Another CPU (4 cores, 4 torch threads)", "cpu", "tiny")
    assert row.method_id == "saxena2023prompt" and not here  # measured elsewhere: said so
    assert fastest_here(folder, label(HARDWARE), "cuda", "tiny") is None
    assert fastest_here(folder, label(HARDWARE), "cpu", "another-model") is None

    assert main(["leaderboard", "--results", str(folder), "--fastest"]) == 1  # nothing for the embedded model
    err = capsys.readouterr().err
    assert "no result in" in err and "ranks a lossless method on smollm2-135m-instruct" in err and err.count("\n") == 1


def test_recorded_arguments_name_files_outside_the_repository_by_name_only():
    # the bench of 2026-12-05 recorded `--questions /abs/path/question.jsonl` verbatim in its provenance
    args = argparse.Namespace(questions=Path("/elsewhere/data/spec_bench/question.jsonl"), out=Path("/elsewhere/out"),
                              seed=0, _private=1)
    assert _arguments(args) == {"out": "out", "questions": "question.jsonl", "seed": 0}


def test_a_failure_a_later_run_superseded_is_dropped_and_each_table_opens_with_its_answer(write_run):
    """A method that could not run (its head not shipped yet) and ran in a later run is ranked, not
    listed as failed; a later failure stays. The section opens with what is fastest and why, rows
    and charts named by method, the top rows shown and every row folded."""
    def fast(seconds):  # each run its own timings: identical samples would be one run copied
        return [sample("baseline", "1", "qa", turn([1, 2], 1.0)), sample("fast", "1", "qa", turn([1, 2], seconds))]

    stale = build_run(fast(0.5), errors={"fast": "HeadNotShipped: train one with `specatlas train x`"},
                      names={"fast": "Fast: a method"})
    later = build_run(fast(0.45), names={"fast": "Fast: a method"})
    later.sessions[-1].started, later.sessions[-1].finished = "2026-02-01T00:00:00+00:00", "2026-02-01T00:01:00+00:00"
    write_run(stale, "a.json")
    folder = write_run(later, "b.json").parent
    page = measured_markdown(folder)
    assert "HeadNotShipped" not in page and "**Failed (not ranked)**" not in page
    section = page[page.index("## Test CPU"):]
    assert section.index("**In short:** the fastest here is **Fast**") < section.index("<figure") < section.index("| # |")
    assert "Fast: a method" not in page and "2 runs (result files:" in page
    assert '<summary>All 2 ranked rows, with tokens/s' in page
    newer_failure = build_run(fast(0.55), errors={"fast": "ValueError: refused"}, names={"fast": "Fast: a method"})
    newer_failure.sessions[-1].started = "2026-03-01T00:00:00+00:00"
    newer_failure.sessions[-1].finished = "2026-03-01T00:01:00+00:00"
    page = measured_markdown(write_run(newer_failure, "c.json").parent)
    assert "| could not run: ValueError: refused | c\\.json |" in page and "HeadNotShipped" not in page


def test_leaderboard_file_and_site_page_render_from_one_template(two_method_run, write_run, tmp_path, monkeypatch):
    """results/LEADERBOARD.md and the site's page are one template's output: a line added to it shows in both."""
    from specatlas.bench import leaderboard_page
    from specatlas.site.catalog import Catalog
    from specatlas.site.pages import leaderboard_page as site_leaderboard_page
    from specatlas.site.pages import measured_results

    folder = write_run(two_method_run, folder=tmp_path / "root" / "results").parent
    shutil.copytree(repo_root() / SPEC_BENCH_FILE.parent, folder.parent / SPEC_BENCH_FILE.parent)
    templates = shutil.copytree(leaderboard_page.TEMPLATES, tmp_path / "templates")
    page = templates / "leaderboard_measured.md.j2"
    page.write_text(page.read_text(encoding="utf-8") + "\nOne template, two pages.\n", encoding="utf-8")
    monkeypatch.setattr(leaderboard_page, "TEMPLATES", templates)
    catalog = Catalog(folder.parent, [], None)
    assert measured_markdown(folder).endswith("\nOne template, two pages.")
    assert "\nOne template, two pages.\n" in site_leaderboard_page(catalog, measured_results(catalog))
