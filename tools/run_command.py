"""`specatlas run PAPER-ID --prompt TEXT`: run a reference implementation and stream its output.

Everything heavy (torch, transformers) is imported only after the method id, every number and
the prompt have been checked, so a typo is answered instantly; a prompt that does not fit the
model's context is refused before any compute.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import resource
import sys
from pathlib import Path

from specatlas.cli import CommandError, add_datastore_option, add_trust_remote_code, number_problem, printable
from specatlas.data_shards import chosen_datastore
from specatlas.fsutil import ReadError, read_limited
from specatlas.impls.engine.draft_length import PAPER, DraftLengthPolicy
from specatlas.impls.registry import all_names, implemented_ids, resolve
from specatlas.paths import papers_dir

# Bounds on what a user can mean. Beyond them a value is a typo (1e9 for 1.0) or an attack, and
# the run would only waste the model load: rejected up front.
MAX_PROMPT_BYTES = 16 * 1024 * 1024


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", metavar="PAPER_ID", help="paper id or alias of an implemented method (e.g. pld)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="user message, rendered with the model's chat template")
    source.add_argument("--prompt-file", type=Path, metavar="PATH",
                        help="read the user message from a UTF-8 text file ('-' for standard input)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default) decodes greedily")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0, help="0 (default): no top-k cut")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", help="local HF folder or hub id (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--draft-model", help="drafter for methods with a draft model (default: the distilled drafter shipped for the embedded model, else a shallow slice of the target)")
    parser.add_argument("--drafter-checkpoint", help="trained draft head (folder or hub id, published Medusa/EAGLE "
                                                     "layouts) for head methods (default: the heads shipped for the embedded model)")
    add_datastore_option(parser)
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps")
    parser.add_argument("--dtype", default="auto", help="auto, float32, float16 or bfloat16")
    parser.add_argument("--draft-length", default="paper",
                        help="'paper' (default: the paper's draft length, tree and window), 'cost-aware' (or 'auto': "
                             "the depth that pays here, structures sized for the device) or a fixed number of draft tokens")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    parser.add_argument("--compare", action="store_true",
                        help="first run plain decoding on the same prompt and settings, then the method (both after the "
                             "same warm-up, on the same kernels), and report both speeds, the speedup and whether "
                             "the outputs are token-identical")
    add_trust_remote_code(parser)


def _checked(args: argparse.Namespace):
    """(the method's spec, its draft-length policy, the prompt), each as the arguments give it, or a
    CommandError saying what is wrong before any model loads."""
    spec = resolve(args.method)
    if spec is None:
        _unknown_method(args.method, all_names(), implemented_ids())
    problem = _check_numbers(args)
    if problem:
        raise CommandError(problem)
    try:
        policy = DraftLengthPolicy.parse(args.draft_length)
    except ValueError as exc:
        raise CommandError(str(exc))
    prompt_text, problem = read_prompt(args)
    if problem:
        raise CommandError(problem)
    return spec, policy, prompt_text


def execute(args: argparse.Namespace) -> int:
    spec, policy, prompt_text = _checked(args)

    from specatlas.impls.engine.decoding import room_after
    from specatlas.impls.engine.kv import Unsupported
    from specatlas.impls.engine.models import ModelLoadError, encode_chat, eos_ids
    from specatlas.impls.engine.sampling import Randomness, Sampling

    sampling = Sampling(args.temperature, args.top_p, args.top_k)
    device, dtype, target, decoder = _loaded(spec, args, policy)

    drafter = decoder.drafter.describe() if decoder.drafter else "none"
    relaxed = decoder.verifier(sampling).relaxed
    settings = spec.paper_settings if policy.name == PAPER and spec.paper_settings else ""
    header = (f"{spec.id} ({spec.name}) | target {target.name} on {device.type} {str(dtype).removeprefix('torch.')} "
              f"| drafter: {drafter} | {decoder.draft_length.describe() if decoder.drafter else 'no drafting'}"
              + (f" | paper settings: {settings}" if settings else "")
              + (f" | {sized.describe()}" if (sized := spec.sized_for(policy, target.model)) else "")
              + f" | {sampling.describe()}"
              + (f" ({sampling.notice()})" if sampling.notice() else "")
              + (" | relaxed acceptance: not lossless" if relaxed else ""))
    header += _ignored(spec, args)
    try:  # before the header, so that the error is the only line
        prompt = encode_chat(target.tokenizer, prompt_text)
        room_after(target.model, prompt, args.max_new_tokens)
    except Unsupported as exc:
        raise CommandError(str(exc))
    except ModelLoadError as exc:  # the model's chat template failed or ran away
        raise CommandError(f"model {target.name}: {exc}", status=1)
    # Compared runs are not streamed: printing as tokens arrive would time the two differently.
    stream = None if args.json or args.compare else TextStream(target.tokenizer)
    if not args.json:
        print(printable(header) + (" | compared with plain decoding, run first; the text follows both runs"
                                   if args.compare else ""), file=sys.stderr)
    stop = eos_ids(target.model, target.tokenizer)
    try:
        plain = compare_baseline(target, decoder, prompt, args, sampling, stop) if args.compare else None
        output = decoder.generate(prompt, args.max_new_tokens, sampling, Randomness(args.seed),
                                  stop=stop, on_tokens=stream and stream.add)
    except Unsupported as exc:  # e.g. a tree draft on sliding-window layers
        raise CommandError(str(exc))
    except ModelLoadError as exc:  # the chat template, on the warm-up prompt
        raise CommandError(f"model {target.name}: {exc}", status=1)
    comparison = compared(plain, output, sampling.greedy and not relaxed) if plain else None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    if args.json:
        print(json.dumps({"method": spec.id, "model": target.name, "drafter": drafter, "device": device.type,
                          "policy": policy.name, "draft_length": decoder.draft_length.describe() if decoder.drafter else None,
                          "paper_settings": settings or None, "sampling": sampling.describe(),
                          "sampling_notice": sampling.notice(), "relaxed_acceptance": relaxed, "seed": args.seed,
                          "text": target.tokenizer.decode(output.tokens, skip_special_tokens=True), "tokens": output.tokens,
                          "peak_rss_mb": round(peak_mb), **output.stats.as_dict(),
                          **({"compare": comparison} if comparison else {})}))
    else:
        _print_text(spec.id, target.tokenizer, output, stream, peak_mb, comparison)
    return 0


def _loaded(spec, args: argparse.Namespace, policy):
    """(device, dtype, target, decoder) as the arguments ask; a model that cannot load is a CommandError."""
    from specatlas.impls.engine.models import ModelLoadError, load_model, machine_kernels, pick_device, pick_dtype
    from specatlas.impls.methods.retrieval import datastore_for

    try:
        device = pick_device(args.device)
        dtype = pick_dtype(args.dtype, device)
        kernels = machine_kernels()
        target = load_model(args.model, device, dtype, args.trust_remote_code, kernels)
        draft = (load_model(args.draft_model, device, dtype, args.trust_remote_code, kernels)
                 if args.draft_model and spec.uses_draft_model else None)
        if draft and draft.model.config.vocab_size != target.model.config.vocab_size:
            raise ModelLoadError(f"draft model {draft.name!r} has a different vocabulary from {target.name!r}")
        head = {"drafter_checkpoint": args.drafter_checkpoint} if args.drafter_checkpoint and spec.trained_head else {}
        if args.datastore and spec.uses_datastore:
            head["datastore"] = datastore_for(target.model, chosen_datastore(args.datastore, target.name))
        return device, dtype, target, spec.build(target.model, draft.model if draft else None, policy, **head)
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1)


def _ignored(spec, args: argparse.Namespace) -> str:
    """The header's notes on options the method has no use for."""
    notes = []
    if args.draft_model and not spec.uses_draft_model:
        notes.append(f"--draft-model ignored: {spec.id} uses none")
    if args.drafter_checkpoint and not spec.trained_head:
        notes.append(f"--drafter-checkpoint ignored: {spec.id} uses no trained head")
    if args.datastore and not spec.uses_datastore:
        notes.append(f"--datastore ignored: {spec.id} reads no datastore")
    return "".join(f" | {note}" for note in notes)


def _print_text(method_id: str, tokenizer, output, stream, peak_mb: float, comparison: dict | None) -> None:
    """The text (unless it was streamed), then the run's numbers and the comparison, if any."""
    stats = output.stats
    if stream:
        stream.finish()
    else:
        print(printable(tokenizer.decode(output.tokens, skip_special_tokens=True)))
    print(f"[{stats.new_tokens} tokens, {stats.tokens_per_second:.1f} tokens/s, "
          f"{stats.mean_accepted:.2f} mean accepted tokens per step, {stats.target_forwards} target forward passes, "
          f"draft {stats.draft_seconds:.2f}s / verify {stats.verify_seconds:.2f}s "
          f"(target forwards {stats.forward_seconds:.2f}s of it)"
          + (f" ({stats.overlapped_seconds:.2f}s of them at once)" if round(stats.overlapped_seconds, 2) else "")
          + f", peak RSS {peak_mb:.0f} MB]")
    if comparison:
        print(describe_comparison(method_id, comparison))


def compare_baseline(target, decoder, prompt: list[int], args, sampling, stop):
    """Plain decoding's output on the same prompt and settings, on the same target (so the same
    kernels). Both decoders first make the untimed warm-up generation every measurement here makes
    (`contenders.WARMUP`), so first-call costs count for neither."""
    from specatlas.bench.contenders import WARMUP, WARMUP_PROMPT
    from specatlas.impls.engine.models import encode_chat
    from specatlas.impls.engine.sampling import Randomness
    from specatlas.impls.registry import METHODS

    plain = METHODS["baseline"].build(target.model)
    warmup = encode_chat(target.tokenizer, WARMUP_PROMPT)
    for warmed in (plain, decoder):
        warmed.generate(warmup, WARMUP, sampling, Randomness(args.seed), stop=stop)
    return plain.generate(prompt, args.max_new_tokens, sampling, Randomness(args.seed), stop=stop)


def compared(plain, output, identity_expected: bool) -> dict:
    """What `--compare` reports: both speeds (wall clock, prefill included, as a user waits for
    it), the speedup, token identity (expected of a lossless rule under greedy decoding; under
    sampling a lossless method draws from the same distribution, not the same tokens) and the mean
    tokens each target forward committed."""
    base, ours = plain.stats, output.stats
    return {"baseline_tokens_per_second": round(base.tokens_per_second, 2),
            "tokens_per_second": round(ours.tokens_per_second, 2),
            "speedup": round(ours.tokens_per_second / base.tokens_per_second, 3) if base.tokens_per_second else None,
            "identical": output.tokens == plain.tokens, "identity_expected": identity_expected,
            "baseline_new_tokens": base.new_tokens, "new_tokens": ours.new_tokens,
            "mean_accepted_tokens": round(ours.mean_accepted, 3)}


def describe_comparison(method: str, comparison: dict) -> str:
    speedup = comparison["speedup"]
    identity = "token-identical" if comparison["identical"] else "different"
    if not comparison["identity_expected"]:
        identity += " (identity not expected: sampling, or a relaxed acceptance rule)"
    return (f"[compare: plain decoding {comparison['baseline_tokens_per_second']:.1f} tokens/s, {method} "
            f"{comparison['tokens_per_second']:.1f} tokens/s, speedup {f'{speedup:.2f}x' if speedup else 'n/a'}; "
            f"outputs {identity} ({comparison['baseline_new_tokens']} and {comparison['new_tokens']} tokens); "
            f"{comparison['mean_accepted_tokens']:.2f} mean accepted tokens per step]")


class TextStream:
    """Prints decoded text as tokens are committed, holding back an incomplete UTF-8 character;
    control characters are shown escaped (`printable`): the model may echo them from the prompt."""

    def __init__(self, tokenizer):
        self.tokenizer, self.tokens, self.shown = tokenizer, [], 0

    def add(self, tokens: list[int]) -> None:
        self.tokens += tokens
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if not text.endswith("\ufffd"):
            sys.stdout.write(printable(text[self.shown :]))
            sys.stdout.flush()
            self.shown = len(text)

    def finish(self) -> None:
        sys.stdout.write(printable(self.tokenizer.decode(self.tokens, skip_special_tokens=True)[self.shown :]) + "\n")


def _check_numbers(args) -> str | None:
    return number_problem(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                          top_k=args.top_k, seed=args.seed)


def read_prompt(args) -> tuple[str, str | None]:
    """(the prompt text, None) or ("", why it cannot be used). Bytes that are not UTF-8 (from the
    command line they arrive as lone surrogates) are named with their offset."""
    if args.prompt_file is None:
        text, where = args.prompt, "--prompt"
    else:
        where = f"--prompt-file {args.prompt_file}"
        try:
            raw = (sys.stdin.buffer.read(MAX_PROMPT_BYTES + 1) if str(args.prompt_file) == "-"
                   else read_limited(args.prompt_file, MAX_PROMPT_BYTES))
        except ReadError as exc:
            return "", f"{where} {exc}"
        if len(raw) > MAX_PROMPT_BYTES:
            return "", f"{where} is over {MAX_PROMPT_BYTES:,} bytes"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return "", f"{where}: byte 0x{raw[exc.start]:02x} at offset {exc.start} is not UTF-8; save the file as UTF-8"
        text = text.removeprefix("\ufeff")
    bad = next((i for i, ch in enumerate(text) if 0xD800 <= ord(ch) <= 0xDFFF), None)
    if bad is not None:
        byte = ord(text[bad]) - 0xDC00 if ord(text[bad]) >= 0xDC80 else None
        shown = f"byte 0x{byte:02x}" if byte is not None and byte < 256 else f"U+{ord(text[bad]):04X}"
        return "", f"{where} is not valid UTF-8 ({shown} at character {bad}); pass UTF-8 text or use --prompt-file"
    if not text.strip():
        return "", f"{where} is empty; give the model something to answer"
    return text, None


def _unknown_method(name: str, names: list[str], implemented: list[str]) -> None:
    from specatlas.catalog.schema import ID_PATTERN

    listing = ", ".join(implemented)
    # Only a well-formed id is looked up: a path ("../../x") would tell whether any file exists.
    if re.fullmatch(ID_PATTERN, name) and (papers_dir() / f"{name}.yaml").is_file():
        raise CommandError(f"{name} is cataloged but has no reference implementation yet; implemented: {listing}")
    cataloged = [path.stem for path in papers_dir().glob("*.yaml")]
    close = difflib.get_close_matches(name.lower(), names + cataloged, n=3, cutoff=0.6)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise CommandError(f"unknown method {name!r}{hint}; implemented: {listing}")

