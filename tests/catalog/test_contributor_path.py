"""Scaffold a record with `specatlas new`, fill it in, validate it: the contributor's path."""

import subprocess
import sys

from specatlas.catalog.ids import propose_id


def run(args, root, **kwargs):
    env = {"SPECATLAS_ROOT": str(root), "PATH": ""}
    return subprocess.run([sys.executable, "-m", "specatlas", *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kwargs)


def test_scaffold_fill_validate(make_catalog):
    root = make_catalog()
    made = run(["new", "--title", "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads",
                "--authors", "Tianle Cai, Yuhong Li, Zhengyang Geng", "--year", "2024", "--venue", "ICML2024",
                "--arxiv", "https://arxiv.org/abs/2401.10774v3"], root)
    assert made.returncode == 0, made.stderr
    path = root / "papers" / "cai2024medusa.yaml"
    text = path.read_text(encoding="utf-8")
    assert "venue: ICML" in text and "arxiv: '2401.10774'" in text

    # Fresh from the scaffold, the record is refused until its TODOs are filled in.
    first = run(["validate", str(path)], root)
    assert first.returncode == 1 and "summary: still holds the scaffold's TODO" in first.stdout

    text = text.replace("  drafting: []", "  drafting: [extra-heads, token-tree]")
    text = text.replace("  verification: []", "  verification: [token-tree-verification, typical-acceptance]")
    text = text.replace("  scope: []", "  scope: [llm-text-generation]")
    text = text.replace("lossless: null", "lossless: true")
    text = text.replace("TODO: 1-4 sentences in your own words: what the method does, how, and why it helps.",
                        "Extra heads on the last hidden state guess several future tokens, verified together as a tree.")
    path.write_text(text, encoding="utf-8")
    # A method record also carries its headline result.
    third = run(["validate", str(path)], root)
    assert third.returncode == 1 and "reported_results: is empty for a method record" in third.stdout
    text = text.replace("reported_results: []", "reported_results:\n  - {metric: speedup, value: 2.2, target_model: Vicuna-7B, "
                        "benchmark: MT-Bench, source: Table 1, statistic: mean}")
    path.write_text(text, encoding="utf-8")
    second = run(["validate", str(path)], root)
    assert second.returncode == 0, second.stdout + second.stderr


def test_scaffold_without_facts_and_without_terminal_says_what_is_missing(make_catalog):
    result = run(["new", "--title", "Only a Title"], make_catalog())
    assert result.returncode == 2
    assert "missing --authors, --year, --venue" in result.stderr and "Traceback" not in result.stderr


def test_id_rule():
    assert propose_id("Yaniv Leviathan", 2023, "Fast Inference from Transformers via Speculative Decoding") == "leviathan2023fast"
    assert propose_id("Tianle Cai", 2024, "Medusa: Simple LLM Inference") == "cai2024medusa"
    assert propose_id("Yichao Fu", 2024, "Break the Sequential Dependency of LLM Inference") == "fu2024break"
    assert propose_id("Zoé Åström", 2025, "On the Speed of Drafts", taken={"astrom2025speed"}) == "astrom2025speeddrafts"
