"""The training prompt pool: sources, filters and order."""

from __future__ import annotations

import json


from specatlas import contamination, prompt_pool
from specatlas.contamination import shared_text
from specatlas.prompt_pool import PoolPrompt, opening_turns, pool


def test_sharegpt_is_read_up_to_the_record_it_is_cut_off_in():
    records = [{"id": "a_0", "conversations": [{"from": "human", "value": " Write a haiku about rain. "},
                                                {"from": "gpt", "value": "..."}]},
               {"id": "b_1", "conversations": [{"from": "gpt", "value": "a continuation"}]},
               {"id": "c_0", "conversations": []},
               {"id": "d_0", "conversations": [{"from": "human", "value": "Plan a trip to Lisbon."}]}]
    text = json.dumps(records, indent=2)
    cut = text[: text.index("Plan a trip") + 5]  # mid-record, as the wheel's file is
    assert opening_turns(cut) == [PoolPrompt("sharegpt:a_0", "Write a haiku about rain.")]
    assert [p.ref for p in opening_turns(text)] == ["sharegpt:a_0", "sharegpt:d_0"]


def test_the_pool_drops_duplicates_short_or_foreign_text_and_benchmark_text(monkeypatch):
    planted = "one two three four five six seven eight nine ten, a planted benchmark passage"
    turns, grams = contamination.fingerprints()
    monkeypatch.setattr(contamination, "fingerprints",
                        lambda: (turns, grams | contamination.gram_hashes("three four five six seven eight nine ten")))
    monkeypatch.setattr(prompt_pool, "is_clean", contamination.is_clean)
    sources = [[PoolPrompt("project:train:0", "Explain how tides work, briefly."),
                PoolPrompt("project:train:1", "EXPLAIN how tides   work -- briefly!"),
                PoolPrompt("project:train:2", "too short"),
                PoolPrompt("project:train:3", "Объясни, как работают приливы и отливы, кратко.")],
               [PoolPrompt("sharegpt:x_0", f"Please continue: {planted}")]]
    kept, report = pool(sources)
    assert [p.ref for p in kept] == ["project:train:0"]
    assert report == {"project": {"read": 4, "kept": 1, "dropped: duplicate": 1, "dropped: length or script": 2},
                      "sharegpt": {"read": 1, "dropped: benchmark text": 1}}


def test_pool_order_depends_on_the_reference_only_so_a_grown_pool_keeps_its_order():
    prompts = [PoolPrompt(f"project:train:{i}", f"Prompt number {i} about gardening.") for i in range(40)]
    small, _ = pool([prompts[:20]])
    large, _ = pool([prompts])
    assert [p.ref for p in large if p in small] == [p.ref for p in small]
    assert [p.ref for p in small] != sorted(p.ref for p in small)  # shuffled, not in source order


def test_the_projects_own_sources_share_no_text_with_any_benchmark():
    from specatlas.paths import papers_dir

    import yaml

    records = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(papers_dir().glob("*.yaml"))]
    own = prompt_pool.project() + prompt_pool.templated(records)
    assert len(own) > 1000
    assert not shared_text([p.text for p in own])


def test_duplicates_are_judged_on_words_and_signs_not_punctuation_or_case():
    normalised = prompt_pool.normalised
    assert normalised("Convert -28 degrees Celsius!") != normalised("Convert 28 degrees Celsius.")  # two prompts
    assert normalised("A well-known fact, e.g. this.") == normalised("a WELL known fact e g this")
