"""`specatlas gpu-check`: are the methods ready for an accelerator? (`make gpu-check`)

    specatlas gpu-check --questions path/to/spec_bench/question.jsonl          # on cuda
    specatlas gpu-check --device cpu --methods pld,medusa --max-new-tokens 8 --bench-methods pld --bench-tokens 8

First every method of the registry (or `--methods`) is built on the embedded model on `--device`, at
its paper's settings, and decodes the check prompts greedily: each output must be plain decoding's on
the same device and dtype (float32 by default), token for token, with drafts really made. Then `specatlas bench` measures
`--bench-methods` at their papers' settings against plain decoding on a small slice of `--questions`
(Spec-Bench's `question.jsonl`, as the bench takes it; the bench's built-in prompts without it):
`--limit-per-category` questions of each subtask, `--bench-tokens` new tokens a turn, into `--out`
(default `results/`), and the result file it writes is judged as `specatlas results check` judges it.
The defaults are sized for under 10 minutes on one GPU. Exit 0 when every method was identical and the result
file is fit for the leaderboard, else 1 with each problem on its own line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from specatlas.cli import MAX_NEW_TOKENS, CommandError, number

# Representative of the drafting axes, so a slice of a few minutes covers each kind of drafter:
# n-gram lookup, Jacobi lookahead, a draft model, heads (Medusa, EAGLE-2, EAGLE-3) and a datastore.
BENCH_METHODS = "pld,lookahead,leviathan2023fast,medusa,eagle2,eagle3,rest"
PROMPTS = (
    "Explain speculative decoding in two sentences.",
    "Write a Python function that returns the n-th Fibonacci number.",
)


def ids(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:1, mps, cpu, ...")
    # float32, not the bench's half precision on a GPU: there a forward over several tokens rounds
    # differently from one-token steps, so a near-tie may flip and hide a real divergence among noise.
    parser.add_argument("--dtype", default="float32",
                        help="float32 (default: outputs comparable token for token), float16, bfloat16 or auto")
    parser.add_argument("--methods", type=ids, default=None,
                        help="comma-separated method ids or aliases to check against plain decoding (default: every method)")
    parser.add_argument("--max-new-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=64,
                        help="new tokens of each check prompt (default: 64)")
    parser.add_argument("--questions", type=Path, default=None,
                        help="Spec-Bench style JSONL for the bench slice (default: the bench's built-in set)")
    parser.add_argument("--limit-per-category", type=number(int, 1, 10**6), default=1,
                        help="questions of each subtask in the bench slice (default: 1)")
    parser.add_argument("--bench-methods", type=ids, default=ids(BENCH_METHODS),
                        help=f"comma-separated methods the bench slice measures (default: {BENCH_METHODS})")
    parser.add_argument("--bench-tokens", type=number(int, 1, MAX_NEW_TOKENS), default=128,
                        help="new tokens a turn in the bench slice (default: 128, as the committed runs)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: results/ in the repository)")


def execute(args: argparse.Namespace) -> int:
    from specatlas.bench import questions
    from specatlas.cli import chosen_methods, results_folder
    from specatlas.fsutil import WriteError

    try:  # bad input is answered before the model loads
        method_ids, peers = chosen_methods(args.methods or [], args.methods is None, peers=False)
        bench_ids, bench_peers = chosen_methods(args.bench_methods, False, peers=False)
        questions.load(args.questions)
        results_folder(args.out)
    except (questions.QuestionsError, WriteError) as exc:
        raise CommandError(str(exc)) from None
    if peers or bench_peers:
        raise CommandError(f"{(peers or bench_peers)[0]} is a peer library (`specatlas bench` measures it); "
                           "gpu-check runs SpecAtlas methods")
    method_ids, bench_ids = method_ids[1:], bench_ids[1:]  # less the baseline, which each part runs itself
    started = time.monotonic()
    problems = identical_outputs(args, method_ids)
    print(f"specatlas gpu-check: {len(method_ids) - len(problems)} of {len(method_ids)} methods identical to plain "
          f"decoding on {args.device} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    path = bench_slice(args, bench_ids)
    from specatlas.bench.validate_results import check_files

    fit = check_files([path])[path][0].problems
    problems += [f"{path}: {problem}" for problem in fit]
    print(f"specatlas gpu-check: {path}: {'not fit for the leaderboard' if fit else 'ok'} "
          f"({time.monotonic() - started:.0f} s in all)", file=sys.stderr)
    for problem in problems:
        print(f"specatlas gpu-check: {problem}", file=sys.stderr)
    return 1 if problems else 0


def identical_outputs(args: argparse.Namespace, method_ids: list[str]) -> list[str]:
    """Each method on the embedded model on `args.device` against plain decoding there: a line per
    method that failed, diverged or never drafted."""
    from specatlas.impls.engine.errors import ModelLoadError, first_line
    from specatlas.impls.engine.models import encode_chats, eos_ids, load_model, machine_kernels, pick_device, pick_dtype
    from specatlas.impls.registry import METHODS

    try:
        device = pick_device(args.device)
        target = load_model(None, device, pick_dtype(args.dtype, device), kernels=machine_kernels())
        prompts = encode_chats(target.tokenizer, list(PROMPTS))
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1) from None
    stop = eos_ids(target.model, target.tokenizer)
    plain = METHODS["baseline"].build(target.model)
    want = [plain.generate(prompt, args.max_new_tokens, stop=stop).tokens for prompt in prompts]
    problems = []
    for method_id in method_ids:
        clock = time.monotonic()
        try:
            decoder = METHODS[method_id].build(target.model)
            outputs = [decoder.generate(prompt, args.max_new_tokens, stop=stop) for prompt in prompts]
        except Exception as exc:  # noqa: BLE001 - one method's failure is its line; the others are checked
            problem = f"fails on {device}: {type(exc).__name__}: {first_line(exc)}"
        else:
            diverged = [i for i, (output, tokens) in enumerate(zip(outputs, want)) if output.tokens != tokens]
            drafted = sum(sum(output.stats.drafted_at) for output in outputs)
            problem = (f"differs from plain decoding on check prompt {diverged[0] + 1}" if diverged
                       else None if drafted else "never drafted")
        print(f"{method_id}: {problem or 'identical'} ({time.monotonic() - clock:.1f} s)", file=sys.stderr)
        problems += [f"{method_id}: {problem}"] if problem else []
    return problems


def bench_slice(args: argparse.Namespace, method_ids: list[str]) -> Path:
    """`specatlas bench` of `method_ids` at their papers' settings on the slice: the result file."""
    from specatlas.bench import questions
    from specatlas.bench.protocol import BenchError
    from specatlas.bench_arguments import add_arguments, bench
    from specatlas.fsutil import WriteError
    from specatlas.impls.engine.errors import ModelLoadError

    parser = argparse.ArgumentParser(prog="specatlas bench")
    add_arguments(parser)
    argv = [*method_ids, "--device", args.device, "--dtype", args.dtype, "--draft-length", "paper",
            "--limit-per-category", str(args.limit_per_category), "--max-new-tokens", str(args.bench_tokens),
            *(["--questions", str(args.questions)] if args.questions else []), *(["--out", str(args.out)] if args.out else [])]
    try:
        return bench(parser.parse_args(argv))
    except (BenchError, questions.QuestionsError, ModelLoadError, WriteError) as exc:
        raise CommandError(f"bench: {exc}") from None
