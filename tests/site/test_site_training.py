"""The Training page: the committed data's manifest, the shipped heads' cards and the curves."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from specatlas.paths import repo_root
from specatlas.site.project_pages import RepositoryFileError, training_page

DATA = "reference_impls/training_data/smollm2-135m-instruct/manifest.json"


def test_the_page_shows_the_committed_data_every_shipped_head_and_the_measured_methods():
    from specatlas.site.catalog import load_catalog
    from specatlas.train_eval import read_results

    page = training_page(load_catalog(repo_root()))
    manifest = json.loads((repo_root() / DATA).read_text())
    assert f"{manifest['totals']['answer_tokens']:,} answer tokens" in page
    assert f"| sharegpt | {manifest['sources']['sharegpt']['read']:,} |" in page
    heads = sorted(p.parent.name for p in (repo_root() / "reference_impls/trained_heads").glob("*/training.json"))
    assert heads and all(f"| {name.replace('-', chr(92) + '-')} |" in page for name in heads)
    if not list((repo_root() / "results/training").glob("*.json")):
        assert "No curve is measured yet" in page
    for path in (repo_root() / "results/training").glob("*-held-out-acceptance.json"):
        for method, entry in read_results(path)["methods"].items():
            assert f"| {method.replace('-', chr(92) + '-')} |" in page and f"| {entry['mean_accepted_tokens']} |" in page


def test_a_curve_file_becomes_a_chart_and_a_table(tmp_path):
    shutil.copytree(repo_root() / "reference_impls/training_data", tmp_path / "reference_impls/training_data")
    (tmp_path / "results/training").mkdir(parents=True)
    point = lambda tokens, chain, paper: {  # noqa: E731
        "requested_tokens": tokens, "train_answer_tokens": tokens + 7, "train_conversations": 9, "steps": 100,
        "stopped_by": "steps", "final_loss": 1.0, "config": {}, "chain": {"mean_accepted_tokens_chain": chain},
        "paper_method": {"method": "li2025eagle", "mean_accepted_tokens": paper, "identical_to_plain": True}}
    curve = {"family": "eagle3", "model": "m", "points": [point(32000, 1.4, 1.9), point(128000, 1.6, 2.3)]}
    (tmp_path / "results/training/m-eagle3-acceptance-vs-data.json").write_text(json.dumps(curve))
    page = training_page(SimpleNamespace(root=tmp_path))
    assert page.count("<polyline") == 2 and "li2025eagle, paper settings" in page
    assert "| 128,007 | 100 | – | 1.6 | 2.3 (li2025eagle) | yes |" in page
    assert "No curve is measured yet" not in page
    # A file from before the schedule label is fixed-steps; an epochs curve says so, with each size's epochs.
    assert "schedule: fixed 100 steps at every size" in page and "data size, fixed 100 steps at every size" in page
    by_epochs = {**curve, "schedule": "epochs", "epochs": 3,
                 "points": [point(32000, 1.5, 2.0) | {"steps": 768, "epochs_seen": {"epochs": 3.0}}]}
    (tmp_path / "results/training/m-eagle3-epochs3-acceptance-vs-data.json").write_text(json.dumps(by_epochs))
    page = training_page(SimpleNamespace(root=tmp_path))
    assert "schedule: 3 epochs at every size" in page and "data size, 3 epochs at every size" in page  # text, chart
    assert "| 32,007 | 768 | 3.0 | 1.5 | 2.0 (li2025eagle) | yes |" in page


def test_the_heads_held_out_acceptance_becomes_a_table(tmp_path):
    shutil.copytree(repo_root() / "reference_impls/training_data", tmp_path / "reference_impls/training_data")
    shutil.copytree(repo_root() / "results/published", tmp_path / "results/published")
    papers = [SimpleNamespace(id=i, aliases=[alias], title=i) for i, alias in (("li2024eagle2", "eagle2"),
                                                                             ("cai2024medusa", "medusa"))]
    catalog = SimpleNamespace(root=tmp_path, papers=papers, by_id={p.id: p for p in papers})
    page = training_page(catalog)
    assert "Not measured yet: `specatlas train-eval`" in page
    (tmp_path / "results/training").mkdir(parents=True)
    entry = {"paper_settings": "dynamic tree: top-10 per level", "prompts": 16, "max_new_tokens": 96, "steps": 500,
             "mean_accepted_tokens": 2.25, "steps_by_accepted_length": {"1": 200, "2": 100, "4": 200},
             "identical_to_plain": True, "weights": {"eagle checkpoint m-eagle (shipped)": "ab" * 32}}
    results = {"methods": {"li2024eagle2": entry, "cai2024medusa": entry | {"identical_to_plain": False, "weights": {}},
                           "leviathan2023fast": entry}}
    (tmp_path / "results/training/m-held-out-acceptance.json").write_text(json.dumps(results))
    page = training_page(catalog)
    # Spec-Bench's first row for EAGLE2 is Vicuna-7B on the 3090 (results/published/spec-bench-leaderboard.json).
    assert ("| li2024eagle2 | dynamic tree: top\\-10 per level | 16 × 96 | 500 | 2.25 | 1: 200, 2: 100, 4: 200 | yes | "
            "4\\.35 \\(EAGLE2 on Vicuna\\-7B\\-v1\\.3\\) | eagle checkpoint m\\-eagle \\(shipped\\) `abababababab` |") in page
    assert "| cai2024medusa |" in page and "| **no** | 2\\.32 \\(Medusa on Vicuna\\-7B\\-v1\\.3\\) |" in page
    assert "| yes | – |" in page  # no published row for speculative decoding with this drafter
    assert page.index("| cai2024medusa |") < page.index("| li2024eagle2 |") and "**m**, each method" in page


@pytest.mark.parametrize("name, content, message", [
    ("m-held-out-acceptance.json", {"methods": {"li2024eagle2": {"steps": 3}}}, "not a held-out acceptance file"),
    ("m-eagle3-acceptance-vs-data.json", {"family": "eagle3", "model": "m", "points": [{"steps": 1}]},
     "not an acceptance-vs-data curve"),
    ("m-eagle3-acceptance-vs-data.json", "{oops", "cannot be read"),
])
def test_a_broken_training_result_stops_the_build_in_one_line_naming_it(tmp_path, name, content, message):
    shutil.copytree(repo_root() / "reference_impls/training_data", tmp_path / "reference_impls/training_data")
    (tmp_path / "results/training").mkdir(parents=True)
    (tmp_path / "results/training" / name).write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(RepositoryFileError) as caught:
        training_page(SimpleNamespace(root=tmp_path))
    assert str(caught.value).startswith(str(tmp_path / "results/training" / name)) and message in str(caught.value)
    assert "\n" not in str(caught.value)
