"""Every hostile input of the corpus (corpus.py) is answered cleanly: the expected outcome, its
message on one line, no traceback, no hang, within 1 GiB more memory, nothing lost."""

import pytest
from corpus import cases, run_case
from corpus_results import cases as result_file_cases

CASES = cases() + result_file_cases()


def test_corpus_is_large_and_names_are_unique():
    assert len(CASES) >= 300
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_hostile_input_is_answered_cleanly(case, tmp_path):
    outcome = run_case(case, tmp_path)
    assert outcome.status == "clean", f"{outcome.status}: {outcome.detail}\n--- output ---\n{outcome.output[-3000:]}"
