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
from dataclasses import dataclass, field
from typing import Callable

import torch

from specatlas.bench.provenance import file_digests, loaded_weights
from specatlas.bench.results import BASELINE, LLAMACPP_GREEDY, LLAMACPP_LOOKUP
from specatlas.impls.engine.cpu_kernels import default_kernels, packed_layers
from specatlas.impls.engine.draft_length import FIXED, PAPER, DraftLengthPolicy, calibrate
from specatlas.impls.engine.errors import first_line
from specatlas.impls.engine.models import embedded_gguf, names_embedded
from specatlas.impls.methods.core import default_draft_model
from specatlas.impls.registry import MethodSpec
from specatlas.impls.engine.sampling import Randomness, Sampling

# Peer ids -> (name, extra `generate` arguments, what they mean). prompt_lookup_num_tokens=10 is
# the value transformers' documentation uses; max_matching_ngram_size keeps its default (2).
# Assisted generation keeps transformers' default schedule (num_assistant_tokens=20, adapted
# online by the "heuristic" rule), with the same drafter as our draft-model methods.
# llama.cpp (through llama-cpp-python) runs the GGUF file the embedded model ships in, with its
# own kernels on its own quantized weights: our baseline is no yardstick for it, so each llama.cpp
# row's speedup is over llama.cpp's own greedy decoding in the same run (Method.relative_to).
# Prompt lookup keeps llama-cpp-python's defaults (LlamaPromptLookupDecoding: max_ngram_size=2,
# num_pred_tokens=10). Neither row claims token identity: llama.cpp's forward is not
# batch-invariant (a verification over several tokens rounds its quantized products differently
# from one-token steps, logits moving by tenths), so prompt lookup follows llama.cpp greedy until a
# near-tie flips; the bench counts the identical outputs instead.
LLAMACPP = {
    LLAMACPP_GREEDY: "llama.cpp greedy",
    LLAMACPP_LOOKUP: "llama.cpp prompt lookup",
}
PEERS = {
    "hf-generate": "transformers generate",
    "hf-prompt-lookup": "transformers prompt lookup",
    "hf-assisted": "transformers assisted generation",
    **LLAMACPP,
}
LLAMACPP_INSTALL = "install them with `make peers` (compiles llama.cpp, minutes), or pip install -e '.[peers]'"


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
    forward_seconds: float | None = None  # of verify_seconds, the target's verification forwards
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
    relative_to: str | None = None  # the row its speedup is over (results.Method.relative_to); None: the baseline
    # The sha256 of every trained head, adapter, drafter or datastore its build returned (the decoder's
    # `weights`), by name: shipped heads are retrained, and the leaderboard averages only runs of the
    # same weights (results.Method.weights). {} for a row that could not be built.
    weights: dict[str, str] = field(default_factory=dict)

    @property
    def record(self) -> dict:
        """Its entry in a result file's `methods` (results.Method)."""
        out = {"id": self.id, "name": self.name, "kind": self.kind, "lossless": self.lossless, "setup": self.setup,
               "error": self.error, "policy": self.policy, "weights": self.weights}
        return {**out, "relative_to": self.relative_to} if self.relative_to else out


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


def specatlas_method(spec: MethodSpec, target, draft_model, policy: DraftLengthPolicy, datastore=None) -> Contender:
    """`spec` as a contender; `datastore`: the loaded datastore a retrieval method reads (None: the shipped one)."""
    decoder = spec.build(target, draft_model, policy, **({"datastore": datastore} if datastore is not None else {}))

    def generate(prompt, max_new_tokens, temperature, seed, stop):
        with counting_forwards(target) as widths:
            out = decoder.generate(prompt, max_new_tokens, Sampling(temperature), Randomness(seed), stop=stop)
        s = out.stats
        steps = len(s.accepted_lengths)
        return Turn(out.tokens, s.wall_seconds, steps, dict(Counter(widths[len(widths) - steps:])),
                    s.draft_seconds, s.verify_seconds, s.forward_seconds, list(s.drafted_at), list(s.accepted_at))

    setup = decoder.drafter.describe() + "; " + decoder.draft_length.describe() if decoder.drafter else "no drafter"
    if policy.name == PAPER and spec.paper_settings:
        setup += f"; paper settings: {spec.paper_settings}"
    if sized := spec.sized_for(policy, target):
        setup += f"; {sized.describe()}"
    return Contender(contender_id(spec.id, policy), spec.name, "specatlas", spec.lossless, setup, generate,
                     policy=policy_of(spec.id, policy), weights=loaded_weights(decoder.weights))


def peer(peer_id: str, target, draft_model, pad_token_id: int) -> Contender:
    weights = {}  # the trained files it runs (our default drafter's, as assistant)
    if peer_id == "hf-prompt-lookup":
        extra, setup = {"prompt_lookup_num_tokens": 10}, "prompt_lookup_num_tokens=10, max_matching_ngram_size=2 (default)"
    elif peer_id == "hf-assisted":
        assistant, described, weights = default_draft_model(target, draft_model)
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
        models = [target, extra["assistant_model"]] if "assistant_model" in extra else [target]  # transformers' kernels for both
        with default_kernels(*models), counting_forwards(target) as widths:
            start = time.perf_counter()
            out = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                  eos_token_id=sorted(stop), pad_token_id=pad_token_id, **sampling, **extra)
            wall = time.perf_counter() - start
        # The prefill forward commits the first token, so every target forward is a step.
        return Turn(out[0, len(prompt):].tolist(), wall, len(widths), dict(Counter(widths[1:])))

    if packed_layers(target):
        setup += "; transformers' default kernels, as shipped (SpecAtlas decoders: packed oneDNN linears)"
    return Contender(peer_id, PEERS[peer_id], "peer", True, setup, generate, weights=loaded_weights(weights))


def llamacpp_problem(model_name: str | None) -> str | None:
    """Why the llama.cpp peers cannot run with this --model, in one line; None when they can."""
    if not names_embedded(model_name):
        return f"the llama.cpp peers run the embedded model's own GGUF file only, not --model {model_name}"
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError, RuntimeError) as exc:  # not installed, or its shared library will not load
        return f"the llama.cpp peers need llama-cpp-python ({first_line(exc)}): {LLAMACPP_INSTALL}"
    return None


def llamacpp_build() -> dict:
    """What a llama.cpp row depends on besides our code: the binding's version, the native
    library's build (instruction sets, backends) and the weights file."""
    import llama_cpp

    gguf = embedded_gguf()
    return {"llama_cpp_python": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
            "gguf": gguf.name, "gguf_sha256": file_digests([gguf])[0]}


def llamacpp_peer(peer_id: str, threads: int) -> Contender:
    """llama.cpp greedy or prompt lookup on the embedded model's GGUF file, fed our prompt token ids."""
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    lookup = LlamaPromptLookupDecoding() if peer_id != LLAMACPP_GREEDY else None
    gguf = embedded_gguf()
    # n_ctx=0: the model's training context, so no prompt is cut; threads as torch's, like ours.
    # logits_all with a draft model: the library keeps every row's logits then, but sizes its buffer
    # by the argument, to n_batch (512) rows, so a context past 512 tokens failed to broadcast.
    llm = llama_cpp.Llama(str(gguf), n_ctx=0, n_threads=threads, n_threads_batch=threads, draft_model=lookup,
                          logits_all=lookup is not None, verbose=False)
    widths: list[int] = []
    evaluate = llm.eval

    def counted(tokens):  # one eval is one forward of the model (prefill, a step, or a step with drafts)
        widths.append(len(tokens))
        evaluate(tokens)

    llm.eval = counted

    def generate(prompt, max_new_tokens, temperature, seed, stop):
        widths.clear()
        llm.reset()  # else llama-cpp-python reuses the previous generation's cache for a shared prefix
        llm.set_seed(seed)
        tokens = []
        start = time.perf_counter()
        # temp=0 is greedy; else pure temperature sampling, as ours (no top-k, top-p or min-p cut).
        for token in llm.generate(prompt, temp=temperature, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
            tokens.append(token)
            if token in stop or len(tokens) == max_new_tokens:
                break
        wall = time.perf_counter() - start
        # As transformers' peers: the prefill forward commits the first token, so every forward is a step.
        return Turn(tokens, wall, len(widths), dict(Counter(widths[1:])))

    setup = (f"llama-cpp-python {llama_cpp.__version__} on {gguf.name}, n_threads={threads}, n_ctx={llm.n_ctx()}; "
             + (f"LlamaPromptLookupDecoding(max_ngram_size={lookup.max_ngram_size}, num_pred_tokens="
                f"{lookup.num_pred_tokens}), the library's defaults" if lookup else "greedy, no draft model"))
    return Contender(peer_id, PEERS[peer_id], "peer", False, setup, generate, relative_to=LLAMACPP_GREEDY)


def cost_curve(target, max_width: int = 64) -> dict[int, float]:
    """Seconds of one target forward over w new tokens (after a 64-token context), for a spread
    of w up to max_width: what a verification costs relative to a plain decoding step."""
    return {width: round(seconds, 6) for width, seconds in sorted(calibrate(target, max_width).items())}


def failure_reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def built(build, method_id: str, name: str, kind: str, lossless: bool, policy: str | None = None,
          relative_to: str | None = None):
    """The contender, or one that records why it could not be built (a peer transformers refuses,
    a method that needs what this model lacks): a long run must not die for one row."""
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - any failure is reported in the result row
        return Contender(method_id, name, kind, lossless, "", None, failure_reason(exc), policy, relative_to)


def attempt(contender, call):
    """`call()`, or None with the failure recorded on the contender's row."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the row records the reason; other rows go on
        contender.error = failure_reason(exc)
        return None
