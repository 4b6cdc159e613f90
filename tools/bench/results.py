"""The result file's schema and the metrics derived from its raw samples (reading and writing the
files: `specatlas.bench.result_files`).

Schema versions: 1 held one cost curve, timed when the run first started; 2 (written now) holds
each session's own curve (`Session.cost_curve`, timed at that session's start) and the run's
`cost_curve` combined from them (`combine_curves`), with where each width came from. Both load.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from statistics import fmean, median
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator


SCHEMA_VERSION = 2
SCHEMA_VERSIONS = (1, 2)
BASELINE = "baseline"
# Another engine's rows (bench.contenders.LLAMACPP): its greedy decoding is what its rows are measured against.
LLAMACPP_GREEDY, LLAMACPP_LOOKUP = "llamacpp-greedy", "llamacpp-prompt-lookup"
# Sessions' cost curves differing by more than this (median over widths of slowest / fastest - 1)
# mean some session was timed on a loaded machine; timing noise on an idle one stays within ~5%.
CURVE_TOLERANCE = 0.10


class _Strict(BaseModel):
    # strict: "yes" is not a boolean, "4" and 4.0 are not token ids; only the JSON object keys
    # that stand for numbers (`Width`) are read from their text.
    model_config = ConfigDict(extra="forbid", strict=True)


# Keys of a method's summary besides its categories; a category may not take these names.
RESERVED_CATEGORIES = ("overall", "lossless")

Seconds = Field(ge=0, allow_inf_nan=False)
SHA256_HEX = r"^[0-9a-f]{64}$"
# Trained weights a method ran: a shipped head's folder name (any other checkpoint as given) -> sha256 of its weight file.
Weights = dict[Annotated[str, Field(min_length=1)], Annotated[str, Field(pattern=SHA256_HEX)]]
# No machine decodes a million tokens a second for one sequence: a faster turn is a bad clock.
MAX_TOKENS_PER_SECOND = 1e6


def _key_number(value: object) -> object:
    """A JSON object key that stands for a number ("3"): that number; anything else as it is."""
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value


Width = Annotated[int, BeforeValidator(_key_number), Field(ge=1)]  # tokens fed to one target forward
# tokens fed -> seconds of one target forward
CostCurve = Annotated[dict[Width, Annotated[float, Field(gt=0, allow_inf_nan=False)]], Field(min_length=1)]


class Turn(_Strict):
    seed: int
    tokens: list[int]
    wall_seconds: float = Field(gt=0, allow_inf_nan=False)
    steps: int = Field(ge=0)
    widths: dict[Width, Annotated[int, Field(ge=0)]]  # tokens fed -> forwards
    draft_seconds: float | None = Seconds
    verify_seconds: float | None = Seconds
    # of verify_seconds, the target's verification forwards as timed (result files before 2026-12-05 lack it)
    forward_seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    drafted_at: list[Annotated[int, Field(ge=0)]] | None  # draft tokens proposed at each depth
    accepted_at: list[Annotated[int, Field(ge=0)]] | None  # and of those, accepted

    @model_validator(mode="after")
    def _consistent(self) -> Turn:
        drafted, accepted = self.drafted_at or [], self.accepted_at or []
        if len(drafted) != len(accepted) or any(a > d for a, d in zip(accepted, drafted)):
            raise ValueError("accepted_at must list, per draft position, at most the drafted_at tokens")
        if self.forward_seconds is not None and (self.verify_seconds is None
                                                 or self.forward_seconds > self.verify_seconds + 1e-6):
            raise ValueError("forward_seconds is part of verify_seconds: it needs verify_seconds, and cannot exceed it")
        if self.steps > len(self.tokens):
            raise ValueError(f"{self.steps} steps for {len(self.tokens)} tokens: every counted target forward "
                             "commits at least one token")
        if len(self.tokens) > MAX_TOKENS_PER_SECOND * self.wall_seconds:
            raise ValueError(f"{len(self.tokens)} tokens in {self.wall_seconds:g} s is faster than any clock "
                             f"this could measure ({MAX_TOKENS_PER_SECOND:g} tokens/s)")
        return self


class Sample(_Strict):
    question_id: str
    category: str
    repeat: int = Field(ge=0)
    method: str
    turns: list[Turn] = Field(min_length=1)

    @field_validator("category")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_CATEGORIES:
            raise ValueError(f"'{value}' is reserved for the summary; rename the category")
        return value


class Method(_Strict):
    id: str
    name: str
    kind: Literal["specatlas", "peer"]
    lossless: bool
    setup: str
    error: str | None
    policy: str | None = None  # "paper", "cost-aware" or "fixed"; absent in older results
    # The row this one's speedup is over, and whose greedy tokens it must reproduce when lossless;
    # None: the baseline. Another engine's rows (llama.cpp) are measured against its own greedy
    # decoding, that row itself against our baseline's tokens (see `references`).
    relative_to: str | None = None
    # The trained weights it ran (heads, adapters, drafters: its decoder's `weights`); {} when it loaded
    # none. None in files written before it was recorded: results/provenance/weights-of-earlier-runs.json then
    # holds them, derived from git (`specatlas.bench.earlier_weights`).
    weights: Weights | None = None


class Session(_Strict):
    started: str
    finished: str | None
    git_commit: str | None
    git_dirty: bool | None
    units: int  # (question, method, repeat) units measured in the session
    # Timed at the session's start (schema 2); None where no curve of it was kept (older runs).
    cost_curve: CostCurve | None = None


class CurveSource(_Strict):
    """How a run's cost curve was combined from its sessions' curves (`combine_curves`)."""

    rule: Literal["per-width minimum over the sessions' curves"]
    sessions: list[int]  # the sessions (1-based) that timed a curve
    session_of_width: dict[Width, int]  # the session whose time each width of the run's curve is
    disagreement: float  # median over widths timed twice or more of (slowest / fastest - 1)
    tolerance: float
    warning: str | None


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class ModelConfig(_Open):
    target: str
    target_sha256: str | None
    drafter: str | None = None


class PromptSetConfig(_Open):
    id: str
    sha256: str


class RunConfig(_Open):
    """The keys the metrics and the leaderboard read; others are kept as they are."""

    methods: list[str]
    policy: str | None = None  # the draft-length policy of every row, in runs that had one
    prompt_set: PromptSetConfig
    question_ids: list[str]
    model: ModelConfig
    device: str
    dtype: str
    max_new_tokens: int
    repeats: int
    temperature: float = Field(ge=0, allow_inf_nan=False)
    seed: int
    torch: str | None
    transformers: str | None


class Hardware(_Open):
    cpu: str
    gpu: str | None
    cores: int | None
    torch_threads: int | None


class Provenance(_Open):
    started: str
    hardware: Hardware


class Run(_Strict):
    schema_version: Literal[SCHEMA_VERSIONS]
    config_hash: str
    config: dict  # everything that must match for a checkpoint to be resumed (hashed); see RunConfig
    provenance: dict  # packages, hardware, model digests, prompt set, command: see protocol.py
    # The curve the metrics and the leaderboard price forwards with: in schema 1 the one timed at
    # the run's start; in schema 2 combined from the sessions' curves, as `cost_curve_source` says.
    cost_curve: CostCurve
    sessions: list[Session] = Field(min_length=1)
    methods: list[Method]
    samples: list[Sample]
    summary: dict
    cost_curve_source: CurveSource | None = None

    @field_validator("schema_version", mode="before")
    @classmethod
    def _a_number(cls, value: object) -> object:
        if type(value) is not int:  # Literal[1, 2] alone takes true, which equals 1
            raise ValueError(f"must be one of the numbers {', '.join(map(str, SCHEMA_VERSIONS))}")
        return value

    @model_validator(mode="after")
    def _curves_of_its_version(self) -> Run:
        if self.schema_version == 1 and (self.cost_curve_source or any(s.cost_curve for s in self.sessions)):
            raise ValueError("schema 1 results hold one cost curve: sessions' curves need schema_version 2")
        if self.schema_version >= 2 and self.cost_curve_source is None:
            raise ValueError("cost_curve_source is missing: schema 2 says how cost_curve comes from the sessions'")
        return self


def combine_curves(curves: list[dict | None]) -> tuple[dict[int, float], dict]:
    """(the run's cost curve, its `CurveSource` fields) from its sessions' curves, in session order
    (None: a session that kept none). Each width takes the fastest session's time: load from
    other jobs only ever adds time, so the least-disturbed measurement is the fastest. Sessions
    that disagree beyond `CURVE_TOLERANCE` get a warning: one of them ran on a loaded machine."""
    timed = [(number, {int(w): s for w, s in curve.items()}) for number, curve in enumerate(curves, 1) if curve]
    if not timed:
        raise ValueError("no session timed a cost curve")
    curve, source, spreads = {}, {}, []
    for width in sorted({w for _, c in timed for w in c}):
        times = [(c[width], number) for number, c in timed if width in c]
        curve[width], source[width] = min(times)
        if len(times) > 1:
            spreads.append(max(times)[0] / curve[width] - 1)
    disagreement = round(median(spreads), 4) if spreads else 0.0
    warning = (f"the cost curves of sessions {', '.join(str(n) for n, _ in timed)} disagree by {disagreement:.0%} "
               f"(median over widths; tolerance {CURVE_TOLERANCE:.0%}): some session was timed on a loaded machine; "
               "each width takes its fastest session's time" if disagreement > CURVE_TOLERANCE else None)
    return curve, {"rule": "per-width minimum over the sessions' curves", "sessions": [n for n, _ in timed],
                   "session_of_width": source, "disagreement": disagreement, "tolerance": CURVE_TOLERANCE,
                   "warning": warning}


def curve_fields(sessions: list[dict]) -> dict:
    """`cost_curve` and `cost_curve_source` of a schema-2 run with these sessions."""
    curve, source = combine_curves([s.get("cost_curve") for s in sessions])
    return {"cost_curve": curve, "cost_curve_source": source}


def curve_warning(run: Run) -> str | None:
    """Why the run's cost curve may be unsteady (sessions' curves that disagree), or None."""
    return run.cost_curve_source.warning if run.cost_curve_source else None


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


# Metrics ---------------------------------------------------------------------------------------

def summarize(run: Run) -> dict:
    """Per method: metrics overall and per category, and the lossless check against the baseline
    (or the rows `references` names).

    speedup: Spec-Bench's, the mean per-question throughput (tokens / seconds over all turns of a
    question and repeat) divided by the baseline's (or its relative_to row's) on the same
    questions. speedup_total: total
    tokens over total time, divided likewise. mean_accepted: tokens per target forward that
    committed tokens. predicted: the speedup if drafting were free, from mean_accepted and the
    measured cost curve (a plain step costs c(1); a forward over w tokens costs c(w)).
    """
    by_method: dict[str, dict[tuple[str, int], Sample]] = {}
    for sample in run.samples:
        by_method.setdefault(sample.method, {})[(sample.question_id, sample.repeat)] = sample
    greedy = run.config.get("temperature", 0) == 0
    out = {}
    for method in run.methods:
        faster_than, same_as = references(method)
        base, same = by_method.get(faster_than, {}), by_method.get(same_as, {})
        mine = by_method.get(method.id, {})
        keys = [key for key in mine if key in base and key in same]
        if not keys:
            continue
        groups = {"overall": list(keys)}
        for key in keys:
            groups.setdefault(mine[key].category, []).append(key)
        out[method.id] = {
            name: _metrics([mine[k] for k in group], [base[k] for k in group], run.cost_curve) for name, group in groups.items()
        }
        out[method.id]["lossless"] = _lossless_check(mine, same, keys) if greedy else {
            "status": "not applicable", "reason": f"sampling at temperature {run.config['temperature']:g} "
            f"(seed {run.config['seed']}): token identity is not expected"}
    return out


def references(method: Method) -> tuple[str, str]:
    """(the row its speedup is over, the row whose greedy tokens its lossless check compares with)."""
    faster_than = method.relative_to or BASELINE
    return faster_than, BASELINE if faster_than == method.id else faster_than


def row_name(row_id: str) -> str:
    """A row as messages and pages name it."""
    return "our baseline" if row_id == BASELINE else row_id


def divergence(method: Method, check: dict) -> str:
    """A failed greedy lossless check in words: how many outputs differ from whose, and where first."""
    first = check["first_divergence"]
    return (f"{check['compared'] - check['identical']} of {check['compared']} outputs differ from "
            f"{row_name(references(method)[1])}'s (first: question {first['question_id']}, turn {first['turn']}, "
            f"token {first['position']})")


def _throughput(sample: Sample) -> float:
    return sum(len(t.tokens) for t in sample.turns) / sum(t.wall_seconds for t in sample.turns)


def _metrics(mine: list[Sample], base: list[Sample], curve: dict[int, float]) -> dict:
    turns = [t for s in mine for t in s.turns]
    tokens = sum(len(t.tokens) for t in turns)
    seconds = sum(t.wall_seconds for t in turns)
    base_turns = [t for s in base for t in s.turns]
    base_rate = sum(len(t.tokens) for t in base_turns) / sum(t.wall_seconds for t in base_turns)
    base_mean = fmean(map(_throughput, base))
    steps = sum(t.steps for t in turns)
    predicted = predicted_speedup(turns, curve)
    drafted, accepted = _positions(turns)
    timed = [t for t in turns if t.draft_seconds is not None]
    return {
        "questions": len(mine),
        "tokens": tokens,
        "seconds": round(seconds, 4),
        # None when the baseline produced no tokens: there is nothing to be faster than.
        "speedup": round(fmean(map(_throughput, mine)) / base_mean, 4) if base_mean else None,
        "speedup_total": round(tokens / seconds / base_rate, 4) if base_rate else None,
        "mean_accepted": round(tokens / steps, 4) if steps else None,
        "predicted": round(predicted, 4) if predicted is not None else None,
        "acceptance_by_position": [round(a / d, 4) if d else None for a, d in zip(accepted, drafted)] if drafted else None,
        "draft_seconds": round(sum(t.draft_seconds for t in timed), 4) if timed else None,
        "verify_seconds": round(sum(t.verify_seconds for t in timed), 4) if timed else None,
    }


def widths_cover_steps(turn: Turn) -> bool:
    """Whether `turn.widths` counts one target forward per step, so the cost curve can price its
    verification. A SpecAtlas method's steps must each have one (a verification resumed from an
    early exit, Kangaroo's, runs outside the counted forward: its turns count almost none); a
    peer's drafting is not timed and its steps count the prefill, which widths leave out."""
    return turn.draft_seconds is None or sum(turn.widths.values()) == turn.steps


def predicted_speedup(turns: list[Turn], curve: dict[int, float], drafting: bool = False) -> float | None:
    """The speedup the cost curve predicts for these turns: the tokens each step committed, against
    a plain step's cost c(1), over the cost of the forwards at the widths they verified. With
    `drafting`, the measured drafting time is added to that cost: the rate model the cost-aware
    policy drafts by (`draft_length.CostAware`); without it, the speedup if drafting were free.
    None where a timed turn's widths miss some step's forward (see `widths_cover_steps`)."""
    if not all(map(widths_cover_steps, turns)):
        return None
    steps = sum(t.steps for t in turns)
    widths: Counter[int] = Counter()
    for t in turns:
        widths.update(t.widths)
    seconds = sum(forward_cost(curve, w) * n for w, n in widths.items())
    if drafting:
        seconds += sum(t.draft_seconds or 0.0 for t in turns)
    if not steps or not seconds:
        return None
    return sum(len(t.tokens) for t in turns) / steps * forward_cost(curve, 1) * sum(widths.values()) / seconds


@dataclass(frozen=True)
class StepTime:
    """Seconds per decoding step, by where they went (see `step_time`)."""

    steps: int
    drafting: float
    forward: float
    overhead: float
    one_token: float  # c(1): a one-token target forward, from the run's cost curve
    measured: bool = False  # forward as timed in the engine, not priced by the cost curve

    @property
    def total(self) -> float:
        return self.drafting + self.forward + self.overhead

    @property
    def overhead_share(self) -> float:
        """The overhead as a fraction of a one-token forward."""
        return self.overhead / self.one_token


def step_time(turns: list[Turn], curve: dict[int, float]) -> StepTime | None:
    """Where the decoding steps of `turns` spent their time, per step. A step is one pass of the
    engine's loop (`decoding.SpeculativeDecoder.steps`; `Turn.steps` counts them, the prefill
    excluded, so mean accepted tokens are tokens / steps): drafting (`draft_seconds`, the draft-
    length policy's choice included), then one verification (`verify_seconds`). Of the
    verification, `forward` is the target's forward call (the tree mask and positions are built in
    it) and `overhead` the rest: acceptance, KV rollback and commit (the baseline's overhead is this
    floor). The forwards are as timed (`forward_seconds`) where every turn records them; in older
    result files they are priced by the run's cost curve at the widths the steps fed, which is timed
    after a 64-token context, so there the overhead also holds the tree mask and attention over the
    rest of the context. The
    prefill and the loop's bookkeeping between steps are in no step: result files do not record them
    apart. None where a turn's drafting and verification are not timed (peers), or, priced, its widths
    miss some step's forward (`widths_cover_steps`)."""
    if not turns or any(t.draft_seconds is None or t.verify_seconds is None for t in turns):
        return None
    steps = sum(t.steps for t in turns)
    if not steps:
        return None
    measured = all(t.forward_seconds is not None for t in turns)
    if measured:
        forward = sum(t.forward_seconds for t in turns)
    elif not all(map(widths_cover_steps, turns)):
        return None
    else:
        forward = sum(forward_cost(curve, w) * n for t in turns for w, n in t.widths.items())
    verify = sum(t.verify_seconds for t in turns)
    return StepTime(steps, sum(t.draft_seconds for t in turns) / steps, forward / steps, (verify - forward) / steps,
                    forward_cost(curve, 1), measured)


def forward_cost(curve: dict[int, float], width: int) -> float:
    """c(width), interpolated linearly between measured widths; outside them, proportional to the
    nearest (a curve from another tool may lack width 1)."""
    if width in curve:
        return curve[width]
    below = max((w for w in curve if w < width), default=None)
    above = min((w for w in curve if w > width), default=None)
    if below is None or above is None:
        nearest = above if below is None else below
        return curve[nearest] * width / nearest
    return curve[below] + (curve[above] - curve[below]) * (width - below) / (above - below)


def _positions(turns: list[Turn]) -> tuple[list[int], list[int]]:
    drafted: list[int] = []
    accepted: list[int] = []
    for t in turns:
        for i, (d, a) in enumerate(zip(t.drafted_at or [], t.accepted_at or [])):
            if i == len(drafted):
                drafted.append(0)
                accepted.append(0)
            drafted[i] += d
            accepted[i] += a
    return drafted, accepted


def _lossless_check(mine: dict, base: dict, keys: list) -> dict:
    """Token-by-token comparison of every output with the baseline's for the same question,
    repeat and turn. Later turns see each method's own earlier answers, as in Spec-Bench."""
    compared = identical = 0
    first = None
    for key in keys:
        for turn, (ours, theirs) in enumerate(zip(mine[key].turns, base[key].turns), 1):
            compared += 1
            position = next((i for i, (a, b) in enumerate(zip(ours.tokens, theirs.tokens)) if a != b),
                            None if len(ours.tokens) == len(theirs.tokens) else min(len(ours.tokens), len(theirs.tokens)))
            if position is None:
                identical += 1
            elif first is None:
                first = {"question_id": key[0], "repeat": key[1], "turn": turn, "position": position}
    return {"status": "pass" if identical == compared else "fail", "identical": identical, "compared": compared,
            "first_divergence": first}
