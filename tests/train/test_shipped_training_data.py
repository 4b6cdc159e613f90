"""The self-distilled data committed for the embedded model: intact, answered by its target, no
benchmark text in any prompt, no prompt twice."""

from __future__ import annotations

import pytest

from specatlas import data_shards
from specatlas.contamination import shared_text
from specatlas.impls.engine.models import EMBEDDED
from specatlas.impls.families.answers import file_sha
from specatlas.prompt_pool import normalised

FOLDER = data_shards.default_folder(EMBEDDED)


def test_the_manifest_lists_exactly_the_shards_in_the_folder_with_their_hashes_and_counts():
    manifest = data_shards.read_manifest(FOLDER)
    listed = [entry["file"] for entry in manifest["magpie"] + manifest["answers"]]
    assert sorted(listed) == sorted(path.name for path in FOLDER.glob("*.npz"))
    assert manifest["answers"], "no answer shards committed"
    for entry in manifest["magpie"] + manifest["answers"]:
        assert file_sha((FOLDER / entry["file"]).read_bytes()) == entry["sha256"], entry["file"]
    assert manifest["totals"] == data_shards.totals(manifest)
    assert manifest["model"] == EMBEDDED


@pytest.mark.model
def test_every_prompt_is_recoverable_clean_and_unique(embedded):
    shards, _ = data_shards.load(FOLDER, embedded.tokenizer)  # third-party prompts re-read and hash-checked
    texts, refs = [], set()
    for _, conversations in shards:
        for c in conversations:
            assert c.ref not in refs, c.ref
            refs.add(c.ref)
            assert c.prompt and c.answer
            # The user's text, without the chat template around it (whose words are no benchmark's).
            text = embedded.tokenizer.decode(c.prompt, skip_special_tokens=True)
            texts.append(text.split("\nuser\n", 1)[1].rsplit("\nassistant\n", 1)[0])
    assert not shared_text(texts)
    assert len({normalised(t) for t in texts}) == len(texts)
    assert all(len(c.answer) <= data_shards.read_manifest(FOLDER)["settings"]["max_new_tokens"]
               for _, conversations in shards for c in conversations)

