"""PARD's block drafter: what it is trained on is what it drafts with, and COD keeps whole branches;
PARD-2's Confidence-Adaptive Token objective on it."""

import math

import pytest
import torch

from specatlas.impls.engine.drafting import Prefill
from specatlas.impls.engine.errors import ModelLoadError
from specatlas.impls.engine.models import EMBEDDED
from specatlas.impls.engine.sampling import Randomness, Sampling
from specatlas.impls.families import FAMILIES, checkpoints
from specatlas.impls.families.checkpoints import HeadNotShipped
from specatlas.impls.families.pard import (ParallelDraft, ParallelDrafter, Teacher, block_rows, block_states,
                                           cat_weights, cod_rows, rows_for)
from specatlas.impls.families.training import Features
from specatlas.impls.methods import heads
from tests.impls.toy import tiny_llama


def test_a_mask_row_sees_the_real_tokens_up_to_its_base_and_the_masks_before_it_on_its_branch():
    rows = block_rows(6, 3)
    seen = rows.visible()
    index = {(int(m), int(j)): r for r, (m, j) in enumerate(zip(rows.depth, rows.positions))}
    for (m, j), r in index.items():
        want = {(0, i) for i in range(j - m + 1)} | {(k, j - m + k) for k in range(1, m + 1)}
        got = {key for key, other in index.items() if seen[r, other]}
        assert got == want, (m, j)
    assert min(j - m for m, j in index) == 0  # no mask row without a real token before it


def test_cod_keeps_a_shrinking_share_of_each_depth_and_only_whole_branches():
    tokens = torch.arange(200) % 17
    rows = cod_rows(tokens, 8, 0.7, 0.2, torch.Generator().manual_seed(3))
    kept = {(int(m), int(j)) for m, j in zip(rows.depth, rows.positions)}
    counts = [sum(1 for m, _ in kept if m == depth) for depth in range(8)]
    assert counts[0] == 200 and all(a >= b for a, b in zip(counts, counts[1:])) and counts[7] > 0
    assert counts[1] <= int(200 * 0.7) and counts[7] <= int(200 * 0.2)
    assert all((m - 1, j - 1) in kept for m, j in kept if m > 0)  # each mask's branch is whole
    nxt = rows.positions + 1
    assert torch.equal(rows.labels[nxt < 200], tokens[nxt[nxt < 200]])


def test_the_drafted_block_is_the_block_its_training_rows_predict():
    """One inference forward (cached context + masks) and the training rows of the same base give
    the same distributions: the drafter is trained on exactly what it drafts with."""
    target = tiny_llama(5, layers=3, vocab=16)
    torch.manual_seed(0)
    student = ParallelDraft(target, 1, 10).to(target.dtype)
    student.draft_vocab.copy_(torch.arange(10))
    with torch.no_grad():
        student.mask_embedding.normal_()
    model, embed, mask_id = student.drafter(target), student.embed(target), student.mask_id(target)
    context = [3, 1, 4, 1, 5, 9, 2]
    drafter = ParallelDrafter(model, mask_id, embed)
    drafter.start(context[:4], Prefill(tuple(context[:4])))
    padded = torch.tensor(context + [0, 0, 0])  # the block's positions; no row of the base's branch sees them
    rows = rows_for(padded, block_rows(len(padded), 4, first_base=len(context) - 1))
    with torch.no_grad():
        draft = drafter.propose(context, 4, Sampling(1.0), Randomness(0))
        logits = model.lm_head(block_states(model, embed, rows, mask_id))
    base = len(context) - 1
    on_branch = (rows.positions - rows.depth) == base
    want = Sampling(1.0).probs(logits[on_branch][rows.depth[on_branch].argsort()])
    assert len(draft.tokens) == 4 and torch.allclose(draft.q, want, atol=1e-9)
    # The masks never stay in the drafter's cache: the next block starts from the committed text.
    assert drafter.cached == context and drafter.cache.get_seq_length() == len(context)


def test_cat_weights_are_the_targets_probability_of_the_blocks_earlier_tokens():
    """Row (position j, depth m) drafts token j + 1 after the drafts of tokens j - m + 1 .. j: the
    target keeps them with probability confidence[j - m] x ... x confidence[j - 1]."""
    confidence = torch.tensor([0.5, 0.8, 0.9, 1.0, 0.6])
    positions, depth = torch.tensor([2, 2, 2, 3, 4, 4]), torch.tensor([0, 1, 2, 2, 4, 1])
    want = torch.tensor([1.0, 0.8, 0.8 * 0.5, 0.9 * 0.8, 1.0 * 0.9 * 0.8 * 0.5, 1.0])
    torch.testing.assert_close(cat_weights(confidence, positions, depth), want)


def test_pard2_row_losses_mix_cross_entropy_and_kl_and_weigh_each_row_by_its_cat_weight():
    """Three rows, by hand: loss_i = 0.1 CE_i + 1.0 KL(target_i || drafter_i), weights 1, c[1] and
    c[1] c[2]; the batch's loss is their weighted mean, which a uniform mean misses."""
    family = FAMILIES["pard2"]
    assert (family.ce, family.kd, family.temperature) == (0.1, 1.0, 1.0)  # its code's configs, via the registry
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 1.0, -2.0]], dtype=torch.float64)
    labels, positions, depth = torch.tensor([0, 2, 1]), torch.tensor([1, 2, 3]), torch.tensor([0, 1, 2])
    target = [[1 / 3, 1 / 3, 1 / 3], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.6, 0.1]]  # by position
    teacher = Teacher(torch.tensor([0.9, 0.5, 0.25, 1.0]), torch.tensor(target, dtype=torch.float64).log())
    losses, weights = family.row_losses(logits, labels, positions, depth, teacher)

    def by_hand(row: int) -> float:
        z = [math.exp(x) for x in logits[row].tolist()]
        q = [x / sum(z) for x in z]
        p = target[int(positions[row])]
        return 0.1 * -math.log(q[int(labels[row])]) + sum(a * math.log(a / b) for a, b in zip(p, q))

    want = [by_hand(row) for row in range(3)]
    torch.testing.assert_close(losses, torch.tensor(want, dtype=torch.float64))
    torch.testing.assert_close(weights, torch.tensor([1.0, 0.5, 0.5 * 0.25]))
    weighted = (want[0] + 0.5 * want[1] + 0.125 * want[2]) / 1.625
    assert float((losses * weights).sum() / weights.sum()) == pytest.approx(weighted)
    assert abs(weighted - sum(want) / 3) > 0.04  # the example tells CAT weights from uniform ones
    assert torch.equal(FAMILIES["pard"].row_losses(logits, labels, positions, depth, None)[1], torch.ones(3))


def test_pard2_teacher_is_the_targets_probability_of_each_next_data_token_and_its_distribution_on_the_vocabulary():
    target = tiny_llama(6, layers=2, vocab=16)
    tokens = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
    with torch.no_grad():
        out = target(input_ids=tokens[None])
    features = Features([tokens], [2], {}, [tokens])
    vocab = torch.tensor([1, 2, 3, 4, 5, 6, 9])
    teacher = FAMILIES["pard2"].teacher(target, features, 0, vocab)
    probs = out.logits[0].softmax(-1)
    want = torch.cat([probs[:-1].gather(1, tokens[1:, None])[:, 0], torch.ones(1)])
    torch.testing.assert_close(teacher.confidence, want.to(teacher.confidence.dtype), atol=1e-5, rtol=1e-5)
    restricted = out.logits[0][:, vocab].log_softmax(-1)
    torch.testing.assert_close(teacher.log_probs, restricted.to(teacher.log_probs.dtype), atol=1e-5, rtol=1e-5)


def test_pard_and_pard2_heads_share_a_layout_their_configs_tell_apart(tmp_path):
    """Each method loads its own family's head and refuses the other's in one line."""
    target = tiny_llama(5, layers=3, vocab=16)
    folders = {family: FAMILIES[family].save(ParallelDraft(target, 1, 10), tmp_path / family, target, "tiny")
               for family in ("pard", "pard2")}
    assert checkpoints.load(folders["pard2"], target).family == "pard2"
    assert checkpoints.load(folders["pard"], target).family == "pard"
    assert "PARD-2 drafter" in heads.pard2(target, drafter_checkpoint=folders["pard2"]).drafter.label
    with pytest.raises(ModelLoadError, match="is a pard2 checkpoint, this method needs pard$"):
        heads.pard(target, drafter_checkpoint=folders["pard2"])
    with pytest.raises(ModelLoadError, match="is a pard checkpoint, this method needs pard2$"):
        heads.pard2(target, drafter_checkpoint=folders["pard"])


def test_pard2_without_a_shipped_head_fails_in_one_line(tmp_path, monkeypatch):
    target = tiny_llama(5, layers=3, vocab=16)
    monkeypatch.setattr(checkpoints, "SHIPPED_HEADS", tmp_path)
    monkeypatch.setattr(target.config, "_name_or_path", EMBEDDED)
    with pytest.raises(HeadNotShipped, match="^no trained pard2 head is shipped yet; train one with `specatlas train "
                                             "pard2` or pass --drafter-checkpoint$"):
        heads.pard2(target)
