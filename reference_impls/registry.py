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
    builder: str  # "module:function": (target, draft model, DraftLengthPolicy, ...) -> SpeculativeDecoder
    uses_draft_model: bool = False
    has_paper: bool = True
    paper_settings: str = ""  # the paper's defaults that `specatlas run` uses, and where they come from
    trained_head: str = ""  # the head family (a `families.FAMILIES` name) a `--drafter-checkpoint` must hold
    uses_datastore: bool = False  # its builder takes `datastore=` (a loaded retrieval datastore: `--datastore`)
    # The widest draft one verification checks under the paper's settings, as (depth, nodes): what
    # `paper_settings` says in numbers; exact for static structures, a bound for adaptive ones.
    paper_draft: tuple[int, int] | None = None
    paper_draft_exact: bool = True
    # A labelled variant of another paper's method (that paper's id): its record, which its tags must
    # equal, is that paper's; its id and aliases are its own.
    variant_of: str = ""
    # When the record lists lossless_variants and its top-level flag describes all of them, the
    # variant this composition implements (its `variant` text); `lossless` must match that entry.
    variant: str = ""

    @property
    def record_id(self) -> str:
        """The paper record this composition implements (papers/<record_id>.yaml)."""
        return self.variant_of or self.id

    def builder_function(self):
        """The composition's builder (importing it imports torch)."""
        module, function = self.builder.split(":")
        return getattr(importlib.import_module(module), function)

    def build(self, *args, **kwargs):
        return self.builder_function()(*args, **kwargs)


_M = "specatlas.impls.methods"
METHODS: dict[str, MethodSpec] = {
    spec.id: spec
    for spec in [
        MethodSpec("baseline", "Autoregressive decoding (no speculation)", ("autoregressive", "ar"),
                   (), (), True, f"{_M}.core:autoregressive", has_paper=False),
        MethodSpec("leviathan2023fast", "Speculative decoding", ("speculative-decoding", "sd"),
                   ("independent-tuning-free",), ("speculative-sampling", "greedy-verification"),
                   True, f"{_M}.core:speculative_sampling", uses_draft_model=True,
                   paper_settings="γ = 7 (Table 2: T5-XXL drafted by T5-small on WMT EnDe)",
                   paper_draft=(7, 7)),
        MethodSpec("chen2023accelerating", "Speculative sampling", ("sps", "speculative-sampling"),
                   ("independent-tuning-free",), ("speculative-sampling",),
                   True, f"{_M}.core:chen_speculative_sampling", uses_draft_model=True,
                   paper_settings="K = 4 (its Chinchilla 70B experiments)",
                   paper_draft=(4, 4)),
        MethodSpec("sun2025block", "Block verification", ("block-verification",),
                   ("independent-tuning-free",), ("block-verification",),
                   True, f"{_M}.core:block_verification", uses_draft_model=True,
                   paper_settings="γ = 8, ours: the paper compares several block lengths and its table was not checked here; "
                                  "greedy decoding verifies by exact match",
                   paper_draft=(8, 8)),
        MethodSpec("miao2024specinfer", "SpecInfer token-tree verification", ("specinfer",),
                   ("independent-tuning-free", "token-tree", "multi-draft"),
                   ("token-tree-verification", "multi-draft-sampling"),
                   True, f"{_M}.core:specinfer", uses_draft_model=True,
                   paper_settings="token tree expansion <1, 1, 3, 1, 1, 1, 1, 1> (depth 8, 3 branches at depth 3)",
                   paper_draft=(8, 20)),
        MethodSpec("yang2024multi", "MCSD: multi-candidate speculative decoding", ("mcsd",),
                   ("independent-tuning-free", "multi-draft", "token-tree"),
                   ("multi-draft-sampling", "token-tree-verification"),
                   True, f"{_M}.core:multi_candidate", uses_draft_model=True,
                   paper_settings="k-config 4,2,2 (28 candidates, depth 3), drawn without replacement "
                                  "(its code's README and defaults)",
                   paper_draft=(3, 28)),
        MethodSpec("sun2023spectr", "SpecTr: draft selection via optimal transport", ("spectr",),
                   ("independent-tuning-free", "multi-draft"), ("optimal-transport-verification", "multi-draft-sampling"),
                   True, f"{_M}.core:spectr", uses_draft_model=True,
                   paper_settings="ours, not the paper's: k = 4 i.i.d. drafts of L = 4 tokens; K-SEQ selection with "
                                  "ρ solving ρβ(ρ) = 1 - (1 - β(ρ))^k",
                   paper_draft=(4, 16)),
        MethodSpec("sun2024spechub", "SpecHub: hub-centred multi-draft verification", ("spechub",),
                   ("independent-tuning-free", "multi-draft"), ("optimal-transport-verification",),
                   True, f"{_M}.core:spechub", uses_draft_model=True,
                   paper_settings="binary tree of depth 4 (30 drafts; its README's growmap k-ary_trees/2^5), each "
                                  "node's two children a hub pair; greedy decoding verifies by exact match",
                   paper_draft=(4, 30)),
        MethodSpec("weng2025traversal", "Traversal verification", ("traversal-verification",),
                   ("token-tree",), ("token-tree-verification", "block-verification"),
                   True, f"{_M}.core:traversal_verification", uses_draft_model=True,
                   paper_settings="ours, not the paper's: a binary tree of depth 4 (30 nodes), siblings drawn without "
                                  "replacement; leaf-to-root traversal verification (its Algorithm 3); greedy "
                                  "decoding verifies by exact match",
                   paper_draft=(4, 30)),
        MethodSpec("saxena2023prompt", "Prompt lookup decoding", ("pld", "prompt-lookup", "prompt-lookup-decoding"),
                   ("context-copy",), ("greedy-verification", "speculative-sampling"), True, f"{_M}.core:prompt_lookup",
                   paper_settings="max_ngram_size = 3, num_pred_tokens = 10 (its reference code)",
                   paper_draft=(10, 10), paper_draft_exact=False),
        MethodSpec("yang2023inference", "LLMA: inference with reference", ("llma",),
                   ("context-copy",), ("greedy-verification",), True, f"{_M}.retrieval:llma",
                   paper_settings="trigger n-grams 5..1, copy 20 tokens (its released code)",
                   paper_draft=(20, 20), paper_draft_exact=False),
        MethodSpec("he2024rest", "REST: retrieval-based speculative decoding", ("rest",),
                   ("retrieval-drafting", "token-tree"), ("token-tree-verification", "greedy-verification"),
                   True, f"{_M}.retrieval:rest", uses_datastore=True,
                   paper_settings="suffixes 16..2, 5000 retrieved entries, 10 tokens each, 64-node tree",
                   paper_draft=(10, 64), paper_draft_exact=False),
        MethodSpec("hu2025sam", "SAM-Decoding: suffix automaton drafts", ("sam-decoding",),
                   ("retrieval-drafting", "context-copy", "token-tree"), ("greedy-verification", "token-tree-verification"),
                   True, f"{_M}.retrieval:sam_decoding", uses_datastore=True,
                   paper_settings="l_bias = 4, l_threshold = 4, 10 draft tokens, Token Recycling's 80-node tree (its code)",
                   paper_draft=(10, 80), paper_draft_exact=False),
        MethodSpec("oliaro2025suffixdecoding", "SuffixDecoding: suffix trees over prompts and earlier outputs",
                   ("suffixdecoding", "suffix-decoding"),
                   ("retrieval-drafting", "context-copy", "dynamic-tree", "adaptive-draft-length"),
                   ("token-tree-verification",), True, f"{_M}.retrieval:suffix_decoding",
                   paper_settings="suffix trees of depth 64 over the request and earlier outputs; a pattern of p "
                                  "tokens grows at most α·p nodes (α = 1, at most 64) of estimated probability "
                                  ">= 0.1, the best-scoring tree wins (its simulator's defaults, ArcticInference); "
                                  "so at most 32 deep (p nodes, 64 - p levels left in the tree) and 58 nodes "
                                  "(at most 10 per level of D >= 0.1)",
                   paper_draft=(32, 58), paper_draft_exact=False),
        MethodSpec("santilli2023accelerating", "Jacobi decoding", ("jacobi-decoding",),
                   ("mask-predict-jacobi",), ("greedy-verification",), True, f"{_M}.parallel:jacobi_decoding",
                   paper_settings="window of 8 guesses (ours: the paper's MT blocks do not carry over)",
                   paper_draft=(8, 8)),
        MethodSpec("fu2024break", "Lookahead decoding", ("lookahead-decoding", "lookahead"),
                   ("mask-predict-jacobi", "ngram-pool"), ("greedy-verification", "speculative-sampling"),
                   True, f"{_M}.parallel:lookahead_decoding",
                   paper_settings="W = 15, N = 5, G = 15 (its 7B setting on an A100)",
                   paper_draft=(4, 60), paper_draft_exact=False),
        MethodSpec("cai2024medusa", "Medusa: multiple decoding heads", ("medusa",),
                   ("extra-heads", "token-tree"), ("token-tree-verification", "greedy-verification", "typical-acceptance"),
                   False, f"{_M}.heads:medusa", trained_head="medusa",
                   paper_settings="4 heads, 63-node tree mc_sim_7b_63 (depth 4); sampling: typical acceptance, "
                                  "epsilon 0.09, delta 0.3 (its code)",
                   paper_draft=(4, 63)),
        MethodSpec("stern2018blockwise", "Blockwise parallel decoding", ("blockwise-parallel-decoding", "bpd", "blockwise"),
                   ("extra-heads",), ("greedy-verification", "top-k-acceptance"), True, f"{_M}.heads:blockwise",
                   trained_head="medusa",
                   paper_settings="top-1 block of the heads' tokens, exact greedy acceptance (top-k acceptance opt-in)",
                   paper_draft=(4, 4), variant="frozen base model, exact greedy acceptance"),
        MethodSpec("li2024eagle", "EAGLE: feature-level draft head, static tree", ("eagle", "eagle-1"),
                   ("feature-level-drafting", "token-tree"),
                   ("token-tree-verification", "speculative-sampling", "greedy-verification"), True, f"{_M}.heads:eagle",
                   trained_head="eagle",
                   paper_settings="25-node static tree of depth 5 (its code)",
                   paper_draft=(5, 25)),
        MethodSpec("li2024eagle2", "EAGLE-2: dynamic draft trees", ("eagle-2", "eagle2"),
                   ("feature-level-drafting", "dynamic-tree"), ("speculative-sampling", "token-tree-verification"),
                   True, f"{_M}.heads:eagle2", trained_head="eagle",
                   paper_settings="dynamic tree: top-10 per level, depth 7, 60 nodes kept (its code's defaults)",
                   paper_draft=(7, 60)),
        MethodSpec("liu2024kangaroo", "Kangaroo: double early exiting", ("kangaroo",),
                   ("early-exit-layer-skip", "adaptive-draft-length"), ("greedy-verification",), True,
                   f"{_M}.heads:kangaroo", trained_head="kangaroo",
                   paper_settings="exit after layer 2 (of Vicuna-7B's 32; here of 30), at most 6 draft tokens, stop "
                                  "drafting below top-1 confidence 0.6 (its README's command)",
                   paper_draft=(6, 6), paper_draft_exact=False),
        MethodSpec("an2025pard", "PARD: parallel draft model adaptation", ("pard",),
                   ("independent-fine-tuned", "multi-token-prediction"), ("greedy-verification",), True,
                   f"{_M}.heads:pard", trained_head="pard",
                   paper_settings="K = 8 tokens drafted by one drafter forward over 7 mask tokens, trained with COD "
                                  "retention 0.7 a mask depth, floor 0.2 (its code's training config, para_num 8); "
                                  "the drafter adapted here is the distilled 2-layer drafter",
                   paper_draft=(8, 8)),
        MethodSpec("chen2026dflash", "DFlash: block diffusion drafter", ("dflash",),
                   ("independent-fine-tuned",), ("greedy-verification",), True,
                   f"{_M}.heads:dflash", trained_head="dflash",
                   paper_settings="blocks of 16 (15 drafts) from one forward of 5 draft layers, each reading the "
                                  "target's states at 5 layers spread from layer 1 to the fourth-last, fused and "
                                  "injected as keys and values; loss weights exp(-(k - 1) / 7) (its released "
                                  "b16 drafters and code)",
                   paper_draft=(15, 15)),
        MethodSpec("ankner2024hydra", "Hydra: sequentially dependent draft heads", ("hydra",),
                   ("extra-heads", "token-tree"), ("token-tree-verification",), True, f"{_M}.heads:hydra",
                   trained_head="hydra",
                   paper_settings="4 grounded MLP heads, Medusa's 63-node tree mc_sim_7b_63 (its code's default); "
                                  "exact verification",
                   paper_draft=(4, 63)),
        MethodSpec("li2025eagle", "EAGLE-3: fused features, training-time test", ("eagle3", "eagle-3"),
                   ("feature-level-drafting", "dynamic-tree"), ("token-tree-verification",), True, f"{_M}.heads:eagle3",
                   trained_head="eagle3",
                   paper_settings="EAGLE-2's dynamic tree: top-10 per level, depth 7, 60 nodes kept (EaModel's defaults)",
                   paper_draft=(7, 60)),
        MethodSpec("zhao2025fr", "FR-Spec: frequency-ranked draft vocabulary", ("fr-spec",),
                   ("feature-level-drafting",), ("greedy-verification", "speculative-sampling", "token-tree-verification"),
                   True, f"{_M}.heads:fr_spec", trained_head="eagle",
                   paper_settings="EAGLE-2 drafting from the most frequent quarter of the vocabulary (32k of "
                                  "Llama-3's 128k in the paper; here at most 12,288: the tokens the target chose in "
                                  "its training answers), dynamic tree top-10, depth 7, 60 nodes",
                   paper_draft=(7, 60)),
        MethodSpec("zhang2024recurrent", "ReDrafter: recurrent drafter, beam search, dynamic tree attention", ("redrafter",),
                   ("feature-level-drafting", "token-tree"), ("token-tree-verification",), True, f"{_M}.heads:redrafter",
                   trained_head="redrafter",
                   paper_settings="beam width 45, beam length 5 (the target's token + 4 drafts), each beam extended by "
                                  "its 50 likeliest tokens (its README's MT-Bench command, warp_logits); beams merged "
                                  "into a prefix tree (dynamic tree attention), exact verification; sampling: recursive "
                                  "rejection over the tree (lossless), not its code's approximate per-beam rule",
                   paper_draft=(4, 180), paper_draft_exact=False),
        MethodSpec("luo2025turning", "Token Recycling", ("token-recycling",),
                   ("ngram-pool", "token-tree"), ("token-tree-verification",), True, f"{_M}.parallel:token_recycling",
                   paper_settings="top-8 adjacency table, static 80-node tree of depth 6",
                   paper_draft=(6, 80)),
        MethodSpec("zhang2024draft", "Draft & Verify: self-speculative decoding by layer skipping",
                   ("draft-and-verify", "self-speculative"), ("early-exit-layer-skip", "adaptive-draft-length"),
                   ("greedy-verification", "speculative-sampling"), True, f"{_M}.self_speculative:draft_and_verify",
                   paper_settings="skipped layers by Bayesian optimisation, 1000 iterations on 8 prompts x 32 tokens "
                                  "(search.ipynb; on a CPU 48 iterations on 2 prompts), whole layers; at most 12 draft "
                                  "tokens, adaptive exit threshold from 0.6 (evaluate_sum.ipynb)",
                   paper_draft=(12, 12), paper_draft_exact=False),
        MethodSpec("xia2025swift", "SWIFT: on-the-fly self-speculative decoding", ("swift",),
                   ("early-exit-layer-skip", "adaptive-draft-length"),
                   ("greedy-verification", "speculative-sampling", "token-tree-verification"), True, f"{_M}.self_speculative:swift",
                   paper_settings="context window 50, skip ratio 0.45, Bayesian step every 25, stop at matchness 0.93 "
                                  "/ 300 idle / 1000 steps; exit below confidence 0.8, at most 25 draft tokens, "
                                  "3/5/8/10 candidates per depth (eval_llama.sh and its code)",
                   paper_draft=(25, 250), paper_draft_exact=False),
        MethodSpec("spector2023accelerating", "Staged speculative decoding", ("staged-speculative-decoding",),
                   ("cascaded-drafting", "token-tree"), ("token-tree-verification", "greedy-verification"),
                   True, f"{_M}.self_speculative:staged", uses_draft_model=True,
                   paper_settings="ours (the paper sizes neither for this model): the draft model's 8-token greedy chain "
                                  "by speculative decoding with prompt lookup (for its n-gram model), 16 most probable "
                                  "tree nodes",
                   paper_draft=(8, 16), paper_draft_exact=False),
        MethodSpec("chen2024sequoia", "Sequoia: hardware-aware optimal token trees", ("sequoia",),
                   ("independent-tuning-free", "dynamic-tree"), ("multi-draft-sampling", "token-tree-verification"),
                   True, f"{_M}.core:sequoia", uses_draft_model=True,
                   paper_settings="acceptance vector over W = 16 children (tests/test_accept.py), measured per target, "
                                  "drafter and sampling; the tree of most expected tokens per second among at most "
                                  "128 nodes and 10 levels, root included (tree_search.py, demo-config.json), sized "
                                  "on this machine's measured cost curves; siblings drawn without replacement",
                   paper_draft=(9, 127), paper_draft_exact=False),
        MethodSpec("hu2025sam-eagle2", "SAM-Decoding[EAGLE-2]: suffix automaton drafts, EAGLE-2 trees after short matches",
                   ("sam-decoding-eagle2",),
                   ("retrieval-drafting", "context-copy", "token-tree"), ("greedy-verification", "token-tree-verification"),
                   True, f"{_M}.retrieval:sam_decoding_eagle2", trained_head="eagle", variant_of="hu2025sam",
                   uses_datastore=True,
                   paper_settings="15 draft tokens, l_threshold = 5, l_bias = 5; below the threshold EAGLE-2's dynamic "
                                  "tree with total_tokens 63, depth 5, top_k 8 (its code at 061897e, the commit of "
                                  "its Spec-Bench table: evaluation/inference_samd.py, Eagle2Model's defaults)",
                   paper_draft=(15, 63), paper_draft_exact=False),
        MethodSpec("monea2023pass", "PaSS: parallel speculative sampling with look-ahead tokens", ("pass",),
                   ("learnable-draft-tokens",), ("speculative-sampling",), True, f"{_M}.heads:pass_tokens",
                   trained_head="pass",
                   paper_settings="k = 6 learned look-ahead tokens appended to the frozen target's forward, our "
                                  "choice: the paper ablates their number and summaries of it say the running time "
                                  "falls up to 6, but its text was not reachable to cite a section or a stated "
                                  "default; a fully accepted draft's forward drafts the next, else the next forward "
                                  "drafts only",
                   paper_draft=(6, 6)),
        MethodSpec("huang2024specdec", "SpecDec++: adaptive candidate lengths", ("specdec++",),
                   ("independent-tuning-free", "adaptive-draft-length"), ("speculative-sampling",), True,
                   f"{_M}.heads:specdec_pp", uses_draft_model=True, trained_head="specdecpp",
                   paper_settings="acceptance head of 3 ResBlocks trained with rejected tokens weighted 6 (its README's "
                                  "training command); stop once the predicted P(some draft rejected) > h = 0.7, "
                                  "candidate length bounded to [2, 20] (specdec_pp/sample.py)",
                   paper_draft=(20, 20), paper_draft_exact=False),
        MethodSpec("liu2024online", "Online speculative decoding: the drafter distilled on the queries it serves",
                   ("osd", "online-sd"), ("independent-fine-tuned",), ("speculative-sampling",),
                   True, f"{_M}.core:online_speculative_decoding", uses_draft_model=True,
                   paper_settings="5 proposed tokens; the target's distributions at every rejected draft token kept "
                                  "per request, one AdamW step of forward KL on them every 8 requests, learning rate "
                                  "1e-4 constant, no weight decay, then the buffer emptied (its code: "
                                  "bash_scripts/*/online.sh, distill/distill_trainer.py)",
                   paper_draft=(5, 5)),
        MethodSpec("liu2025parallel", "PEARL: parallel speculative decoding with adaptive draft length", ("pearl",),
                   ("independent-tuning-free", "parallel-drafting-pipeline", "adaptive-draft-length"),
                   ("speculative-sampling",), True, f"{_M}.core:pearl", uses_draft_model=True,
                   paper_settings="γ = 5 drafted per round while the target verifies the last round's (its README's "
                                  "command and run_para_sd.sh, 7B drafting 70B); pre-verify / post-verify; greedy "
                                  "decoding verifies by exact match. Here the drafter runs on a thread beside the "
                                  "target's forward (the paper: two GPUs)",
                   paper_draft=(5, 5), paper_draft_exact=False),
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
