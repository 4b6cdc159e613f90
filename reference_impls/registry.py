"""Every runnable method, by paper id: importable without torch.

One definition per method (`MethodSpec`, keyword fields): its tags, its builder, and its paper's
constants with where they come from. The settings text (`paper_settings`), the widest draft under
them (`paper_draft`) and the numbers the builder runs (`constants_for`) are all derived from those
constants, so each is written once. The catalog validator and the site read ids, aliases,
taxonomy nodes and the lossless flag from here; `build` imports the composition (and torch) only
when a method actually runs.
"""

from __future__ import annotations

import importlib
import string
from dataclasses import dataclass, field
from types import MappingProxyType, SimpleNamespace
from typing import Callable, Mapping


@dataclass(frozen=True)
class Sized:
    """A structure sized for the hardware, not the paper's: an engineering variant of this project
    that the cost-aware policy runs (only on a CPU where `cpu_only`). `name` labels it; `constants`
    replace (or add to) the paper's."""

    name: str
    why: str
    constants: Mapping[str, object] = field(hash=False)
    cpu_only: bool = False

    def describe(self) -> str:
        return f"hardware-sized structure {self.name} ({self.why}), not the paper's"


def chain(name: str) -> Callable[[SimpleNamespace], tuple[int, int]]:
    """`draft` for a chain of the constant `name` tokens."""
    return lambda c: (getattr(c, name), getattr(c, name))


def expansion_nodes(widths: tuple[int, ...]) -> Callable[[int], int]:
    """Draft nodes of an expansion tree (SpecInfer's: widths[d] children per node at depth d) of
    depth k, as a function of k."""

    def nodes(depth: int) -> int:
        total, level = 0, 1
        for d in range(depth):
            level *= widths[d] if d < len(widths) else 1
            total += level
        return total

    return nodes


def expansion(name: str) -> Callable[[SimpleNamespace], tuple[int, int]]:
    """`draft` for an expansion tree whose widths are the constant `name`."""
    return lambda c: (len(getattr(c, name)), expansion_nodes(getattr(c, name))(len(getattr(c, name))))


class _Text(string.Formatter):
    """`str.format` that writes a tuple as its items joined by the field's spec (", " by default)."""

    def format_field(self, value, format_spec):
        if isinstance(value, tuple):
            return (format_spec or ", ").join(map(str, value))
        return super().format_field(value, format_spec)


@dataclass(frozen=True, kw_only=True)
class MethodSpec:
    id: str  # a paper id (papers/<id>.yaml), or a non-paper id such as "baseline"
    name: str
    aliases: tuple[str, ...] = ()
    drafting: tuple[str, ...] = ()  # taxonomy nodes (taxonomy/drafting.yaml) this composition implements
    verification: tuple[str, ...] = ()  # taxonomy nodes (taxonomy/verification.yaml)
    lossless: bool
    # "module:function", the module under `methods/` unless dotted: (target, draft model,
    # DraftLengthPolicy, ...) -> SpeculativeDecoder
    builder: str
    uses_draft_model: bool = False
    has_paper: bool = True
    trained_head: str = ""  # the head family (a `families.FAMILIES` name) a `--drafter-checkpoint` must hold
    uses_datastore: bool = False  # its builder takes `datastore=` (a loaded retrieval datastore: `--datastore`)
    # The paper's numbers the builder runs, by name (the builder reads them with `constants_for`).
    constants: Mapping[str, object] = field(default_factory=dict, hash=False)
    # The paper's defaults that `specatlas run` uses, in words: `{name}` stands for a constant,
    # `{draft_depth}` / `{draft_nodes}` for `paper_draft`; `source` says where they come from.
    settings: str = ""
    source: str = ""
    # The widest draft one verification checks under the paper's settings, as (depth, nodes), or a
    # function of the constants giving it: exact for static structures, a bound for adaptive ones.
    draft: tuple[int, int] | Callable[[SimpleNamespace], tuple[int, int]] | None = None
    draft_exact: bool = True
    sized: Sized | None = None  # the hardware-sized structure the cost-aware policy runs instead
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

    @property
    def paper(self) -> SimpleNamespace:
        """The paper's constants, as attributes."""
        return SimpleNamespace(**self.constants)

    @property
    def paper_draft(self) -> tuple[int, int] | None:
        return self.draft(self.paper) if callable(self.draft) else self.draft

    @property
    def paper_settings(self) -> str:
        depth, nodes = self.paper_draft or (None, None)
        text = _Text().format(self.settings, draft_depth=depth, draft_nodes=nodes, **self.constants)
        return f"{text} ({self.source})" if self.source else text

    def sized_for(self, policy, target=None) -> Sized | None:
        """The hardware-sized variant a run uses: the method's `sized`, under the cost-aware policy
        only (and on a CPU `target` where it is `cpu_only`). The one place a policy changes a
        structure; every other policy runs the paper's."""
        sized = self.sized
        if sized is None or not policy.is_cost_aware or (sized.cpu_only and target.device.type != "cpu"):
            return None
        return sized

    def constants_for(self, policy, target=None) -> SimpleNamespace:
        """The constants a run uses: the paper's, with the hardware-sized variant's (`sized_for`) over them."""
        sized = self.sized_for(policy, target)
        return SimpleNamespace(**{**self.constants, **sized.constants}) if sized else self.paper

    def builder_function(self):
        """The composition's builder (importing it imports torch)."""
        module, function = self.builder.split(":")
        return getattr(importlib.import_module(module if "." in module else f"{_M}.{module}"), function)

    def build(self, *args, **kwargs):
        return self.builder_function()(*args, **kwargs)


_M = "specatlas.impls.methods"

# EAGLE-2's dynamic tree (its code's defaults, EaModel's for EAGLE-3 too): top-k per level, depth, nodes kept.
EAGLE2_TREE = {"top_k": 10, "depth": 7, "total": 60}
# The cost-aware policy's trees for draft-model methods: 2 x 2 candidates for the two most
# uncertain positions, then chains.
TWO_BY_TWO = Sized("2x2-then-chains", "2 x 2 candidates at the first two depths, then chains", {"widths": (2, 2)})
# REST's node budget on the cost-aware policy: k levels of up to 3 branches each on average (the
# paper's 64 nodes suit a GPU, where width is nearly free; a CPU is not).
THREE_PER_LEVEL = Sized("3-nodes-per-level", "at most 3 tree nodes per drafted level", {"nodes_per_level": 3})
# SAM-Decoding's code defaults, which its SAM-Decoding[PARD] composition keeps.
SAM_DEFAULTS = MappingProxyType({"bias": 4, "threshold": 4, "tokens": 10})

METHODS: dict[str, MethodSpec] = {
    spec.id: spec
    for spec in [
        MethodSpec(id="baseline", name="Autoregressive decoding (no speculation)", aliases=("autoregressive", "ar"),
                   lossless=True, builder="core:autoregressive", has_paper=False),
        MethodSpec(id="leviathan2023fast", name="Speculative decoding", aliases=("speculative-decoding", "sd"),
                   drafting=("independent-tuning-free",), verification=("speculative-sampling", "greedy-verification"),
                   lossless=True, builder="core:speculative_sampling", uses_draft_model=True,
                   constants={"gamma": 7}, settings="γ = {gamma}",
                   source="Table 2: T5-XXL drafted by T5-small on WMT EnDe", draft=chain("gamma")),
        MethodSpec(id="chen2023accelerating", name="Speculative sampling", aliases=("sps", "speculative-sampling"),
                   drafting=("independent-tuning-free",), verification=("speculative-sampling",),
                   lossless=True, builder="core:chen_speculative_sampling", uses_draft_model=True,
                   constants={"k": 4}, settings="K = {k}", source="its Chinchilla 70B experiments", draft=chain("k")),
        MethodSpec(id="sun2025block", name="Block verification", aliases=("block-verification",),
                   drafting=("independent-tuning-free",), verification=("block-verification",),
                   lossless=True, builder="core:block_verification", uses_draft_model=True,
                   constants={"gamma": 8},
                   settings="γ = {gamma}, ours: the paper compares several block lengths and its table was not checked "
                            "here; greedy decoding verifies by exact match",
                   draft=chain("gamma")),
        MethodSpec(id="miao2024specinfer", name="SpecInfer token-tree verification", aliases=("specinfer",),
                   drafting=("independent-tuning-free", "token-tree", "multi-draft"),
                   verification=("token-tree-verification", "multi-draft-sampling"),
                   lossless=True, builder="core:specinfer", uses_draft_model=True,
                   constants={"widths": (1, 1, 3, 1, 1, 1, 1, 1)},
                   settings="token tree expansion <{widths}> (depth {draft_depth}, 3 branches at depth 3)",
                   draft=expansion("widths"), sized=TWO_BY_TWO),
        MethodSpec(id="yang2024multi", name="MCSD: multi-candidate speculative decoding", aliases=("mcsd",),
                   drafting=("independent-tuning-free", "multi-draft", "token-tree"),
                   verification=("multi-draft-sampling", "token-tree-verification"),
                   lossless=True, builder="core:multi_candidate", uses_draft_model=True,
                   constants={"k_config": (4, 2, 2)},
                   settings="k-config {k_config:,} ({draft_nodes} candidates, depth {draft_depth}), drawn without "
                            "replacement",
                   source="its code's README and defaults", draft=expansion("k_config")),
        MethodSpec(id="sun2023spectr", name="SpecTr: draft selection via optimal transport", aliases=("spectr",),
                   drafting=("independent-tuning-free", "multi-draft"),
                   verification=("optimal-transport-verification", "multi-draft-sampling"),
                   lossless=True, builder="core:spectr", uses_draft_model=True,
                   constants={"drafts": 4, "length": 4},
                   settings="ours, not the paper's: k = {drafts} i.i.d. drafts of L = {length} tokens; K-SEQ selection "
                            "with ρ solving ρβ(ρ) = 1 - (1 - β(ρ))^k",
                   draft=lambda c: (c.length, c.drafts * c.length)),
        MethodSpec(id="sun2024spechub", name="SpecHub: hub-centred multi-draft verification", aliases=("spechub",),
                   drafting=("independent-tuning-free", "multi-draft"), verification=("optimal-transport-verification",),
                   lossless=True, builder="core:spechub", uses_draft_model=True,
                   constants={"widths": (2, 2, 2, 2)},
                   settings="binary tree of depth {draft_depth} ({draft_nodes} drafts; its README's growmap "
                            "k-ary_trees/2^5), each node's two children a hub pair; greedy decoding verifies by exact match",
                   draft=expansion("widths"), sized=TWO_BY_TWO),
        MethodSpec(id="weng2025traversal", name="Traversal verification", aliases=("traversal-verification",),
                   drafting=("token-tree",), verification=("token-tree-verification", "block-verification"),
                   lossless=True, builder="core:traversal_verification", uses_draft_model=True,
                   constants={"widths": (2, 2, 2, 2)},
                   settings="ours, not the paper's: a binary tree of depth {draft_depth} ({draft_nodes} nodes), "
                            "siblings drawn without replacement; leaf-to-root traversal verification (its Algorithm "
                            "3); greedy decoding verifies by exact match",
                   draft=expansion("widths"), sized=TWO_BY_TWO),
        MethodSpec(id="saxena2023prompt", name="Prompt lookup decoding",
                   aliases=("pld", "prompt-lookup", "prompt-lookup-decoding"),
                   drafting=("context-copy",), verification=("greedy-verification", "speculative-sampling"),
                   lossless=True, builder="core:prompt_lookup",
                   constants={"ngram": 3, "tokens": 10},
                   settings="max_ngram_size = {ngram}, num_pred_tokens = {tokens}", source="its reference code",
                   draft=chain("tokens"), draft_exact=False),
        MethodSpec(id="yang2023inference", name="LLMA: inference with reference", aliases=("llma",),
                   drafting=("context-copy",), verification=("greedy-verification",),
                   lossless=True, builder="retrieval:llma",
                   constants={"copy": 20}, settings="trigger n-grams 5..1, copy {copy} tokens",
                   source="its released code", draft=chain("copy"), draft_exact=False),
        MethodSpec(id="he2024rest", name="REST: retrieval-based speculative decoding", aliases=("rest",),
                   drafting=("retrieval-drafting", "token-tree"),
                   verification=("token-tree-verification", "greedy-verification"),
                   lossless=True, builder="retrieval:rest", uses_datastore=True,
                   # Its code's defaults (github.com/FasterDecoding/REST): suffixes of at most 16 tokens tried
                   # down to 2, at most 5000 retrieved entries (a bound on the work of one lookup), 64 nodes.
                   constants={"depth": 10, "nodes": 64, "longest_suffix": 16, "shortest_suffix": 2, "retrieved": 5000},
                   settings="suffixes {longest_suffix}..{shortest_suffix}, {retrieved} retrieved entries, "
                            "{depth} tokens each, {nodes}-node tree",
                   draft=lambda c: (c.depth, c.nodes), draft_exact=False, sized=THREE_PER_LEVEL),
        MethodSpec(id="hu2025sam", name="SAM-Decoding: suffix automaton drafts", aliases=("sam-decoding",),
                   drafting=("retrieval-drafting", "context-copy", "token-tree"),
                   verification=("greedy-verification", "token-tree-verification"),
                   lossless=True, builder="retrieval:sam_decoding", uses_datastore=True,
                   constants=SAM_DEFAULTS,
                   settings="l_bias = {bias}, l_threshold = {threshold}, {tokens} draft tokens, Token Recycling's "
                            "{draft_nodes}-node tree",
                   source="its code", draft=lambda c: (c.tokens, 80), draft_exact=False),
        MethodSpec(id="oliaro2025suffixdecoding", name="SuffixDecoding: suffix trees over prompts and earlier outputs",
                   aliases=("suffixdecoding", "suffix-decoding"),
                   drafting=("retrieval-drafting", "context-copy", "dynamic-tree", "adaptive-draft-length"),
                   verification=("token-tree-verification",), lossless=True, builder="retrieval:suffix_decoding",
                   constants={"depth": 64, "factor": 1.0, "nodes": 64, "min_probability": 0.1},
                   settings="suffix trees of depth {depth} over the request and earlier outputs; a pattern of p tokens "
                            "grows at most α·p nodes (α = {factor:g}, at most {nodes}) of estimated probability >= "
                            "{min_probability}, the best-scoring tree wins (its simulator's defaults, ArcticInference); "
                            "so at most {draft_depth} deep (p nodes, {depth} - p levels left in the tree) and "
                            "{draft_nodes} nodes (at most 10 per level of D >= {min_probability})",
                   draft=(32, 58), draft_exact=False, sized=THREE_PER_LEVEL),
        MethodSpec(id="santilli2023accelerating", name="Jacobi decoding", aliases=("jacobi-decoding",),
                   drafting=("mask-predict-jacobi",), verification=("greedy-verification",),
                   lossless=True, builder="parallel:jacobi_decoding",
                   constants={"window": 8},
                   settings="window of {window} guesses (ours: the paper's MT blocks do not carry over)",
                   draft=chain("window")),
        MethodSpec(id="fu2024break", name="Lookahead decoding", aliases=("lookahead-decoding", "lookahead"),
                   drafting=("mask-predict-jacobi", "ngram-pool"), verification=("greedy-verification", "speculative-sampling"),
                   lossless=True, builder="parallel:lookahead_decoding",
                   constants={"window": 15, "ngram": 5, "guess_set": 15},
                   settings="W = {window}, N = {ngram}, G = {guess_set}", source="its 7B setting on an A100",
                   draft=lambda c: (c.ngram - 1, c.guess_set * (c.ngram - 1)), draft_exact=False,
                   # On a CPU every verified token costs ~11% of a step: the smallest window that still harvests 3-grams.
                   sized=Sized("cpu-window", "W = 3, N = 3, G = 3 on a CPU", {"window": 3, "ngram": 3, "guess_set": 3},
                               cpu_only=True)),
        MethodSpec(id="cai2024medusa", name="Medusa: multiple decoding heads", aliases=("medusa",),
                   drafting=("extra-heads", "token-tree"),
                   verification=("token-tree-verification", "greedy-verification", "typical-acceptance"),
                   lossless=False, builder="heads:medusa", trained_head="medusa",
                   settings="4 heads, {draft_nodes}-node tree mc_sim_7b_63 (depth {draft_depth}); sampling: typical "
                            "acceptance, epsilon 0.09, delta 0.3",
                   source="its code", draft=(4, 63)),
        MethodSpec(id="stern2018blockwise", name="Blockwise parallel decoding",
                   aliases=("blockwise-parallel-decoding", "bpd", "blockwise"),
                   drafting=("extra-heads",), verification=("greedy-verification", "top-k-acceptance"),
                   lossless=True, builder="heads:blockwise", trained_head="medusa",
                   constants={"block": 4},
                   settings="top-1 block of the heads' tokens, exact greedy acceptance (top-k acceptance opt-in)",
                   draft=chain("block"), variant="frozen base model, exact greedy acceptance"),
        MethodSpec(id="li2024eagle", name="EAGLE: feature-level draft head, static tree", aliases=("eagle", "eagle-1"),
                   drafting=("feature-level-drafting", "token-tree"),
                   verification=("token-tree-verification", "speculative-sampling", "greedy-verification"),
                   lossless=True, builder="heads:eagle", trained_head="eagle",
                   settings="{draft_nodes}-node static tree of depth {draft_depth}", source="its code", draft=(5, 25)),
        MethodSpec(id="li2024eagle2", name="EAGLE-2: dynamic draft trees", aliases=("eagle-2", "eagle2"),
                   drafting=("feature-level-drafting", "dynamic-tree"),
                   verification=("speculative-sampling", "token-tree-verification"),
                   lossless=True, builder="heads:eagle2", trained_head="eagle", constants=EAGLE2_TREE,
                   settings="dynamic tree: top-{top_k} per level, depth {depth}, {total} nodes kept",
                   source="its code's defaults", draft=lambda c: (c.depth, c.total)),
        MethodSpec(id="liu2024kangaroo", name="Kangaroo: double early exiting", aliases=("kangaroo",),
                   drafting=("early-exit-layer-skip", "adaptive-draft-length"), verification=("greedy-verification",),
                   lossless=True, builder="heads:kangaroo", trained_head="kangaroo",
                   constants={"steps": 6, "threshold": 0.6},
                   settings="exit after layer 2 (of Vicuna-7B's 32; here of 30), at most {steps} draft tokens, stop "
                            "drafting below top-1 confidence {threshold}",
                   source="its README's command", draft=chain("steps"), draft_exact=False),
        MethodSpec(id="an2025pard", name="PARD: parallel draft model adaptation", aliases=("pard",),
                   drafting=("independent-fine-tuned", "multi-token-prediction"), verification=("greedy-verification",),
                   lossless=True, builder="heads:pard", trained_head="pard",
                   constants={"block": 8, "retain": 0.7, "floor": 0.2},
                   settings="K = {block} tokens drafted by one drafter forward over 7 mask tokens, trained with "
                            "COD retention {retain} a mask depth, floor {floor} (its code's training config, para_num "
                            "{block}); the drafter adapted here is the distilled 2-layer drafter",
                   draft=chain("block")),
        MethodSpec(id="an2026pard", name="PARD-2: confidence-adaptive parallel draft model", aliases=("pard-2", "pard2"),
                   drafting=("independent-fine-tuned", "multi-token-prediction"),
                   verification=("greedy-verification", "speculative-sampling"),
                   lossless=True, builder="heads:pard2", trained_head="pard2",
                   constants={"draft": 15, "block": 16, "retain": 0.7, "floor": 0.1, "ce": 0.1, "kd": 1.0,
                              "temperature": 1.0},
                   settings="target-independent mode: K = {draft} tokens drafted by one drafter forward over mask "
                            "tokens (draft_k {draft}), trained on blocks of para_num {block} with COD retention "
                            "{retain} a mask depth, floor {floor}; Confidence-Adaptive Token loss: each row's weight "
                            "the target's probability of the block's earlier tokens, {ce} x cross-entropy + {kd} x "
                            "KL to the target at temperature {temperature}; the drafter adapted here is the "
                            "distilled 2-layer drafter",
                   source="its code's configs, github.com/AMD-AGI/PARD config/train/example_pard2_llama3.yaml and "
                          "config/eval/pard2_l3_eval.yaml",
                   draft=chain("draft")),
        MethodSpec(id="chen2026dflash", name="DFlash: block diffusion drafter", aliases=("dflash",),
                   drafting=("independent-fine-tuned",), verification=("greedy-verification",),
                   lossless=True, builder="heads:dflash", trained_head="dflash",
                   constants={"block": 16, "draft_layers": 5, "decay": 7},
                   settings="blocks of {block} from one forward of {draft_layers} draft layers, each reading the "
                            "target's states at {draft_layers} layers spread from layer 1 to the fourth-last, fused "
                            "and injected as keys and values; loss weights exp(-(k - 1) / {decay})",
                   source="its released b16 drafters and code", draft=lambda c: (c.block - 1, c.block - 1)),
        MethodSpec(id="chen2026dflash-cpu", name="DFlash, CPU-sized: one draft layer, blocks of 8",
                   aliases=("dflash-cpu",), variant_of="chen2026dflash",
                   drafting=("independent-fine-tuned",), verification=("greedy-verification",),
                   lossless=True, builder="heads:dflash_cpu", trained_head="dflash",
                   constants={"block": 8, "draft_layers": 1, "conditioning": 5, "decay": 4},
                   settings="a hardware-sized variant, not the paper's drafter: blocks of {block} from "
                            "{draft_layers} draft layer reading the paper drafter's {conditioning} target states; loss weights "
                            "exp(-(k - 1) / {decay}), the paper's decay for blocks of {block}",
                   source="its paper's decay for blocks of 8", draft=lambda c: (c.block - 1, c.block - 1)),
        MethodSpec(id="ankner2024hydra", name="Hydra: sequentially dependent draft heads", aliases=("hydra",),
                   drafting=("extra-heads", "token-tree"), verification=("token-tree-verification",),
                   lossless=True, builder="heads:hydra", trained_head="hydra",
                   settings="4 grounded MLP heads, Medusa's {draft_nodes}-node tree mc_sim_7b_63 (its code's default); "
                            "exact verification",
                   draft=(4, 63)),
        MethodSpec(id="li2025eagle", name="EAGLE-3: fused features, training-time test", aliases=("eagle3", "eagle-3"),
                   drafting=("feature-level-drafting", "dynamic-tree"), verification=("token-tree-verification",),
                   lossless=True, builder="heads:eagle3", trained_head="eagle3", constants=EAGLE2_TREE,
                   settings="EAGLE-2's dynamic tree: top-{top_k} per level, depth {depth}, {total} nodes kept",
                   source="EaModel's defaults", draft=lambda c: (c.depth, c.total)),
        MethodSpec(id="zhao2025fr", name="FR-Spec: frequency-ranked draft vocabulary", aliases=("fr-spec",),
                   drafting=("feature-level-drafting",),
                   verification=("greedy-verification", "speculative-sampling", "token-tree-verification"),
                   lossless=True, builder="heads:fr_spec", trained_head="eagle", constants=EAGLE2_TREE,
                   settings="EAGLE-2 drafting from the most frequent quarter of the vocabulary (32k of Llama-3's 128k "
                            "in the paper; here at most 12,288: the tokens the target chose in its training answers), "
                            "dynamic tree top-{top_k}, depth {depth}, {total} nodes",
                   draft=lambda c: (c.depth, c.total)),
        MethodSpec(id="zhang2024recurrent", name="ReDrafter: recurrent drafter, beam search, dynamic tree attention",
                   aliases=("redrafter",), drafting=("feature-level-drafting", "token-tree"),
                   verification=("token-tree-verification",), lossless=True, builder="heads:redrafter",
                   trained_head="redrafter", constants={"width": 45, "length": 5, "top_k": 50},
                   settings="beam width {width}, beam length {length} (the target's token + {draft_depth} drafts), each "
                            "beam extended by its {top_k} likeliest tokens (its README's MT-Bench command, warp_logits); beams "
                            "merged into a prefix tree (dynamic tree attention), exact verification; sampling: "
                            "recursive rejection over the tree (lossless), not its code's approximate per-beam rule",
                   draft=lambda c: (c.length - 1, c.width * (c.length - 1)), draft_exact=False),
        MethodSpec(id="luo2025turning", name="Token Recycling", aliases=("token-recycling",),
                   drafting=("ngram-pool", "token-tree"), verification=("token-tree-verification",),
                   lossless=True, builder="parallel:token_recycling",
                   constants={"top_k": 8, "depth": 6, "nodes": 80},
                   settings="top-{top_k} adjacency table, static {nodes}-node tree of depth {depth}",
                   draft=lambda c: (c.depth, c.nodes),
                   # On 16 Spec-Bench prompts (SmolLM2-135M, the full tree, 1.66 tokens per step) the accepted
                   # path went through candidate (0,) in 21% of steps, (0, 0) in 7.5%, every other node in at
                   # most 5.5%: at ~11% of a step per verified token on a CPU only the top-1 chain pays.
                   sized=Sized("cpu-top-1-path", "the tree's top-1 path on a CPU",
                               {"tree": tuple((0,) * depth for depth in range(1, 7))}, cpu_only=True)),
        MethodSpec(id="zhang2024draft", name="Draft & Verify: self-speculative decoding by layer skipping",
                   aliases=("draft-and-verify", "self-speculative"),
                   drafting=("early-exit-layer-skip", "adaptive-draft-length"),
                   verification=("greedy-verification", "speculative-sampling"),
                   lossless=True, builder="self_speculative:draft_and_verify",
                   constants={"iterations": 1000, "prompts": 8, "tokens": 32, "iterations_cpu": 48, "prompts_cpu": 2,
                              "max_draft": 12, "threshold": 0.6},
                   settings="skipped layers by Bayesian optimisation, {iterations} iterations on {prompts} prompts x "
                            "{tokens} tokens (search.ipynb; on a CPU {iterations_cpu} iterations on {prompts_cpu} "
                            "prompts), whole layers; at most {max_draft} draft tokens, adaptive exit threshold from "
                            "{threshold} (evaluate_sum.ipynb)",
                   draft=chain("max_draft"), draft_exact=False),
        MethodSpec(id="xia2025swift", name="SWIFT: on-the-fly self-speculative decoding", aliases=("swift",),
                   drafting=("early-exit-layer-skip", "adaptive-draft-length"),
                   verification=("greedy-verification", "speculative-sampling", "token-tree-verification"),
                   lossless=True, builder="self_speculative:swift",
                   constants={"window": 50, "skip_ratio": 0.45, "bayes_every": 25, "max_score": 0.93, "tolerance": 300,
                              "max_iterations": 1000, "stop": 0.8, "max_draft": 25, "candidates": (3, 5, 8, 10)},
                   settings="context window {window}, skip ratio {skip_ratio}, Bayesian step every {bayes_every}, stop "
                            "at matchness {max_score} / {tolerance} idle / {max_iterations} steps; exit below "
                            "confidence {stop}, at most {max_draft} draft tokens, {candidates:/} candidates per depth",
                   source="eval_llama.sh and its code",
                   draft=lambda c: (c.max_draft, c.max_draft * max(c.candidates)), draft_exact=False),
        MethodSpec(id="spector2023accelerating", name="Staged speculative decoding",
                   aliases=("staged-speculative-decoding",),
                   drafting=("cascaded-drafting", "token-tree"),
                   verification=("token-tree-verification", "greedy-verification"),
                   lossless=True, builder="self_speculative:staged", uses_draft_model=True,
                   constants={"depth": 8, "nodes": 16},
                   settings="ours (the paper sizes neither for this model): the draft model's {depth}-token greedy "
                            "chain by speculative decoding with prompt lookup (for its n-gram model), {nodes} most "
                            "probable tree nodes",
                   draft=lambda c: (c.depth, c.nodes), draft_exact=False),
        MethodSpec(id="chen2024sequoia", name="Sequoia: hardware-aware optimal token trees", aliases=("sequoia",),
                   drafting=("independent-tuning-free", "dynamic-tree"),
                   verification=("multi-draft-sampling", "token-tree-verification"),
                   lossless=True, builder="core:sequoia", uses_draft_model=True,
                   settings="acceptance vector over W = 16 children (tests/test_accept.py), measured per target, "
                            "drafter and sampling; the tree of most expected tokens per second among at most 128 "
                            "nodes and 10 levels, root included (tree_search.py, demo-config.json), sized on this "
                            "machine's measured cost curves; siblings drawn without replacement",
                   draft=(9, 127), draft_exact=False),
        MethodSpec(id="hu2025sam-eagle2",
                   name="SAM-Decoding[EAGLE-2]: suffix automaton drafts, EAGLE-2 trees after short matches",
                   aliases=("sam-decoding-eagle2",),
                   drafting=("retrieval-drafting", "context-copy", "token-tree"),
                   verification=("greedy-verification", "token-tree-verification"),
                   lossless=True, builder="retrieval:sam_decoding_eagle2", trained_head="eagle",
                   variant_of="hu2025sam", uses_datastore=True,
                   constants={"tokens": 15, "threshold": 5, "bias": 5, "total": 63, "depth": 5, "top_k": 8},
                   settings="{tokens} draft tokens, l_threshold = {threshold}, l_bias = {bias}; below the threshold "
                            "EAGLE-2's dynamic tree with total_tokens {total}, depth {depth}, top_k {top_k}",
                   source="its code at 061897e, the commit of its Spec-Bench table: evaluation/inference_samd.py, "
                          "Eagle2Model's defaults",
                   draft=lambda c: (c.tokens, c.total), draft_exact=False),
        MethodSpec(id="hu2025sam-pard",
                   name="SAM-Decoding[PARD]: suffix automaton drafts, PARD blocks after short matches",
                   aliases=("sam-decoding-pard",),
                   drafting=("retrieval-drafting", "context-copy", "token-tree"),
                   verification=("greedy-verification", "token-tree-verification"),
                   lossless=True, builder="retrieval:sam_decoding_pard", trained_head="pard",
                   variant_of="hu2025sam", uses_datastore=True,
                   constants=SAM_DEFAULTS,
                   settings="a composition in SAM-Decoding[EAGLE-2]'s pattern: {tokens} draft tokens, "
                            "l_threshold = {threshold}, l_bias = {bias} (SAM-Decoding's code defaults); below the "
                            "threshold a block from one forward of the trained PARD drafter, at most PARD's K",
                   source="SAM-Decoding's code defaults; PARD's block from its own definition",
                   draft=chain("tokens"), draft_exact=False),
        MethodSpec(id="monea2023pass", name="PaSS: parallel speculative sampling with look-ahead tokens",
                   aliases=("pass",), drafting=("learnable-draft-tokens",), verification=("speculative-sampling",),
                   lossless=True, builder="heads:pass_tokens", trained_head="pass",
                   settings="k = {draft_depth} learned look-ahead tokens appended to the frozen target's forward, "
                            "this implementation's choice: the paper ablates their number and no default of it is "
                            "cited here; a fully accepted draft's forward drafts the next, else the next forward "
                            "drafts only",
                   draft=(6, 6)),
        MethodSpec(id="huang2024specdec", name="SpecDec++: adaptive candidate lengths", aliases=("specdec++",),
                   drafting=("independent-tuning-free", "adaptive-draft-length"), verification=("speculative-sampling",),
                   lossless=True, builder="heads:specdec_pp", uses_draft_model=True, trained_head="specdecpp",
                   constants={"threshold": 0.7, "min_length": 2, "max_length": 20},
                   settings="acceptance head of 3 ResBlocks trained with rejected tokens weighted 6 (its README's "
                            "training command); stop once the predicted P(some draft rejected) > h = {threshold}, "
                            "candidate length bounded to [{min_length}, {max_length}]",
                   source="specdec_pp/sample.py", draft=chain("max_length"), draft_exact=False),
        MethodSpec(id="liu2024online", name="Online speculative decoding: the drafter distilled on the queries it serves",
                   aliases=("osd", "online-sd"), drafting=("independent-fine-tuned",),
                   verification=("speculative-sampling",), lossless=True, builder="core:online_speculative_decoding",
                   uses_draft_model=True, constants={"proposed": 5, "interval": 8},
                   settings="{proposed} proposed tokens; the target's distributions at every rejected draft token "
                            "kept per request, one AdamW step of forward KL on them every {interval} requests, learning "
                            "rate 1e-4 constant, no weight decay, then the buffer emptied",
                   source="its code: bash_scripts/*/online.sh, distill/distill_trainer.py", draft=chain("proposed")),
        MethodSpec(id="liu2025parallel", name="PEARL: parallel speculative decoding with adaptive draft length",
                   aliases=("pearl",),
                   drafting=("independent-tuning-free", "parallel-drafting-pipeline", "adaptive-draft-length"),
                   verification=("speculative-sampling",), lossless=True, builder="core:pearl", uses_draft_model=True,
                   constants={"gamma": 5},
                   settings="γ = {gamma} drafted per round while the target verifies the last round's (its README's "
                            "command and run_para_sd.sh, 7B drafting 70B); pre-verify / post-verify; greedy decoding "
                            "verifies by exact match. Here the drafter runs on a thread beside the target's forward "
                            "(the paper: two GPUs)",
                   draft=chain("gamma"), draft_exact=False),
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
