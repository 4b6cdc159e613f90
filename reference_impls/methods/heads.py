"""Trained-head methods on the shared loop: Medusa, blockwise decoding, Hydra, EAGLE (static tree),
EAGLE-2 (dynamic tree), EAGLE-3 (its own head on EAGLE-2's tree), FR-Spec (EAGLE-2 drafting from
frequent tokens), ReDrafter (a recurrent head's beam search as a tree), Kangaroo (an adapter
on the target's shallow exit; its drafter is in `layer_view`), PaSS (learned look-ahead tokens
in the target's own forward) and SpecDec++ (a draft model whose acceptance head ends each
draft). The drafters are their families' (`families/`); here are the compositions: the paper's
tree or draft length, the verifier, the head loaded with `checkpoints.load_head`.

Each drafter reads the target's final normed hidden state (`hidden_layers = (N,)`): from the
prefill at `start`, then from the rows the target kept at each `observe`. The heads come from a
published-layout checkpoint (`checkpoints.load`); for the embedded model the trained heads shipped
in `trained_heads/` are the default.

Drafts are the heads' top-ranked tokens (deterministic: `q is None`), so exact-match verification
under greedy decoding and recursive rejection sampling under sampling are both lossless. PaSS and
SpecDec++ (which read no target state) draw their drafts when sampling and record the distribution
in `Draft.q`, for speculative sampling. Medusa's
typical acceptance is the paper's relaxed alternative: it accepts tokens the target finds
plausible enough, which changes the output distribution (labelled not lossless everywhere).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import torch

from specatlas.impls.engine import kv
from specatlas.impls.families import FAMILIES
from specatlas.impls.families.checkpoints import HeadNotShipped, load_head, shipped_head_folder
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.drafting import ModelDrafter
from specatlas.impls.engine.errors import ModelLoadError, unpickle_failure
from specatlas.impls.families.dflash import DFlashDrafter
from specatlas.impls.families.eagle import EAGLE_TREE, EagleDrafter
from specatlas.impls.families.eagle3 import Eagle3Drafter
from specatlas.impls.families.fr_spec import FR_SPEC_FRACTION
from specatlas.impls.families.hydra import HYDRA_TREE, HydraDrafter
from specatlas.impls.families.medusa import MEDUSA_TREE, MedusaDrafter
from specatlas.impls.families.pard import PARD_MAX_BLOCK, ParallelDrafter
from specatlas.impls.families.pass_tokens import PassDrafter
from specatlas.impls.families.redrafter import ReDrafterDrafter
from specatlas.impls.families.specdecpp import PredictedRejection
from specatlas.impls.methods.core import default_draft_model
from specatlas.impls.families.kangaroo import Kangaroo
from specatlas.impls.drafters.model_free.recycling import template_nodes
from specatlas.impls.engine.verification import GreedyMatch, TopKAcceptance, TypicalAcceptance
from specatlas.impls.registry import METHODS


# --------------------------------------------------------------------------------------------
# Compositions (the signature of methods.py's builders)


def medusa(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Cai et al. 2024: Medusa heads + the paper's 63-node tree; exact match when greedy, typical
    acceptance (relaxed) when sampling, as the paper runs it."""
    checkpoint = load_head(target, "medusa", drafter_checkpoint)
    drafter = MedusaDrafter(checkpoint.head, target.lm_head.weight, checkpoint.hidden_layers[0], label=checkpoint.describe())
    return SpeculativeDecoder(target, drafter, sampling_verifier=TypicalAcceptance(),
                              draft_length=policy.controller(target, max(map(len, MEDUSA_TREE)),
                                                             template_nodes(MEDUSA_TREE), max(map(len, MEDUSA_TREE))),
                              weights=checkpoint.files)


BLOCKWISE_CHAIN = tuple((0,) * depth for depth in range(1, METHODS["stern2018blockwise"].paper.block + 1))


def blockwise(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None,
              top_k_acceptance: int = 0) -> SpeculativeDecoder:
    """Stern et al. 2018: the extra heads' top-1 tokens form a block (a chain), verified in one
    forward; the longest prefix that matches the target's greedy choices is kept. Exact by
    default; `top_k_acceptance=k` is the paper's approximate variant (relaxed). Uses the Medusa
    heads (one per look-ahead position), `block` positions after the target's own token."""
    checkpoint = load_head(target, "medusa", drafter_checkpoint)
    drafter = MedusaDrafter(checkpoint.head, target.lm_head.weight, checkpoint.hidden_layers[0], tree=BLOCKWISE_CHAIN,
                            label=checkpoint.describe())
    greedy = TopKAcceptance(top_k_acceptance) if top_k_acceptance > 1 else GreedyMatch()
    depth = len(BLOCKWISE_CHAIN)
    return SpeculativeDecoder(target, drafter, greedy_verifier=greedy,
                              draft_length=policy.controller(target, depth, max_depth=depth), weights=checkpoint.files)


def eagle(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2024 (EAGLE-1): the feature-level head drafts EAGLE's 25-node static tree."""
    return _eagle(target, policy, drafter_checkpoint, EAGLE_TREE)


def eagle2(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2024 (EAGLE-2): the same head, with a dynamic tree grown and reranked by the
    head's cumulative confidence."""
    return _eagle(target, policy, drafter_checkpoint, spec=METHODS["li2024eagle2"])


def _eagle(target, policy, drafter_checkpoint, tree=None, spec=None, vocabulary=None, weights=None):
    """The EAGLE head drafting a static `tree`, or else the dynamic tree `spec` defines; `weights`:
    the other trained files its drafter reads (FR-Spec's ranking `vocabulary`)."""
    checkpoint = load_head(target, "eagle", drafter_checkpoint)
    weights = {**checkpoint.files, **(weights or {})}
    drafter = EagleDrafter(checkpoint.head, target.model.embed_tokens.weight, target.lm_head.weight,
                           checkpoint.hidden_layers[0], tree=tree, label=checkpoint.describe(), vocabulary=vocabulary,
                           **({} if tree else {"dynamic": _dynamic_tree(spec)}))
    if tree is None:
        return SpeculativeDecoder(target, drafter, draft_length=_dynamic_length(target, policy, spec), weights=weights)
    depth = max(map(len, tree))
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, depth, template_nodes(tree), depth),
                              weights=weights)


def _dynamic_tree(spec) -> tuple[int, int, int]:
    """EAGLE-2's dynamic tree as its drafters take it: (nodes kept, depth, top-k per level)."""
    return spec.paper.total, spec.paper.depth, spec.paper.top_k


def _dynamic_length(target, policy: DraftLengthPolicy, spec):
    """EAGLE-2's dynamic tree: top-k nodes per level up to the total kept."""
    total, depth, top_k = _dynamic_tree(spec)
    return policy.controller(target, depth, lambda k: min(total, top_k * k), depth)


def hydra(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Ankner et al. 2024: Hydra's sequentially dependent heads draft Medusa's 63-node tree (its
    code's default), each branch conditioned on its own tokens. Verification is exact (greedy
    matching; recursive rejection sampling when sampling), as in the paper's greedy evaluation."""
    checkpoint = load_head(target, "hydra", drafter_checkpoint)
    drafter = HydraDrafter(checkpoint.head, target.model.embed_tokens.weight, target.lm_head.weight,
                           checkpoint.hidden_layers[0], label=checkpoint.describe())
    depth = max(map(len, HYDRA_TREE))
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, depth, template_nodes(HYDRA_TREE), depth),
                              weights=checkpoint.files)


def eagle3(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Li et al. 2025 (EAGLE-3): the EAGLE-3 head (fused target states, own draft vocabulary)
    drafts EAGLE-2's dynamic tree with EAGLE-2's defaults (EaModel's for EAGLE-3 too)."""
    checkpoint = load_head(target, "eagle3", drafter_checkpoint)
    spec = METHODS["li2025eagle"]
    drafter = Eagle3Drafter(checkpoint.head, target.model.embed_tokens.weight, checkpoint.hidden_layers,
                            dynamic=_dynamic_tree(spec), label=checkpoint.describe())
    return SpeculativeDecoder(target, drafter, draft_length=_dynamic_length(target, policy, spec), weights=checkpoint.files)


def fr_spec(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Zhao et al. 2025 (FR-Spec): EAGLE-2 whose drafter ranks only the most frequent quarter of the
    vocabulary (its LM head cut to those rows); the target verifies over the whole vocabulary, so
    the output is unchanged. The ranking is FR-Spec's `freq_{V}.pt` (token ids, most frequent
    first) beside the EAGLE head, computed once from the training data by `specatlas train fr-spec`."""
    folder = Path(drafter_checkpoint) if drafter_checkpoint else shipped_head_folder("eagle")
    ranked, ranking = frequent_tokens(folder, target.config.vocab_size // FR_SPEC_FRACTION, drafter_checkpoint is None)
    return _eagle(target, policy, drafter_checkpoint, spec=METHODS["zhao2025fr"],
                  vocabulary=ranked.to(target.lm_head.weight.device), weights=ranking)


def frequent_tokens(folder: Path, size: int, is_shipped: bool) -> tuple[torch.Tensor, dict[str, Path]]:
    """FR-Spec's ranking beside the head in `folder` (token ids, most frequent first), and its file by name."""
    path = folder / f"freq_{size}.pt"
    if not path.is_file():
        error = HeadNotShipped if is_shipped else ModelLoadError
        raise error(f"no FR-Spec token ranking {path.name} beside the EAGLE head in {folder}; compute it with "
                    f"`specatlas train fr-spec{'' if is_shipped else ' --output ' + str(folder)}`")
    try:  # weights_only: a list of ints, never code to run
        ranked = torch.tensor(torch.load(path, map_location="cpu", weights_only=True), dtype=torch.long)
        if ranked.dim() != 1 or not len(ranked):
            raise ValueError("not a list of token ids")
    except Exception as exc:  # noqa: BLE001 - unpickling refused, truncated, wrong content...
        raise ModelLoadError(f"{path}: cannot read FR-Spec's token ranking ({unpickle_failure(exc)})") from None
    # Named as its head is (`DraftCheckpoint.name`): retraining the ranking changes what the method runs.
    return ranked, {f"{folder.name}/{path.name}" if is_shipped else str(path): path}


def kangaroo(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Liu et al. 2024: the target's first l layers + the adapter draft on the target's own cache,
    stopping early on low confidence; verification resumes from layer l (the draft carries its exit
    states). The exit layer is the adapter's own (its checkpoint config): 2 of SmolLM2's 30 layers,
    the same depth (~6%) as in the paper."""
    paper = METHODS["liu2024kangaroo"].paper
    checkpoint = load_head(target, "kangaroo", drafter_checkpoint)
    drafter = Kangaroo(target, checkpoint.head, checkpoint.hidden_layers[0], paper.threshold, checkpoint.describe())
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, paper.steps, max_depth=paper.steps),
                              weights=checkpoint.files)


def pass_tokens(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Monea et al. 2023 (PaSS): the frozen target drafts with learned look-ahead tokens appended to
    its own verification forward (`PassDrafter`), as many as the checkpoint holds (6 for the shipped
    one, `PassFamily.count`); speculative sampling keeps the drafts, exact when greedy."""
    checkpoint = load_head(target, "pass", drafter_checkpoint)
    tokens, embeddings = checkpoint.head, target.get_input_embeddings()
    drafter = PassDrafter(embeddings.num_embeddings, len(tokens), checkpoint.describe())
    # Each draft node brings a look-ahead row with it: a depth-d step verifies d drafts and d look-ahead rows.
    return SpeculativeDecoder(target, drafter, forward=partial(kv.forward, embed=tokens.embed(embeddings)),
                              draft_length=policy.controller(target, len(tokens), lambda d: 2 * d, len(tokens)),
                              weights=checkpoint.files)


def pard(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """An et al. 2025 (PARD): the adapted drafter drafts a block of K tokens in one forward over
    K - 1 mask tokens; exact match verifies it when greedy, speculative sampling when sampling."""
    return parallel_drafting(target, "an2025pard", METHODS["an2025pard"].paper.block, PARD_MAX_BLOCK,
                             "PARD's trained block", policy, drafter_checkpoint)


def pard2(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """An et al. 2026 (PARD-2), its target-independent mode: PARD's drafting and verification on a
    drafter trained with Confidence-Adaptive Token weights (`families.pard`), K = its eval draft_k,
    at most its trained block."""
    paper = METHODS["an2026pard"].paper
    return parallel_drafting(target, "an2026pard", paper.draft, paper.block, "PARD-2's eval draft_k", policy,
                             drafter_checkpoint)


def parallel_drafting(target, method: str, depth: int, max_depth: int, source: str, policy,
                      drafter_checkpoint) -> SpeculativeDecoder:
    """A parallel drafter's block of `depth` drafts (up to `max_depth` under the cost-aware policy)
    from one forward over mask tokens, on `method`'s trained head."""
    drafter, files = parallel_drafter(target, method, drafter_checkpoint)
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, depth, max_depth=max_depth, source=source),
                              weights=files)


def parallel_drafter(target, method: str, drafter_checkpoint) -> tuple[ParallelDrafter, dict]:
    """`method`'s trained parallel drafter and the weight files it loaded."""
    checkpoint = load_head(target, METHODS[method].trained_head, drafter_checkpoint)
    head = checkpoint.head
    drafter = ParallelDrafter(head.drafter(target), head.mask_id(target), head.embed(target),
                              label=f"{FAMILIES[checkpoint.family].title} drafter ({head.describe()}; {checkpoint.describe()})")
    return drafter, checkpoint.files


def dflash(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Chen et al. 2026 (DFlash): the block-diffusion drafter drafts the block's tokens after the
    pending one in one forward, reading the target's states injected as keys and values; exact
    match verifies the chain when greedy, speculative sampling when sampling."""
    return _dflash(target, "chen2026dflash", "dflash", policy, drafter_checkpoint)


def dflash_cpu(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """DFlash's hardware-sized variant: the same drafting and verification with its own one-layer
    drafter drafting blocks of 8."""
    return _dflash(target, "chen2026dflash-cpu", "dflash-cpu", policy, drafter_checkpoint)


def _dflash(target, method: str, folder: str, policy, drafter_checkpoint) -> SpeculativeDecoder:
    block = METHODS[method].paper.block
    checkpoint = load_head(target, "dflash", drafter_checkpoint, folder=folder)
    drafter = DFlashDrafter(checkpoint.head, target, checkpoint.hidden_layers,
                            label=f"DFlash drafter ({checkpoint.head.describe()}; {checkpoint.describe()})")
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(
        target, block - 1, max_depth=block - 1, source=f"DFlash's block of {block}"), weights=checkpoint.files)


def specdec_pp(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Huang et al. 2024 (SpecDec++): the draft model drafts a chain, its acceptance head ending
    it once the predicted chance that some token is rejected exceeds h (`PredictedRejection`);
    speculative sampling verifies it. The head is trained for the default draft model."""
    paper = METHODS["huang2024specdec"].paper
    model, label, weights = default_draft_model(target, draft_model)
    checkpoint = load_head(target, "specdecpp", drafter_checkpoint)
    if checkpoint.head.hidden != model.config.hidden_size:
        raise ModelLoadError(f"the SpecDec++ head reads states of width {checkpoint.head.hidden}; the draft model's "
                             f"are {model.config.hidden_size}")
    stop = PredictedRejection(checkpoint.head, model.config.num_hidden_layers, paper.threshold, paper.min_length)
    drafter = ModelDrafter(model, label=f"{label}, SpecDec++ stop at h = {paper.threshold} ({checkpoint.describe()})",
                           stop=stop)
    return SpeculativeDecoder(target, drafter,
                              draft_length=policy.controller(target, paper.max_length, max_depth=paper.max_length,
                                                             source="SpecDec++'s largest"),
                              weights={**weights, **checkpoint.files})


def redrafter(target, draft_model=None, policy=DraftLengthPolicy.paper(), drafter_checkpoint=None) -> SpeculativeDecoder:
    """Cheng, Zhang et al. 2024 (ReDrafter): the recurrent head's beam search (width 45, length 5:
    4 drafts a beam), the beams merged into a prefix tree and verified in one forward. Greedy:
    exact match over the tree, the paper's. Sampling: recursive rejection over the tree's
    deterministic drafts (lossless), not its code's rule, which accepts along each beam with
    min(1, p/q) under the beam search's own scores (the beams are not draws from q) and keeps the
    longest: approximate."""
    checkpoint = load_head(target, "redrafter", drafter_checkpoint)
    drafter = ReDrafterDrafter(checkpoint.head, target.model.embed_tokens.weight, checkpoint.hidden_layers[0],
                               label=checkpoint.describe())
    paper = METHODS["zhang2024recurrent"].paper
    depth = paper.length - 1
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, depth, lambda d: paper.width * d, depth),
                              weights=checkpoint.files)
