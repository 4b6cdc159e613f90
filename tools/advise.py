"""`specatlas advise`: which method to run on this machine, for these prompts, found in a few minutes.

A short `specatlas bench` on the user's prompts that writes nothing: load the target, measure its
forward-cost curve (the one the cost-aware policy drafts by), then prompt by prompt run plain
decoding and, after it, every method whose drafter is available here (model-free ones always; head
methods where heads exist for this model; draft-model ones with their default drafter), each under
the paper's settings and the cost-aware policy, until the prompts or the time budget run out.

Why the order matters: a few minutes on a slow machine do not reach every method even once, and
building some costs time of its own (loading a trained head or a drafter). In registry order the
budget goes to whichever methods sort first, slow ones included, and the fast ones may never be
reached. So it is spent on promise (where `specatlas bench` rotates its order from question to
question against drift, here the order is the point):
- Each method under each policy gets a prior, its speedup on the committed leaderboard (the result
  files in results/, read as `specatlas leaderboard` reads them, so `specatlas bench` repeats them)
  for this model on this device: from this hardware's tables when any ranks the model there, else
  from every hardware's; the mean over the tables that rank it, each weighted by its size. No speed
  is written into this code.
- The order: methods expected faster than plain decoding (prior >= 1), fastest first; then those with
  no prior (another model, a method no result has yet), the model-free first because they load
  nothing, then the rest in registry order; then those expected slower, fastest first. A tie goes to
  the model-free one.
- A method is built and warmed up (untimed) only when its first measurement comes, so its load time
  is spent on a method that is measured, and is reported as its setup time.
- After each prompt the order is recomputed, a method's measured speedup on these prompts replacing
  its prior (this machine and these prompts outrank any leaderboard), and a method measured clearly
  slower than plain decoding (below CLEARLY_SLOWER) gets no more prompts.

Each method is reported with its measured speedup (Spec-Bench's: its tokens per second over plain
decoding's, averaged over the same prompts), its predicted speedup (its accepted tokens per step
against the cost curve at the widths it verified plus its measured drafting time: the cost-aware
policy's rate model), its prior, when it was measured, whether its greedy outputs were plain
decoding's, how many prompts and tokens each number stands on, and for the methods not measured, why.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from specatlas.bench import questions as qs
from specatlas.bench.results import (BASELINE, SCHEMA_VERSION, Method, Run, Sample, curve_fields, predicted_speedup,
                                     summarize)
from specatlas.cli import (CommandError, add_trust_remote_code, chosen_methods, draft_length_policies, number_problem,
                           printable)
from specatlas.fsutil import NotUTF8, ReadError, parse_json, read_limited, text_lines
from specatlas.impls.engine.draft_length import DraftLengthPolicy, relative
from specatlas.impls.registry import METHODS, MethodSpec
from specatlas.paths import repo_root

if TYPE_CHECKING:
    from specatlas.bench.contenders import Contender, Turn

MAX_MINUTES = 24 * 60
MAX_PROMPTS_BYTES = 64 * 1024 * 1024
CATEGORY = "advise"  # the one category of the samples summarised here
# A measured speedup under this takes a method out of the later prompts: a margin under plain
# decoding's speed, so that a method within timing noise of it keeps being measured.
CLEARLY_SLOWER = 0.9


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
    prior: float | None = None  # its speedup on the leaderboard (see the module's docstring)
    order: int | None = None  # 1 for the first method measured, 2 for the next...
    setup_seconds: float | None = None  # building and warming it up, spent from the budget


@dataclass
class Candidate:
    """A method under one draft-length policy, waiting for its turn: built when first measured."""

    id: str  # the contender id
    spec: MethodSpec
    policy: DraftLengthPolicy
    index: int  # its place in the registry (or on the command line): the last tie-breaker
    prior: float | None = None
    contender: Contender | None = None  # once built
    measured: float | None = None  # its speedup over plain decoding on the prompts measured so far
    order: int | None = None
    setup_seconds: float | None = None
    dropped: bool = False  # skipped on a later prompt for being clearly slower

    @property
    def loads(self) -> bool:
        """Whether building it loads weights besides the target's (a trained head or a drafter)."""
        return self.spec.uses_draft_model or bool(self.spec.trained_head)

    @property
    def promise(self) -> float | None:
        return self.measured if self.measured is not None else self.prior

    @property
    def slower(self) -> bool:
        return self.measured is not None and self.measured < CLEARLY_SLOWER


def waiting(method_ids: list[str], chosen_policies: list[DraftLengthPolicy],
            prior: dict[tuple[str, str], float]) -> list[Candidate]:
    """A candidate per method and policy, with its prior where there is one."""
    from specatlas.bench.contenders import contender_id

    return [Candidate(contender_id(spec.id, policy), spec, policy, index, prior.get((spec.id, policy.name)))
            for index, spec in enumerate(map(METHODS.get, method_ids)) for policy in chosen_policies]


def ranked(candidates: list[Candidate]) -> list[Candidate]:
    """Most promising first: expected faster than plain decoding, then unknown, then expected slower."""
    def key(c: Candidate):
        tier = 1 if c.promise is None else 0 if c.promise >= 1 else 2
        return tier, -(c.promise or 0.0), c.loads, c.index

    return sorted(candidates, key=key)


def priors(results_dir: Path | None, hardware_label: str, device: str, model: str) -> tuple[dict[tuple[str, str], float], str]:
    """((paper id, policy) -> prior speedup, where the priors come from, in words)."""
    from specatlas.bench.measured import measured_here

    rows, here = measured_here(results_dir, hardware_label, device, model) if results_dir else ([], False)
    if not rows:
        return {}, (f"no result in results/ ranks {model} on {device}: model-free methods first, then the others "
                    "in registry order")
    weighted: dict[tuple[str, str], list[float]] = {}
    for m in rows:
        total = weighted.setdefault((m.method_id, m.policy), [0.0, 0.0])
        total[0] += m.speedup * m.table.size
        total[1] += m.table.size
    tables = len({m.table for m in rows})
    where = "this hardware" if here else "other hardware (none measured here)"
    return ({key: speedup / size for key, (speedup, size) in weighted.items()},
            f"speedups on the leaderboard in results/ ({tables} table{'s' if tables != 1 else ''} of {model} on "
            f"{device}, {where})")


def _results_dir() -> Path | None:
    try:
        return repo_root() / "results"
    except SystemExit:  # run outside a checkout: no leaderboard, so the plain order
        return None


def measure(run: Run, baseline: Contender, candidates: list[Candidate], prompts: Iterable[list[int]],
            prepare: Callable[[Candidate], Contender], generate: Callable[[Contender, list[int]], Turn | None],
            deadline: float, clock: Callable[[], float] = time.monotonic) -> int:
    """Prompt by prompt until the prompts or the budget run out: plain decoding, then the candidates
    most promising first, each prepared (built, warmed up) just before its first measurement, and
    re-ranked after every prompt. Adds the samples (and the methods built) to `run`; returns the
    number of prompts plain decoding measured."""
    done, order = 0, 0
    for index, ids in enumerate(prompts):
        if clock() > deadline or not _sample(run, baseline, index, generate(baseline, ids)):
            break
        done += 1
        for c in ranked(candidates):
            if clock() > deadline:
                break
            if c.slower:
                c.dropped = True
                continue
            if c.contender is None:
                start = clock()
                c.contender = prepare(c)
                c.setup_seconds = round(clock() - start, 2)
                run.methods.append(Method.model_validate(c.contender.record))
            if not c.contender.error and _sample(run, c.contender, index, generate(c.contender, ids)) and not c.order:
                order += 1
                c.order = order
        summary = summarize(run)  # Spec-Bench's speedup over plain decoding, on the prompts both measured
        for c in candidates:
            if c.id in summary:
                c.measured = summary[c.id]["overall"]["speedup"]
    return done


def _sample(run: Run, contender: Contender, index: int, turn: Turn | None) -> bool:
    if turn:
        run.samples.append(Sample.model_validate({"question_id": str(index), "category": CATEGORY, "repeat": 0,
                                                  "method": contender.id, "turns": [{"seed": 0, **asdict(turn)}]}))
    return turn is not None


def empty_run(curve: dict[int, float], baseline: Contender) -> Run:
    """The run `measure` fills: what `summarize` needs to rank it like a bench run."""
    sessions = [{"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "finished": None,
                 "git_commit": None, "git_dirty": None, "units": 0, "cost_curve": curve}]
    return Run(schema_version=SCHEMA_VERSION, config_hash="", config={"temperature": 0.0}, provenance={},
               sessions=sessions, **curve_fields(sessions), methods=[baseline.record], samples=[], summary={})


def _checked(args: argparse.Namespace) -> tuple[list[DraftLengthPolicy], list[str]]:
    """(the draft-length policies, the method ids with the baseline first) the arguments ask for, or a
    CommandError before any model loads."""
    if not (math.isfinite(args.minutes) and 0 < args.minutes <= MAX_MINUTES):
        raise CommandError(f"--minutes must be a positive number of minutes, at most {MAX_MINUTES}, got {args.minutes:g}")
    problem = number_problem(max_new_tokens=args.max_new_tokens, temperature=0.0, seed=0)
    if problem:
        raise CommandError(problem)
    chosen_policies = draft_length_policies(args.draft_length)
    method_ids, peer_ids = chosen_methods(args.methods, not args.methods, peers=False)
    if peer_ids:
        raise CommandError(f"{peer_ids[0]} is a peer library, measured by `specatlas bench`; advise ranks SpecAtlas methods")
    return chosen_policies, method_ids


def execute(args: argparse.Namespace) -> int:
    clock = time.monotonic()
    chosen_policies, method_ids = _checked(args)
    prompts, source = read_prompts(args.prompts)
    deadline = clock + args.minutes * 60

    from specatlas.bench import contenders as cs
    from specatlas.bench.provenance import hardware, label
    from specatlas.impls.engine import cpu_kernels
    from specatlas.impls.engine.models import ModelLoadError, encode_chat, eos_ids

    device, target = loaded_target(args)

    curve = cs.cost_curve(target.model)
    stop = eos_ids(target.model, target.tokenizer)
    try:
        warmup = encode_chat(target.tokenizer, cs.WARMUP_PROMPT)
    except ModelLoadError as exc:  # the model's chat template failed or ran away
        raise CommandError(f"model {target.name}: {exc}", status=1) from None

    def prepare(spec: MethodSpec, policy: DraftLengthPolicy) -> Contender:
        """Built and warmed up: first-call allocations and lazy initialisation must not be timed."""
        contender = cs.built(lambda: cs.specatlas_method(spec, target.model, None, policy), cs.contender_id(spec.id, policy),
                          spec.name, "specatlas", spec.lossless, cs.policy_of(spec.id, policy))
        if not contender.error:
            cs.attempt(contender, lambda: contender.generate(warmup, cs.WARMUP, 0.0, 0, stop))
        return contender

    baseline = prepare(METHODS[BASELINE], chosen_policies[0])
    if baseline.error:
        raise CommandError(f"plain decoding cannot run: {baseline.error}", status=1)
    prior, priors_source = priors(_results_dir(), label(hardware(device)), device.type, target.name)
    candidates = waiting(method_ids[1:], chosen_policies, prior)
    run = empty_run(curve, baseline)
    measured_prompts = measure(
        run, baseline, candidates, encoded(target, prompts, source, args.max_new_tokens),
        lambda c: prepare(c.spec, c.policy),
        lambda c, ids: cs.attempt(c, lambda: c.generate(ids, args.max_new_tokens, 0.0, 0, stop)), deadline)

    rows = ranked_rows(candidates, run)
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
        "baseline_tokens": sum(len(t.tokens) for s in run.samples if s.method == BASELINE for t in s.turns),
        "priors": priors_source,
        "order": [c.id for c in sorted((c for c in candidates if c.order), key=lambda c: c.order)],
        "methods": [asdict(r) for r in rows],
        "best": {"id": best.id, "method": best.method, "policy": best.policy, "measured": best.measured,
                 "command": command} if best else None,
    }
    show(report, args.json)
    return 0


def loaded_target(args: argparse.Namespace):
    """(device, the target model) as the arguments ask; a model that cannot load is a CommandError."""
    from specatlas.impls.engine.models import ModelLoadError, load_model, machine_kernels, pick_device, pick_dtype

    try:
        device = pick_device(args.device)
        return device, load_model(args.model, device, pick_dtype(args.dtype, device), args.trust_remote_code,
                                  machine_kernels())
    except ModelLoadError as exc:
        raise CommandError(str(exc), status=1) from None


def encoded(target, prompts: list[str], source: str, max_new_tokens: int):
    """Each prompt's tokens when its turn comes: a budget spent tokenizing a large file would
    measure nothing."""
    from specatlas.impls.engine.decoding import room_after
    from specatlas.impls.engine.kv import Unsupported
    from specatlas.impls.engine.models import ModelLoadError, encode_chat

    for number, prompt in enumerate(prompts, 1):
        try:
            ids = encode_chat(target.tokenizer, prompt)
            room_after(target.model, ids, max_new_tokens)
        except (Unsupported, ModelLoadError) as exc:
            raise CommandError(f"prompt {number} of {source}: {exc}") from None
        yield ids


def show(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report))
    else:  # the prompts' and the model's own text is shown escaped: it may hold terminal sequences
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            print_report(report)
        sys.stdout.write(printable(shown.getvalue()))


def ranked_rows(candidates: list[Candidate], run: Run) -> list[Row]:
    """A row per candidate: the measured ones by measured speedup, fastest first, then the others
    in the order they would have come, with the reason they were not measured."""
    summary, queue, rows = summarize(run), ranked(candidates), []
    for place, c in enumerate(queue, 1):
        row = Row(c.id, c.spec.id, c.policy.name, "not measured", prior=_round(c.prior), order=c.order,
                  setup_seconds=c.setup_seconds)
        if c.contender and c.contender.error:
            # built() leaves a contender it could not build without a generate function
            row.status = "unavailable" if c.contender.generate is None else "failed"
            row.reason = c.contender.error
        elif c.id in summary:
            overall, check = summary[c.id]["overall"], summary[c.id]["lossless"]
            predicted = predicted_speedup([t for s in run.samples if s.method == c.id for t in s.turns],
                                          run.cost_curve, drafting=True)
            row.status, row.measured, row.predicted, row.accepted = ("measured", overall["speedup"], _round(predicted),
                                                                     overall["mean_accepted"])
            row.prompts, row.tokens, row.identical, row.compared = (overall["questions"], overall["tokens"],
                                                                    check["identical"], check["compared"])
            if c.dropped:
                row.reason = f"measured below {CLEARLY_SLOWER:g}x plain decoding's speed: given no more prompts"
        else:
            why = (f"prior {c.prior:.2f}x" if c.prior is not None else
                   "no prior; " + ("loads a head or a drafter" if c.loads else "model-free"))
            row.reason = f"ranked {place} of {len(queue)} ({why}): the time budget ran out before its turn; raise --minutes"
        rows.append(row)
    measured = sorted((r for r in rows if r.status == "measured"), key=lambda r: (-(r.measured or 0), r.id))
    return measured + [r for r in rows if r.status != "measured"]


def _round(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


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
        lines = text_lines(raw)
    except NotUTF8 as exc:
        raise CommandError(f"{path}:{exc.line}: {exc}") from None
    prompts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if path.suffix.lower() != ".jsonl":
            prompts.append(line.strip())
            continue
        try:
            item = parse_json(line)
        except ReadError:
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
    print(f"measured most promising first (the order column), then re-ranked after each prompt; priors: "
          f"{report['priors']}")
    measured = [r for r in report["methods"] if r["status"] == "measured"]
    print()
    print(f"{'rank':>4}  {'method':34} {'policy':10} {'measured':>8} {'predicted':>9} {'prior':>6} {'accepted':>8} "
          f"{'prompts':>7} {'tokens':>6} {'order':>5}  outputs = plain decoding's")
    for rank, r in enumerate(measured, 1):
        print(f"{rank:>4}  {r['method']:34} {r['policy']:10} {_times(r['measured']):>8} {_times(r['predicted']):>9} "
              f"{_times(r['prior']):>6} {_number(r['accepted']):>8} {r['prompts']:>7} {r['tokens']:>6} {r['order']:>5}  "
              f"{r['identical']}/{r['compared']}")
    noted = [r for r in report["methods"] if r["reason"]]
    if noted:
        print()
        for r in noted:
            print(f"      {r['method']} ({r['policy']}): {r['status']}: {r['reason']}")
    print()
    print(f"measured: tokens/s over plain decoding's on the same prompts (mean over prompts; plain decoding made "
          f"{report['baseline_tokens']} tokens); predicted: accepted tokens per step against the cost curve at the "
          f"verified widths plus the measured drafting time (the cost-aware policy's model); prior: the speedup that "
          f"ordered it before it was measured; accepted: tokens per target forward; order: when it was first "
          f"measured. From {p['measured']} prompt{'s' if p['measured'] != 1 else ''}: for firmer numbers give "
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
