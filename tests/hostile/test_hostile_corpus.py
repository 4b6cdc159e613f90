"""Every hostile input of the corpus (corpus.py, and corpus_engine.py for what reaches the decoding
engine) is answered cleanly: the expected outcome, its message on one line, no traceback, no hang,
within 1 GiB more memory, nothing lost."""

import pytest
from corpus import cases, run_case
from corpus_engine import cases as engine_cases
from corpus_engine import run_case as run_engine_case
from corpus_results import cases as result_file_cases

CASES = cases() + result_file_cases()
ENGINE_CASES = engine_cases()


def test_corpus_is_large_and_names_are_unique():
    assert len(CASES) >= 300 and len(ENGINE_CASES) >= 40
    names = [c.name for c in CASES + ENGINE_CASES]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_hostile_input_is_answered_cleanly(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.status == "clean", f"{outcome.status}: {outcome.detail}\n--- output ---\n{outcome.output[-3000:]}"


@pytest.mark.parametrize("case", ENGINE_CASES, ids=lambda c: c.name)
def test_hostile_engine_input_is_answered_cleanly(case, tmp_path):
    outcome = run_engine_case(case, tmp_path)
    assert outcome.status == "clean", f"{outcome.status}: {outcome.detail}\n--- output ---\n{outcome.output[-3000:]}"
