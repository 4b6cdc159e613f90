"""The leaderboard's rows: result files read as runs, runs grouped into tables, a table's runs into rows.

Tables are per hardware, model, dtype, kernels, prompt set and sample size (questions, new tokens
per turn, repeats): a speedup only means something on the machine and model it was measured on,
so nothing is ranked across them; on each hardware the largest run's table comes first, the
headline for that hardware. Files that `specatlas results check` refuses (`validate_results`: a
failed lossless claim among them) are set apart with their first problem, none of their rows used.

A row (`Line`) describes one set of trained weights: the shipped heads, adapters and distilled
drafter are retrained from time to time, so a row averages only the runs of the weights its newest
run used (`Line.keep_newest_weights`). A run's weights are what its file records, else what
results/provenance/weights-of-earlier-runs.json holds for it (`specatlas.bench.earlier_weights`):
the leaderboard never asks git, whose history a checkout may lack.

The pages built on these rows: `leaderboard_page` (results/LEADERBOARD.md and the site's page),
`targets` (one run's speed targets), `measured` (rows as other pages and `advise` quote them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean, stdev

from specatlas.bench import earlier_weights
from specatlas.bench.provenance import label
from specatlas.bench.questions import prompt_set_name
from specatlas.bench.results import BASELINE, Run, StepTime, references, step_time
from specatlas.bench.validate_results import check_folder
from specatlas.impls.engine.draft_length import COST_AWARE as DEFAULT_POLICY
from specatlas.impls.engine.head_folders import shipped_in

NO_POLICY = "–"
UNKNOWN_WEIGHTS = "unknown"  # the digest of weights neither the result file nor the weights of earlier runs tell
Loaded = tuple[list[tuple[Run, str]], list[tuple[str, str]]]  # (run, file name), (file name, why not valid)


@dataclass
class Entry:
    """One method in one result file."""

    run: Run
    file: str
    method: object  # results.Method
    summary: dict | None

    @property
    def failure(self) -> str | None:
        if self.method.error:
            return f"could not run: {self.method.error}"
        if self.summary is None:
            return "no measured samples"
        if self.summary["overall"]["speedup"] is None:
            return "no speedup: the baseline produced no tokens"
        return None  # a failed lossless claim fails its whole file (`validate_results`): never loaded

    @property
    def policy(self) -> str:
        """The draft-length policy: the method's, else the run's, else cost-aware (what runs
        recorded before the field existed used). Peers keep their library's own schedule and the
        baseline drafts nothing, so neither has one."""
        if self.method.kind == "peer" or self.method.id == BASELINE:
            return NO_POLICY
        return getattr(self.method, "policy", None) or self.run.config.get("policy") or DEFAULT_POLICY

    @property
    def drafter(self) -> str:
        """What made the drafts: the recorded drafter when the result has one, else the first
        clause of the setup (later clauses are draft length and kernels, shown elsewhere)."""
        recorded = getattr(self.method, "drafter", None)
        if recorded:
            return str(recorded)
        parts = [p for p in top_level_parts(self.method.setup) if "draft length" not in p]
        return parts[0] if parts else "–"

    @property
    def drafted_per_step(self) -> float | None:
        drafted = steps = 0
        timed = False
        for sample in self.run.samples:
            if sample.method != self.method.id:
                continue
            for turn in sample.turns:
                steps += turn.steps
                if turn.drafted_at is not None:
                    timed = True
                    drafted += sum(turn.drafted_at)
        return drafted / steps if timed and steps else None

    @property
    def step_time(self) -> StepTime | None:
        return step_time([t for s in self.run.samples if s.method == self.method.id for t in s.turns], self.run.cost_curve)

    @property
    def weights(self) -> tuple[tuple[str, str], ...]:
        """The trained weights the row ran, as sorted (name, sha256 of the weight file) pairs; () for
        a method with none. As recorded (`results.Method.weights`), in files written before that as
        the weights of earlier runs hold them (`load_all` fills them in); else each shipped head its
        setup names (`head_folders.shipped_in`) is UNKNOWN_WEIGHTS. Exact, never fuzzy: unknown is
        compared as one version like any other, so such runs merge with one another, never with a
        run whose weights are known."""
        if self.method.weights is not None:
            return tuple(sorted(self.method.weights.items()))
        return tuple((name, UNKNOWN_WEIGHTS) for name in shipped_in(self.method.setup))

    @property
    def measured_at(self) -> tuple[datetime, str]:
        """When the run last measured (its latest session's start: recorded weights are that session's),
        then the file name, so that equal times still order the same way every time."""
        try:
            when = datetime.fromisoformat(self.run.sessions[-1].started)
        except ValueError:  # unreadable: the oldest
            when = datetime.min
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)), self.file


@dataclass
class Line:
    """One leaderboard row: a method under one draft-length policy, over every run of a table."""

    method_id: str
    policy: str
    entries: list[Entry]
    left_out: list[Entry] = field(default_factory=list)  # runs of other trained weights (`keep_newest_weights`)

    def keep_newest_weights(self) -> None:
        """Only the runs of the trained weights the newest run used form the row; runs of other weights
        move to `left_out`. Runs that measured nothing (could not run) stay, listed as failed: they
        add no number to the row. Methods without trained weights have one version, `()`: unaffected."""
        measured = [e for e in self.entries if e.summary is not None]
        if not measured:
            return
        newest = max(measured, key=lambda e: e.measured_at).weights
        self.left_out = [e for e in measured if e.weights != newest]
        self.entries = [e for e in self.entries if e.summary is None or e.weights == newest]

    @property
    def ok(self) -> list[Entry]:
        return [e for e in self.entries if e.failure is None]

    @property
    def ranked(self) -> bool:
        """Ranked when some run measured it."""
        return bool(self.ok)

    @property
    def method(self):
        return self.ok[0].method if self.ok else self.entries[0].method

    @property
    def own_engine(self) -> bool:
        """Another engine's row (llama.cpp), its speedup over that engine's own greedy decoding: never
        ranked beside speedups over our baseline."""
        return references(self.method)[0] != BASELINE

    @property
    def tokens_per_second(self) -> float | None:
        values = [e.summary["overall"]["tokens"] / e.summary["overall"]["seconds"] for e in self.ok
                  if e.summary["overall"]["seconds"]]
        return fmean(values) if values else None

    def values(self, category: str, metric: str) -> list[float]:
        return [e.summary[category][metric] for e in self.ok
                if category in e.summary and e.summary[category][metric] is not None]

    def mean(self, category: str, metric: str) -> float | None:
        values = self.values(category, metric)
        return fmean(values) if values else None

    def cell(self, category: str, metric: str, suffix: str = "×") -> str:
        """mean, and ± the standard deviation over runs when there are several."""
        values = self.values(category, metric)
        if not values:
            return "–"
        text = f"{fmean(values):.2f}{suffix}"
        return text + (f"\u00a0±{stdev(values):.2f}" if len(values) > 1 else "")  # no break inside a value

    def speedup_and_accepted(self, category: str) -> list[str]:
        """The two cells quoted wherever a method's policies sit side by side."""
        if not self.ranked:
            return ["failed", "–"]
        return [self.cell(category, "speedup"), self.cell(category, "mean_accepted", "")]

    @property
    def drafters(self) -> str:
        return " / ".join(dict.fromkeys(e.drafter for e in self.ok or self.entries))

    @property
    def drafted_per_step(self) -> float | None:
        values = [d for d in (e.drafted_per_step for e in self.ok) if d is not None]
        return fmean(values) if values else None

    def per_step(self, part: str) -> float | None:
        """A `StepTime` property (seconds per step, or the overhead's share of a one-token forward),
        mean over the runs that timed their steps."""
        values = [getattr(t, part) for t in (e.step_time for e in self.ok) if t is not None]
        return fmean(values) if values else None


def top_level_parts(text: str) -> list[str]:
    """`text` split at '; ' outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == ";" and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [p for p in [*parts, current.strip()] if p]


def load_all(results_dir: Path) -> Loaded:
    """(run, file name) for the result files that may count, (file name, why not) for the others, as
    `specatlas results check` judges them (`validate_results.check_folder`). Methods that record no
    weights get those of the weights of earlier runs (`earlier_weights.fill`); that file listed as
    failed when malformed, its weights unknown."""
    runs, failed = [], []
    try:
        earlier = earlier_weights.read(results_dir / earlier_weights.PLACE)
    except ValueError as exc:
        earlier = {}
        failed.append((earlier_weights.PLACE.as_posix(), str(exc)))
    for path, verdict in check_folder(results_dir).verdicts.items():
        if verdict.run is None:
            more = len(verdict.problems) - 1
            failed.append((path.name.encode("unicode_escape").decode("ascii"),
                           verdict.problems[0] + (f" (and {more} more: `specatlas results check` lists them)" if more else "")))
        else:
            runs.append((earlier_weights.fill(verdict.run, earlier.get(path.name, {})), path.name))
    return runs, failed


@dataclass(frozen=True)
class Table:
    """What the runs of one table share: everything a speedup depends on besides the method."""

    hardware: str
    model: str
    model_digest: str
    dtype: str
    kernels: str
    prompt_set: str  # its name (Spec-Bench), else the file's
    prompt_id: str
    prompt_digest: str
    questions: tuple[str, ...]
    max_new_tokens: int
    repeats: int

    @classmethod
    def of(cls, run: Run) -> Table:
        c = run.config
        return cls(label(run.provenance["hardware"]), c["model"]["target"], (c["model"]["target_sha256"] or "unknown")[:12],
                   c["dtype"], kernels(c), prompt_set_name(c["prompt_set"]), c["prompt_set"]["id"],
                   c["prompt_set"]["sha256"][:12], tuple(sorted(c["question_ids"])), c["max_new_tokens"], c["repeats"])

    @property
    def size(self) -> int:
        """Questions × new tokens per turn × repeats: how much one run of the table measured."""
        return len(self.questions) * self.max_new_tokens * self.repeats

    @property
    def sample_size(self) -> str:
        def count(n: int, noun: str) -> str:
            return f"{n} {noun}{'s' if n != 1 else ''}"

        return f"{count(len(self.questions), 'question')} × {count(self.max_new_tokens, 'token')} × {count(self.repeats, 'repeat')}"

    @property
    def title(self) -> str:
        """Everything the table's numbers depend on, as plain text."""
        return f"{self.hardware} · {self.model} {self.dtype}, {self.kernels} · {self.prompt_set}, {self.sample_size}"


def kernels(config: dict) -> str:
    """The linear-layer kernels of a run (`specatlas bench` records how many it packed)."""
    if "packed_linears" not in config:
        return "kernels not recorded"
    packed = config["packed_linears"]
    if "kernel_choice" in config:  # chosen per shape and row count by timing them on the machine
        return f"kernels chosen by measurement ({packed} linears packed for oneDNN at some row counts)"
    return f"{packed} linears packed for oneDNN" if packed else "default kernels"


def tables(runs: list[tuple[Run, str]]) -> list[tuple[Table, list[tuple[Run, str]]]]:
    """The runs by table: by hardware, then the largest run first (the hardware's headline)."""
    groups: dict[Table, list[tuple[Run, str]]] = {}
    for run, name in runs:
        groups.setdefault(Table.of(run), []).append((run, name))
    return sorted(groups.items(), key=lambda item: (item[0].hardware, -item[0].size, -len(item[1]), repr(item[0])))


def table_lines(members: list[tuple[Run, str]]) -> list[Line]:
    lines: dict[tuple[str, str], Line] = {}
    for run, name in members:
        for method in run.methods:
            entry = Entry(run, name, method, run.summary.get(method.id))
            paper_id = method_paper_id(method.id)  # rows of one method under each policy share the paper's id
            lines.setdefault((paper_id, entry.policy), Line(paper_id, entry.policy, [])).entries.append(entry)
    for line in lines.values():
        line.keep_newest_weights()
    return list(lines.values())


def current_failures(line: Line) -> list[Entry]:
    """A row's failed runs that still stand: a run that could not run (a head not shipped yet) is
    superseded by a later run of the same method and policy that measured it; a failed lossless
    check never is."""
    latest = max((e.measured_at for e in line.ok), default=None)
    return [e for e in line.entries if e.failure is not None
            and (latest is None or e.failure.startswith("lossless") or e.measured_at > latest)]


def method_paper_id(row_id: str) -> str:
    """The paper id of a result row: `specatlas bench` suffixes rows run under a policy other than
    the paper's settings (`saxena2023prompt@cost-aware`, `...@fixed-4`)."""
    return row_id.partition("@")[0]


def fmt(value: float | None, suffix: str = "×") -> str:
    return "–" if value is None else f"{value:.2f}{suffix}"


def milliseconds(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.2f}"


def percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{fraction * 100:.0f}%"
