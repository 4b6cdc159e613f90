"""The Which-method page: each hardware setting ranked by one benchmark table only (measured here,
or Spec-Bench's published table), the CPU setting by a table measured on CPU here; verdicts per
constraint from that same table; the papers' own claims apart; serving unranked; and the Run-it
page and robots.txt beside it."""

import shutil

import pytest

from sitecatalog import make_root
from specatlas.bench.aggregate import load_all
from specatlas.bench.measured import measured_rows
from specatlas.bench.published import load_spec_bench
from specatlas.paths import repo_root
from specatlas.site import choose, pages, project_pages, reported
from specatlas.site.catalog import load_catalog

RUN = "2026-12-03-smollm2-135m-instruct-cpu-9abfbd69.json"
CLAIM = {"metric": "speedup", "value": 9.5, "target_model": "Llama-2-7B", "benchmark": "MT-bench",
         "hardware": "single A100 80GB", "batch_size": 1, "source": "Abstract"}
BATCHED = {"metric": "speedup", "value": 1.4, "target_model": "Llama-2-7B", "benchmark": "MT-bench",
           "hardware": "A100", "batch_size": 16, "source": "Table 3"}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("choose"))
    shutil.copy(repo_root() / "results" / RUN, root / "results")
    loaded = load_catalog(root)
    # Medusa's record claims a big "up to" number on an A100 and one at batch 16
    papers = [p.model_copy(update={"reported_results": [*p.reported_results, type(p.reported_results[0])(**CLAIM),
                                                         type(p.reported_results[0])(**BATCHED)]})
              if p.id == "cai2024medusa" else p for p in loaded.papers]
    return type(loaded)(loaded.root, papers, loaded.taxonomy, loaded.implemented)


@pytest.fixture(scope="module")
def settings(catalog):
    found = choose.settings(catalog, load_all(catalog.root / "results"), load_spec_bench(catalog.root))
    return {s.key: s for s in found}


def test_the_cpu_setting_is_ranked_by_a_table_measured_on_cpu_here(catalog, settings):
    [cpu] = settings[choose.CPU].rankings  # one model size measured on CPU: the embedded 135M model
    assert cpu.size == "under 1B" and cpu.source.measured_here and cpu.source.device == "cpu"
    rows = [m for m in measured_rows(catalog.root / "results") if m.table.title in cpu.source.title
            and m.method_id in catalog.by_id]
    assert rows and cpu.top.paper.id == rows[0].method_id and cpu.top.speedup == rows[0].speedup
    assert cpu.top.command.startswith(f"specatlas run {cpu.top.paper.id}")


def test_every_model_size_ranks_by_its_own_table_only(catalog, settings):
    spec_bench = load_spec_bench(catalog.root)
    rankings = settings[choose.DATACENTER].rankings
    assert [r.size for r in rankings] == ["7B", "13B", "33B+"]  # Spec-Bench's A100 tables, one per size
    for ranking, target in zip(rankings, ("Vicuna-7B-v1.3", "Vicuna-13B-v1.3", "Vicuna-33B-v1.3")):
        table = ranking.source
        assert not table.measured_here and "A100" in table.title and table.target == target and not ranking.others
        published = [r["Overall"] for r in spec_bench.rows if r["device"] == "A100" and r["target_model"] == target]
        assert [row.speedup for row in table.rows] == sorted(published, reverse=True)  # exactly that table's rows
        # the link opens Reported results filtered to that table
        assert table.link == "results.md" and table.query.startswith("?hardware=A100&size=")
    assert [r.size for r in settings[choose.CONSUMER].rankings] == ["7B"]  # the RTX 3090 table
    # Medusa's 9.5x claim from its own abstract is not in a ranking, only among the claims
    assert all(9.5 not in [row.speedup for row in r.source.rows] for r in rankings)
    assert any(paper.id == "cai2024medusa" and row.speedup == 9.5 for paper, row in settings[choose.DATACENTER].claims)


def test_verdicts_follow_the_constraints(settings):
    seven = settings[choose.DATACENTER].rankings[0]
    verdicts = dict(seven.verdicts)
    # the fixture catalog's methods all train a head, and Medusa (typical acceptance) is lossy
    assert verdicts["Lossless, nothing to train"] is None and verdicts["Lossy allowed, nothing to train"] is None
    assert verdicts["Lossless, can train a head"].paper.id == "li2024eagle"
    assert verdicts["Lossy allowed, can train a head"] is seven.top
    assert all(row.speedup > 1 for row in verdicts.values() if row)


def test_a_7b_model_on_an_a100_gets_sam_eagle2_with_its_own_model_command():
    """On the real catalog: SAMD[EAGLE2] runs here by its registry id (a variant of SAM-Decoding's
    record), and Try it runs it on the table's model with the drafter its authors publish."""
    real = load_catalog(repo_root())
    found = {s.key: s for s in choose.settings(real, pages.measured_results(real), load_spec_bench(real.root))}
    seven, thirteen = found[choose.DATACENTER].rankings[:2]
    assert (seven.top.method, seven.top.speedup) == ("SAM-Decoding[EAGLE-2]", 2.73)
    assert seven.top.command == ("specatlas run hu2025sam-eagle2 --model lmsys/vicuna-7b-v1.3 --device cuda "
                                 "--drafter-checkpoint yuhuili/EAGLE-Vicuna-7B-v1.3")
    assert (thirteen.top.method, thirteen.top.speedup) == ("EAGLE-3", 3.02)
    engines = dict((name, how) for name, how, _ in thirteen.top.engine_runs)
    assert engines["SGLang"] == ("python -m sglang.launch_server --model-path lmsys/vicuna-13b-v1.3 --speculative-algorithm "
                                 "EAGLE3 --speculative-draft-model-path yuhuili/EAGLE3-Vicuna1.3-13B")
    assert all(row.command for r in found[choose.DATACENTER].rankings for row in r.source.rows)  # every row runs here
    page = pages.choose_page(real, pages.measured_results(real))
    gpus = page[page.index("{ #datacenter-gpu }"):page.index("{ #cpu }")]
    assert "not built here" not in gpus and "`specatlas run hu2025sam-eagle2 --model lmsys/vicuna-7b-v1.3" in gpus


def test_a_combination_runs_as_the_registry_variant_that_names_it():
    real = load_catalog(repo_root())
    sam, eagle2, eagle = (real.by_id[i] for i in ("hu2025sam", "li2024eagle2", "li2024eagle"))
    assert choose.registry_spec((sam, eagle2)).id == "hu2025sam-eagle2"
    assert choose.registry_spec((sam,)).id == "hu2025sam"
    assert choose.registry_spec((sam, eagle)) is None  # no SAM-Decoding[EAGLE] variant is built


def test_every_page_counts_runnable_methods_alike():
    from specatlas.impls.registry import METHODS

    real = load_catalog(repo_root())
    count = len(real.runnable)
    assert count == len([s for s in METHODS.values() if s.has_paper and s.record_id in real.by_id])
    assert ("hu2025sam-eagle2", real.by_id["hu2025sam"]) in real.runnable
    home, coverage, run = pages.home(real), project_pages.coverage_page(real), project_pages.run_page(real)
    assert f"{count} methods run here from their paper id" in home and f"| Runnable here (reference implementations) | {count} |" in home
    assert f"the {count} methods that run here" in coverage and f"The {count} methods that run here:" in run


def test_the_page_shows_verdicts_commands_and_serving_apart(catalog):
    page = pages.choose_page(catalog, load_all(catalog.root / "results"))
    assert 'data-setting="cpu" data-size="under 1B" data-measured-here="yes" data-device="cpu"' in page
    assert "## CPU / on\\-device, batch 1 { #cpu }" in page and "**Verdict:**" in page
    cpu = page[page.index("{ #cpu }"):page.index("{ #serving }")]
    assert "Ranked by: **Measured here:" in cpu and "`specatlas run " in cpu
    serving = page[page.index("{ #serving }"):page.index("{ #other-needs }")]
    assert "[Medusa" in serving and "1.4×" in serving and "batch 16" in serving  # the paper's own, unranked
    assert "Serving engines" not in page  # no record of this catalog names an engine: no empty column


def test_engines_are_the_records_serving_engines_as_the_engines_spell_themselves():
    from specatlas.catalog.records import read_record
    from specatlas.paths import papers_dir

    record, problems = read_record(papers_dir() / "li2025eagle.yaml")
    assert not problems and {"SGLang", "TensorRT-LLM"} <= set(choose.engines(record.paper))
    assert choose.engines(None) == ()


def test_a_result_files_policy_becomes_a_command_only_when_plain():
    assert choose.run_command("hu2025sam", "cost-aware") == "specatlas run hu2025sam --draft-length cost-aware"
    assert choose.run_command("hu2025sam", "paper") == "specatlas run hu2025sam"
    assert choose.run_command("hu2025sam", "x; rm -rf ~") == "specatlas run hu2025sam"


def test_run_page_and_robots(fixture_catalog):
    page = project_pages.run_page(fixture_catalog)
    for flag in ("--model", "--device", "--drafter-checkpoint", "--draft-model", "--dtype"):
        assert f"`{flag}`" in page
    for command in ("make demo", "specatlas train eagle", "specatlas bench", "specatlas results check", "--compare",
                    "specatlas advise --prompts"):
        assert command in page
    assert "git clone" not in page  # no repository configured: no guessed address
    assert "git clone https://github.com/o/r specatlas" in project_pages.run_page(fixture_catalog, "https://github.com/o/r")
    assert "Sitemap" not in project_pages.robots(None)
    assert project_pages.robots("https://example.org/atlas/").endswith("Sitemap: https://example.org/atlas/sitemap.xml\n")


@pytest.mark.parametrize("hardware, setting", [
    ("NVIDIA H100 80GB HBM3", choose.DATACENTER), ("1x A100 80GB", choose.DATACENTER),
    ("NVIDIA GeForce RTX 4090", choose.CONSUMER), ("1x RTX 3090 24GB", choose.CONSUMER),
    ("Intel Core Ultra 7", choose.CPU), ("NVIDIA Jetson NX", choose.CPU), ("a mystery box", None)])
def test_hardware_settings(hardware, setting):
    assert choose.hardware_setting(hardware) == setting


def test_a_table_where_nothing_beats_plain_decoding_has_no_pick():
    row = choose.Row("slow", (), 0.9, None, True, choose.NOTHING, None, ())
    source = choose.Source(choose.CPU, True, "t", "d", "cpu", "leaderboard.md", [row])
    assert source.best(False, True) is None
    assert choose.Ranking("under 1B", "cpu-under1b", source, []).top is None


def test_on_device_work_is_not_listed_as_serving(monkeypatch):
    real = load_catalog(repo_root())
    monkeypatch.setattr(choose, "SERVING_SHOWN", len(real.papers))
    listed = {paper.id for paper, _ in choose.serving(real)[0]}
    # tagged on-device, not serving, and reporting nothing at batch > 1
    edge_only = {p.id for p in real.papers if "edge-devices" in real.tags(p, "scope")
                 and "serving-systems" not in real.tags(p, "scope")
                 and all((r.batch or 1) == 1 for r in reported.paper_rows(p))}
    assert edge_only and listed and not edge_only & listed


def test_of_tables_with_as_many_methods_the_largest_run_ranks_the_setting():
    row = choose.Row("fast", (), 1.2, None, True, choose.NOTHING, None, ())
    small, large = (choose.Source(choose.CPU, True, f"Measured here: {name}", "d", "cpu", "leaderboard.md", [row], size)
                    for name, size in (("A small", 6 * 64), ("B large", 80 * 256)))
    assert sorted([small, large], key=choose._order) == [large, small]
    assert sorted([choose.Source(choose.CPU, True, "more methods", "d", "cpu", "x", [row, row], 1), large],
                  key=choose._order)[0].title == "more methods"
