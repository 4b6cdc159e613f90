"""Every runnable method, by paper id: importable without torch.

The catalog validator and the site read ids, aliases, taxonomy nodes and the lossless flag from
here; `build` imports the composition (and torch) only when a method actually runs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class MethodSpec:
    id: str  # a paper id (papers/<id>.yaml), or a non-paper id such as "baseline"
    name: str
    aliases: tuple[str, ...]
    drafting: tuple[str, ...]  # taxonomy nodes (taxonomy/drafting.yaml) this composition implements
    verification: tuple[str, ...]  # taxonomy nodes (taxonomy/verification.yaml)
    lossless: bool
    builder: str  # "module:function" returning a SpeculativeDecoder
    uses_draft_model: bool = False
    has_paper: bool = True

    def build(self, *args, **kwargs):
        module, function = self.builder.split(":")
        return getattr(importlib.import_module(module), function)(*args, **kwargs)


_M = "specatlas.impls.methods"
METHODS: dict[str, MethodSpec] = {
    spec.id: spec
    for spec in [
        MethodSpec("baseline", "Autoregressive decoding (no speculation)", ("autoregressive", "ar"),
                   (), (), True, f"{_M}:autoregressive", has_paper=False),
        MethodSpec("leviathan2023fast", "Speculative decoding", ("speculative-decoding", "sd"),
                   ("independent-tuning-free",), ("speculative-sampling", "greedy-verification"),
                   True, f"{_M}:speculative_sampling", uses_draft_model=True),
        MethodSpec("chen2023accelerating", "Speculative sampling", ("sps", "speculative-sampling"),
                   ("independent-tuning-free",), ("speculative-sampling",),
                   True, f"{_M}:speculative_sampling", uses_draft_model=True),
        MethodSpec("miao2024specinfer", "SpecInfer token-tree verification", ("specinfer",),
                   ("independent-tuning-free", "token-tree", "multi-draft"),
                   ("token-tree-verification", "multi-draft-sampling"),
                   True, f"{_M}:specinfer", uses_draft_model=True),
        MethodSpec("saxena2023prompt", "Prompt lookup decoding", ("pld", "prompt-lookup", "prompt-lookup-decoding"),
                   ("context-copy",), ("greedy-verification", "speculative-sampling"), True, f"{_M}:prompt_lookup"),
        MethodSpec("yang2023inference", "LLMA: inference with reference", ("llma",),
                   ("context-copy",), ("greedy-verification",), True, f"{_M}_retrieval:llma"),
        MethodSpec("he2024rest", "REST: retrieval-based speculative decoding", ("rest",),
                   ("retrieval-drafting", "token-tree"), ("token-tree-verification", "greedy-verification"),
                   True, f"{_M}_retrieval:rest"),
        MethodSpec("hu2025sam", "SAM-Decoding: suffix automaton drafts", ("sam-decoding",),
                   ("retrieval-drafting", "context-copy", "token-tree"), ("greedy-verification", "token-tree-verification"),
                   True, f"{_M}_retrieval:sam_decoding"),
        MethodSpec("santilli2023accelerating", "Jacobi decoding", ("jacobi-decoding",),
                   ("mask-predict-jacobi",), ("greedy-verification",), True, f"{_M}_parallel:jacobi_decoding"),
        MethodSpec("fu2024break", "Lookahead decoding", ("lookahead-decoding", "lookahead"),
                   ("mask-predict-jacobi", "ngram-pool"), ("greedy-verification", "speculative-sampling"),
                   True, f"{_M}_parallel:lookahead_decoding"),
        MethodSpec("luo2025turning", "Token Recycling", ("token-recycling",),
                   ("ngram-pool", "token-tree"), ("token-tree-verification",), True, f"{_M}_parallel:token_recycling"),
    ]
}


def implemented_ids() -> list[str]:
    return sorted(METHODS)


def resolve(name: str) -> MethodSpec | None:
    """A method by id or alias, case-insensitively."""
    key = name.strip().lower()
    for spec in METHODS.values():
        if key == spec.id or key in spec.aliases:
            return spec
    return None


def all_names() -> list[str]:
    return sorted({name for spec in METHODS.values() for name in (spec.id, *spec.aliases)})
