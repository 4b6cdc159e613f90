"""Everything a run measures, behind one call: SpecAtlas methods from the registry, and the
transformers `generate` paths a user would otherwise reach for ("peers").

Each generation also counts the target's forward passes with a hook, the same way for both
kinds, so mean accepted tokens and the verification widths are comparable across them.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch

from specatlas.bench.results import BASELINE
from specatlas.impls.engine.cpu_kernels import default_kernels, packed_layers
from specatlas.impls.engine.draft_length import FIXED, PAPER, DraftLengthPolicy, calibrate
from specatlas.impls.methods.core import default_draft_model
from specatlas.impls.registry import MethodSpec
from specatlas.impls.engine.sampling import Randomness, Sampling

# Peer ids -> (name, extra `generate` arguments, what they mean). prompt_lookup_num_tokens=10 is
# the value transformers' documentation uses; max_matching_ngram_size keeps its default (2).
# Assisted generation keeps transformers' default schedule (num_assistant_tokens=20, adapted
# online by the "heuristic" rule), with the same drafter as our draft-model methods.
PEERS = {
    "hf-generate": "transformers generate",
    "hf-prompt-lookup": "transformers prompt lookup",
    "hf-assisted": "transformers assisted generation",
}


# Every decoder makes this generation untimed before it is measured (bench, advise, run --compare),
# so first-call allocations and lazy initialisation count for none: the prompt and its new tokens.
WARMUP_PROMPT, WARMUP = "Name three colours.", 16


@dataclass
class Turn:
    """Raw numbers of one generation."""

    tokens: list[int]
    wall_seconds: float  # prefill included, as a user waits for it
    steps: int  # target forwards that committed tokens
    widths: dict[int, int]  # tokens fed per decoding forward -> how many such forwards (prefill excluded)
    draft_seconds: float | None = None  # None where the implementation does not expose it (peers)
    verify_seconds: float | None = None
    drafted_at: list[int] | None = None  # per draft position: steps that reached it
    accepted_at: list[int] | None = None


@dataclass
class Contender:
    id: str
    name: str
    kind: str  # "specatlas" or "peer"
    lossless: bool  # by design: greedy outputs must equal the baseline's
    setup: str  # drafter, draft-length policy or generate() arguments, as run
    generate: Callable[[list[int], int, float, int, set[int]], Turn] | None
    error: str | None = None  # why it could not run; it then has no samples
    policy: str | None = None  # draft-length policy: "paper", "cost-aware" or "fixed" (None: no drafter)

    @property
    def record(self) -> dict:
        """Its entry in a result file's `methods` (results.Method)."""
        return {"id": self.id, "name": self.name, "kind": self.kind, "lossless": self.lossless, "setup": self.setup,
                "error": self.error, "policy": self.policy}


def policy_of(method_id: str, policy: DraftLengthPolicy) -> str | None:
    """The `policy` a result row records: the policy's name; None for the baseline, which drafts nothing."""
    return None if method_id == BASELINE else policy.name


def contender_id(method_id: str, policy: DraftLengthPolicy) -> str:
    """A method's row id: its paper id with the paper's settings, suffixed under another policy
    (`...@cost-aware`, `...@fixed-4`)."""
    name = policy_of(method_id, policy)
    if name in (None, PAPER):
        return method_id
    return f"{method_id}@{name}" + (f"-{policy.depth}" if name == FIXED else "")


@contextmanager
def counting_forwards(model):
    """Collects the number of input tokens of every forward of `model` while active: ids, or rows
    of embeddings where a method feeds those (PaSS's look-ahead tokens)."""
    widths: list[int] = []

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        embeds = kwargs.get("inputs_embeds")
        widths.append(int(ids.shape[-1]) if ids is not None else int(embeds.shape[-2]) if embeds is not None else 0)

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield widths
    finally:
        handle.remove()


def specatlas_method(spec: MethodSpec, target, draft_model, policy: DraftLengthPolicy) -> Contender:
    decoder = spec.build(target, draft_model, policy)

    def generate(prompt, max_new_tokens, temperature, seed, stop):
        with counting_forwards(target) as widths:
            out = decoder.generate(prompt, max_new_tokens, Sampling(temperature), Randomness(seed), stop=stop)
        s = out.stats
        steps = len(s.accepted_lengths)
        return Turn(out.tokens, s.wall_seconds, steps, dict(Counter(widths[len(widths) - steps:])),
                    s.draft_seconds, s.verify_seconds, list(s.drafted_at), list(s.accepted_at))

    setup = decoder.drafter.describe() + "; " + decoder.draft_length.describe() if decoder.drafter else "no drafter"
    if policy.name == PAPER and spec.paper_settings:
        setup += f"; paper settings: {spec.paper_settings}"
    return Contender(contender_id(spec.id, policy), spec.name, "specatlas", spec.lossless, setup, generate,
                     policy=policy_of(spec.id, policy))


def peer(peer_id: str, target, draft_model, pad_token_id: int) -> Contender:
    if peer_id == "hf-prompt-lookup":
        extra, setup = {"prompt_lookup_num_tokens": 10}, "prompt_lookup_num_tokens=10, max_matching_ngram_size=2 (default)"
    elif peer_id == "hf-assisted":
        assistant, described = default_draft_model(target, draft_model)
        if draft_model is None:
            # Our default drafter shares the target's generation config, which transformers'
            # assistant schedule mutates: give it its own.
            assistant.generation_config = copy.deepcopy(target.generation_config)
        extra, setup = {"assistant_model": assistant}, f"assistant_model={described}, transformers' default schedule"
    else:
        extra, setup = {}, "plain generate()"

    def generate(prompt, max_new_tokens, temperature, seed, stop):
        ids = torch.tensor([prompt], device=target.device)
        if temperature == 0:
            sampling = {"do_sample": False}
        else:  # pure temperature sampling, as ours: transformers would otherwise default to top_k=50
            sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        torch.manual_seed(seed)
        with default_kernels(), counting_forwards(target) as widths:
            start = time.perf_counter()
            out = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                  eos_token_id=sorted(stop), pad_token_id=pad_token_id, **sampling, **extra)
            wall = time.perf_counter() - start
        # The prefill forward commits the first token, so every target forward is a step.
        return Turn(out[0, len(prompt):].tolist(), wall, len(widths), dict(Counter(widths[1:])))

    if packed_layers(target):
        setup += "; transformers' default kernels, as shipped (SpecAtlas decoders: packed oneDNN linears)"
    return Contender(peer_id, PEERS[peer_id], "peer", True, setup, generate)


def cost_curve(target, max_width: int = 64) -> dict[int, float]:
    """Seconds of one target forward over w new tokens (after a 64-token context), for a spread
    of w up to max_width: what a verification costs relative to a plain decoding step."""
    return {width: round(seconds, 6) for width, seconds in sorted(calibrate(target, max_width).items())}
