"""FR-Spec (Zhao et al. 2025): not a head but a token ranking, `freq_{V}.pt` beside the EAGLE head that
FR-Spec drafts with (`methods.heads.fr_spec` reads it)."""

from __future__ import annotations

import io

import torch

from specatlas.impls.families.base import Family
from specatlas.impls.engine.models import eos_ids
from specatlas.impls.families.training import coverage, frequency_ranked, split

# FR-Spec's main setting keeps 32,768 of Llama-3's 128,256 tokens (thunlp/FR-Spec run_eagle_fr_spec.sh; the
# abstract's "75% less LM-head computation"): a quarter of the vocabulary, 12,288 of SmolLM2's 49,152.
FR_SPEC_FRACTION = 4


class FrSpecFamily(Family):
    """FR-Spec's token ranking, not a head: the target's greedy answer tokens of the training
    conversations counted, the most frequent quarter of the vocabulary kept (FR-Spec's 32k of
    128k), end-of-sequence ids always in (thunlp/FR-Spec fr.py does the same), saved as FR-Spec's
    `freq_{V}.pt` (a list of token ids, most frequent first) beside the EAGLE head that FR-Spec
    drafts with. FR-Spec counts a large corpus; ours is the target's own answers, which use a few
    thousand distinct tokens, so the tokens they never chose fill the quarter in id order: a BPE
    vocabulary's ids follow its merge order, which tracks corpus frequency."""

    name, folder = "fr-spec", "eagle"
    paper, aliases = "zhao2025fr", ("fr-spec", "frspec")

    def layers(self, model) -> tuple[int, ...]:
        return ()

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        vocab = loaded.model.config.vocab_size
        size = vocab // FR_SPEC_FRACTION
        train_ids, test_ids = split(features, run.seed)
        ranked = frequency_ranked(features, train_ids, vocab)[:size].tolist()
        seen = set(ranked)
        ranked += [token for token in range(vocab) if token not in seen][: size - len(ranked)]
        missing = sorted(eos_ids(loaded.model, loaded.tokenizer) - set(ranked))
        ranked = ranked[: size - len(missing)] + missing
        covered = coverage(features, test_ids, ranked)
        summary = f"{len(ranked)} token ids in freq_{size}.pt; they cover {covered:.2%} of the held-out answer tokens"
        buffer = io.BytesIO()
        torch.save(ranked, buffer)
        card = (f"# FR-Spec token ranking for {loaded.name}\n\n{summary} ({len(test_ids)} held-out conversations); "
                f"counted on {len(train_ids)} conversations of {features.source or 'the target answers'}, then filled in id order (see `families.fr_spec.FrSpecFamily`).\n\nReproduce (writes this file):\n\n"
                f"```\n{command}\n```\n")
        # Into the EAGLE head's folder, whose files stay (every other file is carried over).
        self.write(output, {f"freq_{size}.pt": buffer.getvalue(), f"freq_{size}.md": card}, keep=lambda name: True)
        return summary
