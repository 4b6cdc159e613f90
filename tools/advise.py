"""`specatlas advise`: which method to run on this machine, for these prompts, found in a few minutes.

A short `specatlas bench` on the user's prompts that writes nothing: load the target, measure its
forward-cost curve (the one the cost-aware policy drafts by), build every method whose drafter is
available here (model-free ones always; head methods where heads exist for this model; draft-model
ones with their default drafter) under the paper's settings and the cost-aware policy, warm each
up, then prompt by prompt run plain decoding and every method after it, in an order that rotates
from prompt to prompt, until the prompts or the time budget run out. Each method is reported with
its measured speedup (Spec-Bench's: its tokens per second over plain decoding's, averaged over the
same prompts), its predicted speedup (its accepted tokens per step against the cost curve at the
widths it verified plus its measured drafting time: the cost-aware policy's rate model), whether its
greedy outputs were plain decoding's, and how many prompts and tokens each number stands on.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from specatlas.bench import questions as qs
from specatlas.bench.run import BenchError, chosen_ids, policies
from specatlas.cli import CommandError, add_trust_remote_code
from specatlas.fsutil import ReadError, read_limited
from specatlas.impls.engine.draft_length import relative
from specatlas.run_command import number_problem

MAX_MINUTES = 24 * 60
MAX_PROMPTS_BYTES = 64 * 1024 * 1024
CATEGORY = "advise"  # the one category of the samples summarised here


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("methods", nargs="*", metavar="ID",
                        help="only these methods (ids or aliases; default: every method in the registry)")
    parser.add_argument("--prompts", type=Path, metavar="FILE",
                        help="your prompts: a text file with one prompt per line, or JSONL with {\"prompt\": ...} or "
                             "Spec-Bench's {\"turns\": [...]} (first turn) per line (default: the bench's built-in "
                             "prompt set, one subtask after another)")
    parser.add_argument("--minutes", type=float, default=5.0,
                        help="time budget for loading, calibrating and measuring (default 5); the run also ends when "
                             "every prompt is measured")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="per prompt (default 64)")
    parser.add_argument("--draft-length", default="both",
                        help="'both' (default: each method with its paper's settings and with the cost-aware policy), "
                             "'paper', 'cost-aware' or a fixed number of draft tokens")
    parser.add_argument("--model", help="local HF folder or hub id (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps")
    parser.add_argument("--dtype", default="auto", help="auto, float32, float16 or bfloat16")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    add_trust_remote_code(parser)


@dataclass
class Row:
    """One method under one draft-length policy, as advise reports it."""

    id: str  # the contender id (`paper-id` or `paper-id@cost-aware`)
    method: str  # the registry id
    policy: str
    status: str  # "measured", "unavailable" (could not be built here), "failed" (while decoding), "not measured"
    reason: str | None = None
    measured: float | None = None
    predicted: float | None = None
    accepted: float | None = None
    prompts: int = 0
    tokens: int = 0
    identical: int = 0  # outputs token-identical to plain decoding's
    compared: int = 0


def execute(args: argparse.Namespace) -> int:
    started, clock = datetime.now(timezone.utc), time.monotonic()
    if not (math.isfinite(args.minutes) and 0 < args.minutes <= MAX_MINUTES):
        raise CommandError(f"--minutes must be a positive number of minutes, at most {MAX_MINUTES}, got {args.minutes:g}")
    problem = number_problem(max_new_tokens=args.max_new_tokens, temperature=0.0, seed=0)
    if problem:
        raise CommandError(problem)
    try:
        chosen_policies = policies(args.draft_length)
        method_ids, peer_ids = chosen_ids(args.methods, not args.methods, peers=False)
    except BenchError as exc:
        raise CommandError(str(exc)) from None
    if peer_ids:
        raise CommandError(f"{peer_ids[0]} is a peer library, measured by `specatlas bench`; advise ranks SpecAtlas methods")
    prompts, source = read_prompts(args.prompts)
    deadline = clock + args.minutes * 60

    from specatlas.bench import contenders as cs
    from specatlas.bench.results import BASELINE, SCHEMA_VERSION, Run
    from specatlas.bench.run import attempt, built
    from specatlas.impls.engine import cpu_kernels
    from specatlas.impls.engine.decoding import room_after
    from specatlas.impls.engine.kv import Unsupported
    from specatlas.impls.engine.models import ModelLoadError, encode_chat, eos_ids, load_model, pick_device, pick_dtype
    from specatlas.impls.registry import METHODS

    try:
        device = pick_device(args.device)
        target = load_model(args.model, device, pick_dtype(args.dtype, device), args.trust_remote_code)
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1) from None
    encoded = [encode_chat(target.tokenizer, prompt) for prompt in prompts]
    for number, ids in enumerate(encoded, 1):
        try:
            room_after(target.model, ids, args.max_new_tokens)
        except Unsupported as exc:
            raise CommandError(f"prompt {number} of {source}: {exc}") from None
    curve = cs.cost_curve(target.model)
    stop = eos_ids(target.model, target.tokenizer)

    contenders, unavailable = [], set()
    for spec in map(METHODS.get, method_ids):
        for policy in [chosen_policies[0]] if spec.id == BASELINE else chosen_policies:
            if spec.id != BASELINE and time.monotonic() > deadline:
                break  # the rows left are reported as not measured
            contender = built(lambda s=spec, p=policy: cs.specatlas_method(s, target.model, None, p),
                              cs.contender_id(spec.id, policy), spec.name, "specatlas", spec.lossless,
                              cs.policy_of(spec.id, policy))
            contenders.append(contender)
            if contender.error:
                unavailable.add(contender.id)
    if contenders[0].error:
        raise CommandError(f"plain decoding cannot run: {contenders[0].error}", status=1)
    warmup = encode_chat(target.tokenizer, cs.WARMUP_PROMPT)
    for contender in contenders:  # untimed: first-call allocations and lazy initialisation must not count
        if not contender.error and time.monotonic() < deadline:
            attempt(contender, lambda c=contender: c.generate(warmup, cs.WARMUP, 0.0, 0, stop))

    samples, others, measured_prompts = [], contenders[1:], 0
    for index, ids in enumerate(encoded):
        shift = index % len(others) if others else 0
        for contender in [contenders[0], *others[shift:], *others[:shift]]:
            if time.monotonic() > deadline:
                break
            if contender.error:
                continue
            turn = attempt(contender, lambda c=contender: c.generate(ids, args.max_new_tokens, 0.0, 0, stop))
            if turn:
                samples.append({"question_id": str(index), "category": CATEGORY, "repeat": 0,
                                "method": contender.id, "turns": [{"seed": 0, **asdict(turn)}]})
                measured_prompts = max(measured_prompts, index + 1)
        if time.monotonic() > deadline:
            break

    run = Run(schema_version=SCHEMA_VERSION, config_hash="", config={"temperature": 0.0}, provenance={},
              cost_curve=curve, sessions=[{"started": started.isoformat(timespec="seconds"), "finished": None,
                                           "git_commit": None, "git_dirty": None, "units": len(samples)}],
              methods=[c.record for c in contenders], samples=samples, summary={})
    rows = ranked_rows(method_ids[1:], chosen_policies, contenders, unavailable, run)
    # The best is the fastest whose outputs were all plain decoding's: advise only recommends what it checked.
    best = next((r for r in rows if r.status == "measured" and r.identical == r.compared), None)
    command = run_command(best, args, prompts[0]) if best else None

    report = {
        "model": target.name, "device": str(device), "dtype": str(target.model.dtype).removeprefix("torch."),
        "machine": cpu_kernels.machine(), "kernels": cpu_kernels.describe(target.model),
        "prompts": {"source": source, "count": len(prompts), "measured": measured_prompts,
                    "max_new_tokens": args.max_new_tokens, "sampling": "greedy"},
        "minutes": args.minutes, "seconds": round(time.monotonic() - clock, 1),
        "cost_curve": {width: round(seconds, 6) for width, seconds in curve.items()},
        "baseline_tokens": sum(len(t["tokens"]) for s in samples if s["method"] == BASELINE for t in s["turns"]),
        "methods": [asdict(r) for r in rows],
        "best": {"id": best.id, "method": best.method, "policy": best.policy, "measured": best.measured,
                 "command": command} if best else None,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 0


def ranked_rows(method_ids: list[str], chosen_policies, contenders, unavailable: set[str], run) -> list[Row]:
    """A row per method and policy: the measured ones by measured speedup, fastest first, then the
    others with the reason they were not measured."""
    from specatlas.bench import contenders as cs
    from specatlas.bench.results import predicted_speedup, summarize
    from specatlas.impls.registry import METHODS

    summary, by_id, rows = summarize(run), {c.id: c for c in contenders}, []
    for spec in map(METHODS.get, method_ids):
        for policy in chosen_policies:
            row_id = cs.contender_id(spec.id, policy)
            contender = by_id.get(row_id)
            row = Row(row_id, spec.id, policy.name, "not measured", "the time budget ran out; raise --minutes")
            if contender and contender.error:
                row.status = "unavailable" if row_id in unavailable else "failed"
                row.reason = contender.error
            elif row_id in summary:
                overall, check = summary[row_id]["overall"], summary[row_id]["lossless"]
                predicted = predicted_speedup([t for s in run.samples if s.method == row_id for t in s.turns],
                                              run.cost_curve, drafting=True)
                row = Row(row_id, spec.id, policy.name, "measured", None, overall["speedup"],
                          round(predicted, 4) if predicted is not None else None, overall["mean_accepted"],
                          overall["questions"], overall["tokens"], check["identical"], check["compared"])
            rows.append(row)
    measured = sorted((r for r in rows if r.status == "measured"), key=lambda r: (-(r.measured or 0), r.id))
    return measured + [r for r in rows if r.status != "measured"]


def read_prompts(path: Path | None) -> tuple[list[str], str]:
    """(the prompts, where they come from). The default is the bench's built-in set, its subtasks
    taken in turn (a first from each, then a second...), so a short budget still sees every kind."""
    if path is None:
        chosen = qs.load(None).questions
        by_category: dict[str, list[str]] = {}
        for question in chosen:
            by_category.setdefault(question.category, []).append(question.turns[0])
        rounds = max(map(len, by_category.values()))
        prompts = [group[i] for i in range(rounds) for group in by_category.values() if i < len(group)]
        return prompts, f"the built-in prompt set {qs.BUILTIN.name}"
    where = f"--prompts {path}"
    try:
        raw = read_limited(path, MAX_PROMPTS_BYTES)
    except ReadError as exc:
        raise CommandError(f"{where} {exc}") from None
    if len(raw) > MAX_PROMPTS_BYTES:
        raise CommandError(f"{where} is over {MAX_PROMPTS_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{where}: byte 0x{raw[exc.start]:02x} at offset {exc.start} is not UTF-8; "
                           "save the file as UTF-8") from None
    prompts = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix != ".jsonl":
            prompts.append(line.strip())
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            item = None
        turns = item.get("turns") if isinstance(item, dict) else None
        prompt = item.get("prompt", turns[0] if isinstance(turns, list) and turns else None) if isinstance(item, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            raise CommandError(f"{path}:{number}: expected a JSON object with a non-empty \"prompt\" "
                               "(or Spec-Bench's \"turns\") on each line")
        prompts.append(prompt)
    if not prompts:
        raise CommandError(f"{where} holds no prompts")
    return prompts, str(path)


def run_command(row: Row, args, prompt: str) -> str:
    """The `specatlas run` command that runs `row` against plain decoding, on the first prompt."""
    argv = ["specatlas", "run", row.method]
    if row.policy != "paper":
        argv += ["--draft-length", args.draft_length if row.policy == "fixed" else row.policy]
    for flag, value, default in (("--model", args.model, None), ("--device", args.device, "auto"),
                                 ("--dtype", args.dtype, "auto")):
        if value not in (None, default):
            argv += [flag, value]
    if args.trust_remote_code:
        argv.append("--trust-remote-code")
    return shlex.join([*argv, "--max-new-tokens", str(args.max_new_tokens), "--compare", "--prompt", prompt])


def print_report(report: dict) -> None:
    p, machine = report["prompts"], report["machine"]
    print(f"{report['model']} on {report['device']} {report['dtype']}, {machine['cpu']}, {machine['threads']} threads; "
          f"kernels: {report['kernels']}")
    print(f"prompts: {p['source']}: {p['measured']} of {p['count']} measured, up to {p['max_new_tokens']} new tokens "
          f"each, {p['sampling']}; {report['seconds']:.0f} s of a {report['minutes']:g}-minute budget")
    curve = relative(report["cost_curve"])
    print("one target forward over w new tokens, x a one-token step: "
          + ", ".join(f"w={w} {curve[w]:.2f}" for w in (1, 2, 4, 8, 16, 32, 64) if w in curve))
    measured = [r for r in report["methods"] if r["status"] == "measured"]
    print()
    print(f"{'rank':>4}  {'method':34} {'policy':10} {'measured':>8} {'predicted':>9} {'accepted':>8} "
          f"{'prompts':>7} {'tokens':>6}  outputs = plain decoding's")
    for rank, r in enumerate(measured, 1):
        print(f"{rank:>4}  {r['method']:34} {r['policy']:10} {_times(r['measured']):>8} {_times(r['predicted']):>9} "
              f"{_number(r['accepted']):>8} {r['prompts']:>7} {r['tokens']:>6}  {r['identical']}/{r['compared']}")
    others = [r for r in report["methods"] if r["status"] != "measured"]
    if others:
        print()
        for r in others:
            print(f"      {r['method']} ({r['policy']}): {r['status']}: {r['reason']}")
    print()
    print(f"measured: tokens/s over plain decoding's on the same prompts (mean over prompts; plain decoding made "
          f"{report['baseline_tokens']} tokens); predicted: accepted tokens per step against the cost curve at the "
          f"verified widths plus the measured drafting time (the cost-aware policy's model); accepted: tokens per "
          f"target forward. From {p['measured']} prompt{'s' if p['measured'] != 1 else ''}: for firmer numbers give "
          f"more prompts and minutes, or run `specatlas bench`.")
    best = report["best"]
    if best is None:
        print("no method finished with outputs identical to plain decoding's: nothing to recommend")
        return
    verdict = "the fastest" if (best["measured"] or 0) > 1 else "no method beat plain decoding here; the closest"
    print(f"{verdict}: {best['method']} ({best['policy']}), {best['measured']:.2f}x; to run it beside plain decoding:")
    print(f"  {best['command']}")


def _times(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "–"


def _number(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "–"
