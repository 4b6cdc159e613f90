"""The leaderboard: measured result files, then what the papers and Spec-Bench report.

`render_markdown(results_dir)` is the site's leaderboard page body. Its first part,
`measured_markdown`, depends on the result files alone (and on which measured methods have a
record in papers/, to link them); `specatlas leaderboard` writes it to
results/LEADERBOARD.md (or checks that file), so the committed page is exactly what the committed
results say. The reported part reads the catalog beside results/ and Spec-Bench's published
leaderboard (results/published/, see `specatlas.bench.published`), which change independently of
the measured runs.

Tables are per hardware, model, dtype, kernels, prompt set and sample size (questions, new tokens
per turn, repeats): a speedup only means something on the machine and model it was measured on,
so nothing is ranked across them. Each heading states all of them; on each hardware the largest
run's table comes first, the headline for that hardware. Methods that could not run are listed as
failed, never ranked; files that `specatlas results check` refuses (`validate_results`: a failed
lossless claim among them) are listed as failed with their first problem, none of their rows used.

A row describes one set of trained weights: the shipped heads, adapters and distilled drafter are
retrained from time to time, so a row averages only the runs of the weights its newest run used
(`Line.keep_newest_weights`); the others are named under the table. A run's weights are what its
file records, else what results/provenance/weights-of-earlier-runs.json holds for it
(`specatlas.bench.earlier_weights`): the page never asks git, whose history a checkout may lack.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean, stdev
from urllib.parse import quote

from specatlas.bench import charts, earlier_weights
from specatlas.bench.provenance import label
from specatlas.bench.published import PublishedDataError, SpecBenchLeaderboard, load_spec_bench
from specatlas.bench.questions import SUBTASKS, prompt_set_name
from specatlas.bench.results import (BASELINE, LLAMACPP_GREEDY, LLAMACPP_LOOKUP, Run, StepTime, curve_warning,
                                     forward_cost, references, row_name, step_time, write_atomic)
from specatlas.bench.validate_results import History, check_files, check_folder
from specatlas.catalog.schema import Paper
from specatlas.catalog.validate import validate
from specatlas.fsutil import WriteError, output_file, output_place, starts_with
from specatlas.impls.engine.draft_length import COST_AWARE as DEFAULT_POLICY
from specatlas.impls.engine.draft_length import PAPER as PAPER_POLICY
from specatlas.impls.engine.head_folders import shipped_in
from specatlas.impls.registry import resolve
from specatlas.paths import repo_root
from specatlas.site.catalog import public_url
from specatlas.site.reported import source_text
from specatlas.site.text import md, md_code, md_link

PAGE_FILE = "LEADERBOARD.md"
PAGE_START = "Measured by `specatlas bench`"  # how every page this module writes begins
NO_POLICY = "–"
KINDS = {"specatlas": "SpecAtlas", "peer": "peer"}
IDLE_DRAFTING = 0.05  # drafted tokens per step below which a method effectively did not speculate
UNKNOWN_WEIGHTS = "unknown"  # the digest of weights neither the result file nor the weights of earlier runs tell
Linker = Callable[[str], "str | None"]
FileLinker = Callable[[str], str]  # a result file's name, URL-quoted -> the URL of the raw file
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
        parts = [p for p in _top_level_parts(self.method.setup) if "draft length" not in p]
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


def _top_level_parts(text: str) -> list[str]:
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


def render_markdown(results_dir: Path, link: Linker | None = None, papers: dict[str, Paper] | None = None,
                    loaded: Loaded | None = None, raw: FileLinker | None = None) -> str:
    """The site's leaderboard page body. `link(method id)` is the URL of the method's paper page,
    or None; by default, its record beside results/. `raw(file name)` is the URL of a result
    file; by default the file beside the page. `papers` (id -> record) and `loaded` (what
    `load_all` returned) save a caller that has them from reading them again."""
    runs, failed = loaded or load_all(Path(results_dir))
    link = link or _record_linker(Path(results_dir).parent)
    measured_ids = sorted({method_paper_id(m.id) for run, _ in runs for m in run.methods})
    return (_measured(runs, failed, link, raw or _beside) + "\n\n"
            + reported_markdown(measured_ids, Path(results_dir).parent, link, papers))


def _beside(name: str) -> str:
    """results/LEADERBOARD.md links to the result files in its own folder."""
    return name


def _record_linker(root: Path) -> Linker:
    """Links from results/LEADERBOARD.md to the records in papers/."""
    return lambda method_id: f"../papers/{method_id}.yaml" if (root / "papers" / f"{method_id}.yaml").is_file() else None


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


def measured_markdown(results_dir: Path, link: Linker | None = None, raw: FileLinker | None = None) -> str:
    return _measured(*load_all(Path(results_dir)), link or _record_linker(Path(results_dir).parent), raw or _beside)


def _measured(runs: list[tuple[Run, str]], failed: list[tuple[str, str]], link: Linker, raw: FileLinker) -> str:
    out = [
        PAGE_START + ", recomputed from the raw per-question samples in the result "
        "files under `results/`, which also record how to repeat each run. One table per hardware, "
        "model, dtype, kernels, prompt set and sample size, each stated in its heading: never compare "
        "rows across tables. On each hardware the largest run (questions × tokens × runs) comes first. "
        "What each column means is explained [under the tables](#reading-the-tables).",
    ]
    grouped = tables(runs)
    headlines = {}  # hardware -> its first table, the largest run
    for table, _ in grouped:
        headlines.setdefault(table.hardware, table)
    if grouped:
        members_of = {table: members for table, members in grouped}
        out += ["", "Hardware measured, with the fastest method of its headline table:", ""]
        out += [f"- {md(t.hardware)}: {_fastest(members_of[t])} ({md(t.prompt_set)}, {md(t.sample_size)}, "
                f"{md(t.model)} {md(t.dtype)})" for t in headlines.values()]
    for table, members in grouped:
        out += ["", _group_markdown(table, members, link, raw, headlines[table.hardware] is table)]
    if not grouped:
        out += ["", "No valid result files yet."]
    if failed:
        out += ["", "## Result files that failed checks", "", "| File | Problem |", "|---|---|"]
        out += [f"| {md(name)} | {md(why)} |" for name, why in failed]
    out += [
        "", "## Reading the tables", "",
        "- **Headings** state the hardware, the target model, its dtype and linear-layer kernels, the "
        "prompt set and the sample size: questions × new tokens per turn × runs of each question (the "
        "repeats of one result file). The raw result files are linked under each heading.",
        "- **One row per method and draft-length policy**, over every run in the table: the mean, "
        "± the standard deviation between runs when there are several; each run's own numbers are in "
        "the *Runs* block under the table. A method with trained weights (heads, adapter, the distilled "
        "drafter), which are retrained from time to time, counts only the runs of the weights its newest "
        "run used: the others are named under the table and marked *other weights* in the *Runs* block.",
        "- **Overall speedup** (×): Spec-Bench's definition, the mean per-question throughput divided "
        "by the autoregressive baseline's, measured in the same session and interleaved with the "
        "methods. **Tokens/s ratio** (×): total tokens over total time, divided likewise.",
        "- **Accepted** (tokens per target forward): mean tokens committed per verification step "
        "(1.00 for plain decoding).",
        "- **Predicted** (×): the speedup the accepted tokens would give if drafting were free, using "
        "the target's measured cost of a forward over *w* tokens relative to a one-token step. The "
        "gap to the measured speedup is drafting and overhead.",
        "- **Policy**: how the draft length was chosen. *paper*: the paper's own settings (draft "
        "length, tree, window). *cost-aware*: from the target's measured forward costs and the "
        "acceptance seen so far, drafting only as far as it is expected to pay on this hardware, "
        "down to none. Peers keep their library's schedule and the baseline drafts nothing: –. Methods "
        "measured under both are shown side by side under the ranking.",
        "- **Drafter**: what made the drafts in this run: a draft model (when none is given: the "
        "distilled drafter shipped for the embedded model, else a shallow slice of the target), "
        "heads, or a lookup in the prompt or a datastore.",
        "- **Kind**: *SpecAtlas* is this repository's reference implementation of the paper; *peer* "
        "is another library's implementation (transformers), run on the same machine, model and "
        "prompts, as a check on ours.",
        "- **Other engines** (llama.cpp through llama-cpp-python, on the GGUF file the embedded model "
        "ships in, with its own quantized kernels): each row's speedup is over that engine's own greedy "
        "decoding in the same run, with its absolute tokens per second; *Same tokens as* compares its "
        "greedy outputs with its own greedy's (its greedy row: with our baseline's, which decodes the "
        "dequantized float32 weights, so rounding may differ).",
        "- **Lossless** (identical outputs / compared): every greedy output compared token by "
        "token with the baseline's.",
        "- **Target forward** and **overhead** (ms per decoding step): a step drafts, then verifies in one "
        "target forward. *Target forward* is that forward as the engine timed it (result files before "
        "2026-12-05 price it at its width on the run's cost curve, timed after 64 cached tokens, so their "
        "overhead also holds attention over the rest of the context and the tree mask); *overhead* is the rest "
        "of the verification time (acceptance, KV rollback, commit; the tree mask and positions are built "
        "inside the timed forward call), also as a share of "
        "a one-token forward on the cost curve. Drafting is apart, in its own column. Blank (–) where a "
        "row's steps were not timed (peers) or, priced, its verifications ran outside the counted forward "
        "(resumed from an early exit).",
    ]
    return "\n".join(out)


def _fmt(value: float | None, suffix: str = "×") -> str:
    return "–" if value is None else f"{value:.2f}{suffix}"


def _milliseconds(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.2f}"


def _percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{fraction * 100:.0f}%"


def _lines(members: list[tuple[Run, str]]) -> list[Line]:
    lines: dict[tuple[str, str], Line] = {}
    for run, name in members:
        for method in run.methods:
            entry = Entry(run, name, method, run.summary.get(method.id))
            paper_id = method_paper_id(method.id)  # rows of one method under each policy share the paper's id
            lines.setdefault((paper_id, entry.policy), Line(paper_id, entry.policy, [])).entries.append(entry)
    for line in lines.values():
        line.keep_newest_weights()
    return list(lines.values())


def _breakable(cell: str) -> str:
    """A drafter may name a path or hub id with no space in it: let it wrap after each "/" so that the
    table fits the page instead of scrolling."""
    return cell.replace("/", "/<wbr>")


TOP_ROWS = 10  # rows shown above the fold of each table; the rest open on a click


def _group_markdown(table: Table, members: list[tuple[Run, str]], link: Linker, raw: FileLinker, headline: bool) -> str:
    """A table's section: a paragraph answering what is fastest here and why, a chart and the top rows,
    then everything else folded (every row, policies side by side, subtasks, time, engines, failures, runs)."""
    lines = _lines(members)
    ranked = sorted((line for line in lines if line.ranked and not line.own_engine), key=lambda line: -line.mean("overall", "speedup"))
    engines = [line for line in lines if line.ranked and line.own_engine]
    broken = [(line, e) for line in lines for e in current_failures(line)]
    categories = [c for c in SUBTASKS if any(c in e.summary for line in ranked + engines for e in line.ok)]
    categories += sorted({c for line in ranked + engines for e in line.ok for c in e.summary} - {*SUBTASKS, "overall", "lossless"})
    policies = len({line.policy for line in lines} - {NO_POLICY}) > 1
    names = _display_names(lines)

    def name(line: Line) -> str:
        return names[line.method_id] + (f" ({line.policy})" if policies and line.policy != NO_POLICY else "")

    files = ", ".join(f"[{md(name)}]({raw(quote(name))})" for _, name in members)
    out = [f"## {md(table.title)}", "", in_short(members, ranked, names), ""]
    if ranked:
        out += [_speedup_chart(ranked[:TOP_ROWS], name, table, f"the {min(TOP_ROWS, len(ranked))} fastest rows"), ""]
    out += [("The largest run on this hardware: its headline table. " if headline else
             "Another table on this hardware; its headline table, the largest run, is above. ")
            + f"{_count(len(members), 'run')} (result files: {files}), averaged per row; weights sha256 {md(table.model_digest)}…, "
            f"prompt set {md(table.prompt_id)} sha256 {md(table.prompt_digest)}…; {len(ranked)} ranked rows"
            + (f", and {len(engines)} of other engines against their own greedy decoding (below)." if engines else ".")]
    out += ["", _ranking(ranked[:TOP_ROWS], 1, link, names)]
    if ranked:
        chart = "\n\n" + _speedup_chart(ranked, name, table, "every ranked row") if len(ranked) > TOP_ROWS else ""
        out += ["", _folded(f"All {len(ranked)} ranked rows, with tokens/s, predicted speedup, drafter and kind",
                            _ranking(ranked, 1, link, names, wide=True) + chart)]
    more = _more(ranked, engines, broken, lines, categories, link, name, names)
    if more:
        out += ["", _folded("Policies side by side, speedup by subtask, where the time goes"
                            + (", other engines" if engines else "") + (", failed runs" if broken else ""), more)]
    out += ["", _runs_block(members, lines, names)]
    return "\n".join(out)


def _fastest(members: list[tuple[Run, str]]) -> str:
    lines = [line for line in _lines(members) if line.ranked and not line.own_engine]
    if not lines:
        return "no method measured"
    top = max(lines, key=lambda line: line.mean("overall", "speedup"))
    return f"**{md(_display_names(lines)[top.method_id])}**, {_fmt(top.mean('overall', 'speedup'))} ({md(top.policy)})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _folded(summary: str, body: str) -> str:
    return "\n".join(['<details markdown="1">', f"<summary>{md(summary)}</summary>", "", body, "", "</details>"])


def _display_names(lines: list[Line]) -> dict[str, str]:
    """method id -> the name rows and charts show: the method's own name (its head before a colon);
    the id added where two methods would read alike."""
    heads = {line.method_id: method_paper_id(line.method.name.partition(":")[0].strip()) or line.method_id for line in lines}
    repeated = {head for head in heads.values() if list(heads.values()).count(head) > 1}
    return {i: f"{head} ({i})" if head in repeated else head for i, head in heads.items()}


def _ranking(ranked: list[Line], first: int, link: Linker, names: dict[str, str], wide: bool = False) -> str:
    """The ranked rows: the few columns a reader needs, or (`wide`) every column."""
    head = "| # | Method | Policy | Overall speedup | Accepted (tokens/forward) | Lossless (identical/compared) | Runs |"
    rule = "|---:|---|---|---:|---:|---|---:|"
    if wide:
        head = ("| # | Method | Policy | Overall speedup | Tokens/s ratio | Accepted (tokens/forward) | Predicted speedup "
                "| Drafter | Kind | Lossless (identical/compared) | Runs |")
        rule = "|---:|---|---|---:|---:|---:|---:|---|---|---|---:|"
    out = [head, rule]
    for rank, line in enumerate(ranked, first):  # the policy beside the method: on a phone both show before scrolling
        cells = [str(rank), _method_cell(line.method, link, names), md(line.policy), f"**{line.cell('overall', 'speedup')}**"]
        if wide:
            cells += [line.cell("overall", "speedup_total"), line.cell("overall", "mean_accepted", ""),
                      line.cell("overall", "predicted"), _breakable(md(line.drafters)),
                      KINDS.get(line.method.kind, md(line.method.kind))]
        else:
            cells.append(line.cell("overall", "mean_accepted", ""))
        cells += [_lossless_cell(line), str(len(line.ok))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _speedup_chart(ranked: list[Line], name: Callable[[Line], str], table: Table, which: str) -> str:
    return charts.speedup_bars(
        [(name(line), line.mean("overall", "speedup"), min(line.values("overall", "speedup")),
          max(line.values("overall", "speedup"))) for line in ranked],
        f"Overall speedup over the baseline, {which} (mean over runs; whiskers: lowest to highest run): "
        f"{table.hardware}, {table.model}")


def _more(ranked: list[Line], engines: list[Line], broken: list[tuple[Line, Entry]], lines: list[Line],
          categories: list[str], link: Linker, name: Callable[[Line], str], names: dict[str, str]) -> str:
    """What the folded part of a table holds, below its ranking."""
    out = []
    side_by_side = _policies_side_by_side(lines, link, names)
    if side_by_side:
        out += ["", side_by_side]
    idle = [line for line in ranked if line.policy != NO_POLICY
            and line.drafted_per_step is not None and line.drafted_per_step < IDLE_DRAFTING]
    if idle:
        out += ["", "Rows near 1.00× that drafted (almost) nothing: "
                + ", ".join(f"{md(name(line))} ({line.drafted_per_step:.2f} drafted tokens per step)" for line in idle)
                + ". Under the cost-aware policy this means the drafter's tokens were predicted to cost more "
                "than they save on this hardware with this model, so the method fell back to plain decoding; "
                "its *paper* policy row, when measured, shows the method as published."]
    if ranked:
        out += ["", "**Speedup by subtask** (×, mean over runs):", "",
                "| Method | Policy | " + " | ".join(md(SUBTASKS.get(c, c)) for c in categories) + " | Overall |",
                "|---|---|" + "---:|" * (len(categories) + 1)]
        for line in ranked:
            out.append(f"| {_method_cell(line.method, link, names)} | {md(line.policy)} | "
                       + " | ".join(_fmt(line.mean(c, "speedup")) for c in categories)
                       + f" | {_fmt(line.mean('overall', 'speedup'))} |")
        out += ["", charts.accepted_vs_speedup(
                    [(name(line), line.mean("overall", "mean_accepted"), line.mean("overall", "speedup"))
                     for line in ranked if line.mean("overall", "mean_accepted")],
                    "Mean accepted tokens against measured speedup: a point far right but low "
                    "loses its accepted tokens to drafting and verification cost")]
        out += ["", _time_table(ranked, names)]
    if engines:
        out += ["", _engines_table(engines, categories, names)]
    if broken:
        out += ["", "**Failed (not ranked)**", "", "| Method | Policy | Why | Run |", "|---|---|---|---|"]
        out += [f"| {_method_cell(e.method, link, names)} | {md(line.policy)} | {md_code(e.failure)} | {md(e.file)} |"
                for line, e in broken]
    earlier = sorted((line for line in lines if line.left_out), key=lambda line: (line.method_id, line.policy))
    if earlier:
        out += ["", "**Runs left out for their weights**: a row averages only the runs of the trained weights (heads, "
                "adapter, distilled drafter) its newest run used; these rows' earlier runs used other weights:", ""]
        out += [f"- {md(name(line))}: {len(line.left_out)} earlier run{'s' if len(line.left_out) > 1 else ''} with "
                f"other weights left out ({', '.join(md(e.file) for e in line.left_out)})" for line in earlier]
    return "\n".join(out).strip()


def current_failures(line: Line) -> list[Entry]:
    """A row's failed runs that still stand: a run that could not run (a head not shipped yet) is
    superseded by a later run of the same method and policy that measured it; a failed lossless
    check never is."""
    latest = max((e.measured_at for e in line.ok), default=None)
    return [e for e in line.entries if e.failure is not None
            and (latest is None or e.failure.startswith("lossless") or e.measured_at > latest)]


def in_short(members: list[tuple[Run, str]], ranked: list[Line], names: dict[str, str]) -> str:
    """The table's answer in one paragraph, from its numbers: the fastest row, then why, from what
    verifying and drafting cost on this machine (the cost curve, the rows' drafting time)."""
    if not ranked:
        return "**In short:** no method measured a speedup in this table."
    top = ranked[0]
    out = (f"**In short:** the fastest here is **{md(names[top.method_id])}** ({md(top.policy)} policy) at "
           f"{_fmt(top.mean('overall', 'speedup'))} plain decoding, "
           f"{_fmt(top.mean('overall', 'mean_accepted'), '')} tokens accepted per target forward.")
    curves = [run.cost_curve for run, _ in members if run.cost_curve]
    wide = fmean(forward_cost(c, WIDE_ROWS) / forward_cost(c, 1) for c in curves) if curves else None
    if wide is not None:
        out += (f" Verifying is {'nearly free' if wide <= WIDE_RATIO else 'not free'} on this hardware: a forward over "
                f"{WIDE_ROWS} tokens costs {wide:.2f}× a one-token forward.")
    shares = {True: [], False: []}  # drafts with a model or head -> each row's share of its time spent drafting
    for line in ranked:
        seconds, drafting = line.mean("overall", "seconds"), line.mean("overall", "draft_seconds")
        if seconds and drafting is not None and line.policy != NO_POLICY:
            shares[_drafts_with_a_model(line.method_id)].append(drafting / seconds)
    if shares[True] and shares[False] and max(map(fmean, shares.values())) > 0.005:  # older files timed no drafting
        costly, cheap = fmean(shares[True]), fmean(shares[False])
        out += (f" Drafting {'is not' if costly > 2 * cheap else 'is cheap for every drafter'}: methods that draft with a "
                f"trained head or a draft model spend {costly:.0%} of their time drafting, those that copy from the prompt "
                f"or a datastore {cheap:.0%}")
        if costly > 2 * cheap and not _drafts_with_a_model(top.method_id):
            out += ", so drafters that copy from the context win"
        elif _drafts_with_a_model(top.method_id):
            out += ", and a trained drafter's longer accepted drafts pay for its drafting"
    rival = next((line for line in ranked if _drafts_with_a_model(line.method_id) != _drafts_with_a_model(top.method_id)), None)
    if rival:
        kind = "drafter that is a model or head" if _drafts_with_a_model(rival.method_id) else "method that needs no drafter"
        out += (f"{' The' if out.endswith('.') else '; the'} fastest {kind}, {md(names[rival.method_id])}, "
                f"reaches {_fmt(rival.mean('overall', 'speedup'))}.")
    elif not out.endswith("."):
        out += "."
    return out


def _drafts_with_a_model(method_id: str) -> bool:
    spec = resolve(method_id)
    return bool(spec and (spec.trained_head or spec.uses_draft_model))


def _runs_block(members: list[tuple[Run, str]], lines: list[Line], labels: dict[str, str]) -> str:
    """Each run's settings and its own overall speedups, folded away under the table."""
    out = ['<details markdown="1">', f"<summary>Runs ({len(members)}): settings and each run's overall speedup</summary>", ""]
    for run, name in members:
        c, p = run.config, run.provenance
        commits = dict.fromkeys(f"{(s.git_commit or 'unknown')[:10]}{' (dirty)' if s.git_dirty else ''}" for s in run.sessions)
        out.append(f"- {md(name)}: {md(p['started'])}, commit {md(', '.join(commits))}, torch {md(c['torch'])}, "
                   f"transformers {md(c['transformers'])}, device {md(c['device'])}, {len(c['question_ids'])} questions × "
                   f"{c['repeats']} repeat(s), max {c['max_new_tokens']} new tokens per turn, temperature "
                   f"{c['temperature']:g}, seed {c['seed']}, {len(run.sessions)} session(s)"
                   + (f". **Warning**: {md(curve_warning(run))}" if curve_warning(run) else ""))
    names = [name for _, name in members]
    out += ["", "| Method | Policy | " + " | ".join(md(n) for n in names) + " |", "|---|---|" + "---:|" * len(names)]
    for line in sorted(lines, key=lambda line: (line.method_id, line.policy)):
        by_file = {e.file: e for e in (*line.entries, *line.left_out)}
        left_out = {e.file for e in line.left_out}
        cells = []
        for n in names:
            entry = by_file.get(n)
            if entry is None:
                cells.append("–")
            elif entry.failure is not None:
                cells.append("failed")
            else:
                cells.append(_fmt(entry.summary["overall"]["speedup"]) + (" (other weights)" if n in left_out else ""))
        shown = labels[line.method_id] + (f" (over {references(line.method)[0]})" if line.own_engine else "")
        out.append(f"| {md(shown)} | {md(line.policy)} | " + " | ".join(cells) + " |")
    out += ["", "</details>"]
    return "\n".join(out)


def method_paper_id(row_id: str) -> str:
    """The paper id of a result row: `specatlas bench` suffixes rows run under a policy other than
    the paper's settings (`saxena2023prompt@cost-aware`, `...@fixed-4`)."""
    return row_id.partition("@")[0]


def _method_cell(method, link: Linker, names: dict[str, str]) -> str:
    """The method's name, linked to its paper, its id in the link's title."""
    paper_id = method_paper_id(method.id)
    url = link(paper_id)
    label = md(names.get(paper_id, method.name))
    return f'[{label}]({url} "{paper_id}")' if url else label


def _policies_side_by_side(lines: list[Line], link: Linker, names: dict[str, str]) -> str | None:
    """Each method measured under both its paper's settings and the cost-aware (tuned) policy, the
    two rows side by side: what the method gives as published, and tuned to this hardware."""
    by_method: dict[str, dict[str, Line]] = {}
    for line in lines:
        by_method.setdefault(line.method_id, {})[line.policy] = line
    pairs = [(ps[PAPER_POLICY], ps[DEFAULT_POLICY]) for ps in by_method.values() if PAPER_POLICY in ps and DEFAULT_POLICY in ps]
    if not pairs:
        return None

    def best(pair: tuple[Line, Line]) -> float:
        return max((line.mean("overall", "speedup") or 0) if line.ranked else 0 for line in pair)

    out = ["**Paper settings beside cost-aware (tuned)**: each method as its paper sets it up, and with the draft "
           "length tuned to this hardware's measured costs.", "",
           "| Method | Paper: speedup | Paper: accepted | Cost-aware: speedup | Cost-aware: accepted |",
           "|---|---:|---:|---:|---:|"]
    for paper, tuned in sorted(pairs, key=lambda pair: (-best(pair), pair[0].method_id)):
        cells = [_method_cell(paper.method, link, names), *paper.speedup_and_accepted("overall"), *tuned.speedup_and_accepted("overall")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _lossless_cell(line: Line) -> str:
    checks = [e.summary["lossless"] for e in line.ok]
    statuses = {c["status"] for c in checks}
    identical, compared = sum(c.get("identical", 0) for c in checks), sum(c.get("compared", 0) for c in checks)
    if statuses == {"pass"}:
        return f"✓ {identical}/{compared}"
    if "fail" in statuses:  # only lossy-by-design methods get here: failures are not ranked
        return f"lossy by design: {identical}/{compared} identical"
    return md("n/a (" + "; ".join(dict.fromkeys(c["reason"] for c in checks if "reason" in c)) + ")")


def _engines_table(lines: list[Line], categories: list[str], names: dict[str, str]) -> str:
    """Another engine's rows, each against that engine's own greedy decoding in the same run: its
    kernels and weights file are not ours, so only its own plain decoding is a fair yardstick."""
    out = ["**Other engines, each against its own greedy decoding** (same machine, model, prompts and threads; "
           "not ranked with the rows above, whose speedups are over our baseline):", "",
           "| Method | Speedup over its own greedy | Tokens/s | "
           + " | ".join(md(SUBTASKS.get(c, c)) for c in categories) + " | Accepted (tokens/forward) | Same tokens as | Runs |",
           "|---|---:|---:|" + "---:|" * len(categories) + "---:|---|---:|"]
    for line in sorted(lines, key=lambda line: (references(line.method)[0] != line.method_id, line.method_id)):
        faster_than, same_as = references(line.method)
        checks = [e.summary["lossless"] for e in line.ok]
        identical, compared = sum(c.get("identical", 0) for c in checks), sum(c.get("compared", 0) for c in checks)
        same = f"{md(row_name(same_as))}: {identical}/{compared}" if compared else "n/a (sampled)"
        cells = [md(names[line.method_id]), f"**{line.cell('overall', 'speedup')}** over {md(faster_than)}",
                 _fmt(line.tokens_per_second, ""), *(_fmt(line.mean(c, "speedup")) for c in categories),
                 line.cell("overall", "mean_accepted", ""), same, str(len(line.ok))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _time_table(lines: list[Line], names: dict[str, str]) -> str:
    out = ["Where the time goes (all questions, mean over runs) and how often each draft position was accepted:", "",
           "| Method | Policy | Drafted (tokens/step) | Drafting (s) | Verification (s) | Wall (s) | Target forward (ms/step) "
           "| Overhead (ms/step) | Overhead (% of a one-token forward) | Acceptance by draft position |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for line in lines:
        runs = [r for r in (e.summary["overall"]["acceptance_by_position"] for e in line.ok) if r]
        # per position, the mean over the runs that drafted there (None: a position none drafted at)
        by_position = [[r[k] for r in runs if len(r) > k and r[k] is not None] for k in range(max(map(len, runs), default=0))]
        positions = " · ".join(_fmt(fmean(values) if values else None, "") for values in by_position) or "–"
        out.append(f"| {md(names[line.method_id])} | {md(line.policy)} | {_fmt(line.drafted_per_step, '')} | "
                   f"{_fmt(line.mean('overall', 'draft_seconds'), '')} | {_fmt(line.mean('overall', 'verify_seconds'), '')} | "
                   f"{line.mean('overall', 'seconds'):.1f} | {_milliseconds(line.per_step('forward'))} | "
                   f"{_milliseconds(line.per_step('overhead'))} | {_percent(line.per_step('overhead_share'))} | {positions} |")
    return "\n".join(out)


# Reported numbers ------------------------------------------------------------------------------

def reported_markdown(method_ids: list[str], root: Path, link: Linker | None = None,
                      papers: dict[str, Paper] | None = None) -> str:
    """Paper-reported results of the measured methods, and Spec-Bench's published leaderboard."""
    out = ["## Reported, not measured", "",
           "Numbers below are copied from the papers (their records' `reported_results`) and from "
           "Spec-Bench's published leaderboard. Hardware, models, prompts and settings differ from "
           "the measured tables above and between sources: they are context, not a ranking."]
    out += ["", _papers_table(method_ids, root, link or _record_linker(root), papers)]
    out += ["", _spec_bench_tables(load_spec_bench(root))]
    return "\n".join(out)


def _papers_table(method_ids: list[str], root: Path, link: Linker, papers: dict[str, Paper] | None) -> str:
    if papers is None:
        if not (root / "papers").is_dir():
            return "No catalog beside the results: paper-reported numbers are not shown."
        _, records, _ = validate(root=root)
        papers = {r.paper.id: r.paper for r in records if r.paper}
    out = ["| Method | Metric | Value | Target | Drafter | Hardware | Benchmark | Temp. | Source |",
           "|---|---|---|---|---|---|---|---|---|"]
    for paper_id in method_ids:
        paper = papers.get(paper_id)
        for r in paper.reported_results if paper else []:
            url = link(paper.id)
            cells = [r.metric, f"{r.value:g}", r.target_model, r.drafter or "–", r.hardware or "–", r.benchmark,
                     "–" if r.temperature is None else f"{r.temperature:g}"]
            method = f"[{md(paper.id)}]({url})" if url else md(paper.id)
            out.append(f"| {method} | " + " | ".join(map(md, cells)) + f" | {md_link(source_text(r), public_url(paper))} |")
    if len(out) == 2:
        return "The measured methods' records report no numbers."
    return "### Reported by the papers of the measured methods\n\n" + _folded(f"{len(out) - 2} numbers the papers report", "\n".join(out))


def _spec_bench_tables(data: SpecBenchLeaderboard) -> str:
    columns = [*SUBTASKS.values(), "#Mean Accepted Tokens", "Overall"]
    out = ["### Spec-Bench's published leaderboard", "",
           f"Source: {md_link(data.source, data.url)} ({md(data.licence)}). Settings: {md(data.settings)}."]
    for device in dict.fromkeys(row["device"] for row in data.rows):
        out += ["", f"**{md(device)}**: {md(data.hardware.get(device, device))}", "",
                "| Method | Target | " + " | ".join(md(c) for c in columns) + " |", "|---" * (2 + len(columns)) + "|"]
        for row in (r for r in data.rows if r["device"] == device):
            values = ["–" if row.get(c) is None else md(f"{row[c]:g}") for c in columns]
            out.append(f"| {md(row['method'])} | {md(row['target_model'])} | " + " | ".join(values) + " |")
    return "\n".join(out)


# Targets ---------------------------------------------------------------------------------------

# The project's speed targets on a CPU, for one run of `specatlas bench` on Spec-Bench questions.
BEST_LOSSLESS = 2.0  # × our baseline overall, the best lossless method
TUNED_FLOOR = 1.0  # × our baseline, every cost-aware row in every category
WIDE_ROWS, WIDE_RATIO = 8, 1.3  # a forward over 8 new tokens at most 1.3× a one-token forward
OVERHEAD_SHARE = 0.10  # per-step overhead, as a share of a one-token forward
PLD, HF_GENERATE = "saxena2023prompt", "hf-generate"
Target = tuple[str, str, bool | None]  # what is asked, what the run measured, met (None: not measured)


def targets_markdown(run: Run, name: str) -> str:
    """The speed targets measured on one run, each with what the run measured and whether it is met;
    then the cost-aware rows below 1.00× in a category and every timed row's per-step time."""
    entries = {method.id: Entry(run, name, method, run.summary.get(method.id)) for method in run.methods}
    ok = {row: e for row, e in entries.items() if e.failure is None}
    tuned = [e for e in entries.values() if e.method.kind == "specatlas" and e.policy == DEFAULT_POLICY]
    below = [(e.method.id, category, metrics["speedup"]) for e in tuned if e.failure is None
             for category, metrics in e.summary.items() if category not in ("overall", "lossless")
             and metrics["speedup"] is not None and metrics["speedup"] < TUNED_FLOOR]
    timed = [(row, t) for row, e in ok.items() if (t := e.step_time) is not None]
    untimed = [row for row, e in ok.items() if e.method.kind == "specatlas" and e.step_time is None]
    targets = [*_best_lossless(ok), _tuned(tuned, below), _wide_forward(run.cost_curve), _overhead(timed, untimed),
               _baseline_vs_generate(run, entries), _pld_vs_llamacpp(run, entries, ok)]
    out = [f"## Speed targets: {md(name)}", "", f"{md(Table.of(run).title)}. Speedups are Spec-Bench's (mean "
           "per-question throughput over our baseline's in the same run) unless said otherwise.", "",
           "| Target | Measured | Met |", "|---|---|---|"]
    out += [f"| {asked} | {measured} | {'–' if met is None else 'yes' if met else '**no**'} |"
            for asked, measured, met in targets]
    if curve_warning(run):
        out += ["", f"**Warning**: {md(curve_warning(run))}. The cost-curve target and the per-step split use that curve."]
    if below:
        out += ["", f"**Cost-aware rows below {TUNED_FLOOR:.2f}× in a category**", "",
                "| Row | Category | Speedup |", "|---|---|---:|"]
        out += [f"| {md(row)} | {md(SUBTASKS.get(category, category))} | {value:.3f}× |" for row, category, value in below]
    if timed:
        how = ("target forwards as the engine timed them" if all(t.measured for _, t in timed) else
               "target forwards priced on the cost curve, timed after 64 cached tokens: the overhead also holds "
               "attention over the rest of the context")
        out += ["", f"**Per-step time** (ms per decoding step; {how}; a one-token forward costs "
                f"{_milliseconds(forward_cost(run.cost_curve, 1))} ms on the cost curve)", "",
                "| Row | Steps | Step | Drafting | Target forward | Overhead | Overhead (% of a one-token forward) |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        out += [f"| {md(row)} | {t.steps} | {_milliseconds(t.total)} | {_milliseconds(t.drafting)} | "
                f"{_milliseconds(t.forward)} | {_milliseconds(t.overhead)} | {_percent(t.overhead_share)} |" for row, t in timed]
    return "\n".join(out)


def _uses_trained_head(row_id: str) -> bool:
    spec = resolve(method_paper_id(row_id))
    return bool(spec and spec.trained_head)


def _best_lossless(ok: dict[str, Entry]) -> list[Target]:
    lossless = [e for e in ok.values() if e.method.kind == "specatlas" and e.method.id != BASELINE and e.method.lossless]
    without = [e for e in lossless if not _uses_trained_head(e.method.id)]
    out = []
    for asked, rows, goal in ((f"Best lossless method ≥ {BEST_LOSSLESS:.1f}× our baseline overall (trained heads allowed)",
                               lossless, BEST_LOSSLESS),
                              ("Best lossless method without trained heads (reported)", without, None)):
        best = max(rows, key=lambda e: e.summary["overall"]["speedup"], default=None)
        if best is None:
            out.append((asked, "no lossless method measured", None))
            continue
        speedup = best.summary["overall"]["speedup"]
        heads = " (trained heads)" if _uses_trained_head(best.method.id) else ""
        out.append((asked, f"{md(best.method.id)}{heads}: {speedup:.2f}×", None if goal is None else speedup >= goal))
    return out


def _tuned(tuned: list[Entry], below: list[tuple[str, str, float]]) -> Target:
    asked = f"Every method's tuned (cost-aware) row ≥ {TUNED_FLOOR:.1f}× in every category"
    if not tuned:
        return asked, "no cost-aware rows in this run", None
    failed = [e for e in tuned if e.failure is not None]
    rows = {row for row, _, _ in below}
    measured = (f"{len(rows)} of {len(tuned)} rows below in some category (listed below)" if rows
                else f"all {len(tuned) - len(failed)} measured rows at or above")
    if failed:
        measured += "; failed: " + ", ".join(md(e.method.id) for e in failed)
    return asked, measured, not rows and not failed


def _wide_forward(curve: dict[int, float]) -> Target:
    wide, one = forward_cost(curve, WIDE_ROWS), forward_cost(curve, 1)
    how = "" if WIDE_ROWS in curve else f"; {WIDE_ROWS} interpolated"
    return (f"A forward over {WIDE_ROWS} new tokens ≤ {WIDE_RATIO}× a one-token forward (cost curve)",
            f"{wide / one:.2f}× ({_milliseconds(wide)} ms / {_milliseconds(one)} ms{how})", wide / one <= WIDE_RATIO)


def _overhead(timed: list[tuple[str, StepTime]], untimed: list[str]) -> Target:
    """`untimed`: SpecAtlas rows whose verifications ran outside the counted forward (`step_time`)."""
    asked = f"Per-step overhead ≤ {OVERHEAD_SHARE:.0%} of a one-token forward"
    if not timed:
        return asked, "no row timed its steps", None
    within = [row for row, t in timed if t.overhead_share <= OVERHEAD_SHARE]
    worst_row, worst = max(timed, key=lambda item: item[1].overhead_share)
    base = dict(timed).get(BASELINE)
    measured = (f"{len(within)} of {len(timed)} rows within" + (f"; baseline {_percent(base.overhead_share)}" if base else "")
                + f"; most: {md(worst_row)} {_milliseconds(worst.overhead)} ms ({_percent(worst.overhead_share)}) (table below)")
    if untimed:
        measured += "; not split (verified outside the counted forward): " + ", ".join(md(row) for row in untimed)
    return asked, measured, len(within) == len(timed) and not untimed


def _not_run(entries: dict[str, Entry], *rows: str) -> str | None:
    """Why a comparison of `rows` is not measured; None when each has samples. A failed lossless
    check does not stop a speed comparison: the speeds were measured."""
    why = []
    for row in rows:
        entry = entries.get(row)
        if entry is None:
            why.append(f"this run has no {md(row)} row")
        elif entry.method.error:
            why.append(f"{md(row)} could not run: {md(entry.method.error)}")
        elif entry.summary is None:
            why.append(f"{md(row)} has no samples")
    return "not measured: " + "; ".join(why) if why else None


def _baseline_vs_generate(run: Run, entries: dict[str, Entry]) -> Target:
    asked = "Our baseline ≥ transformers `generate` (same kernels)"
    missing = _not_run(entries, BASELINE, HF_GENERATE)
    if missing:
        return asked, missing, None
    ratio = 1 / entries[HF_GENERATE].summary["overall"]["speedup"]  # `generate`'s is over our baseline
    return (asked, f"our baseline {ratio:.2f}× `generate`'s throughput; kernels: ours {md(kernels(run.config))}, "
            f"`generate` {md(entries[HF_GENERATE].method.setup)}", ratio >= 1.0)


def _pld_vs_llamacpp(run: Run, entries: dict[str, Entry], ok: dict[str, Entry]) -> Target:
    asked = "Our PLD's speedup ≥ llama.cpp prompt lookup's over its own greedy"
    ours = max((e for e in ok.values() if method_paper_id(e.method.id) == PLD),
               key=lambda e: e.summary["overall"]["speedup"], default=None)
    missing = _not_run(entries, LLAMACPP_GREEDY, LLAMACPP_LOOKUP) or (None if ours else f"not measured: no {PLD} row")
    if missing:
        return asked, missing, None
    lookup = entries[LLAMACPP_LOOKUP]
    theirs, mine = lookup.summary["overall"]["speedup"], ours.summary["overall"]["speedup"]
    return (asked, f"{md(ours.method.id)} {mine:.2f}× over our baseline; {LLAMACPP_LOOKUP} {theirs:.2f}× over "
            f"{row_name(references(lookup.method)[0])}", mine >= theirs)


# Command ---------------------------------------------------------------------------------------

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=None, help="results folder (default: results/ in the repository)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true",
                        help=f"exit 1 if results/{PAGE_FILE} differs from what the result files say")
    action.add_argument("--print", action="store_true", help="print the full page (with reported numbers) instead")
    action.add_argument("--targets", type=Path, metavar="RESULT",
                        help="print, as Markdown, the speed targets (best lossless speedup, tuned rows per category, "
                             "8-token forward cost, per-step overhead, peers) measured on one result file")
    action.add_argument("--fastest", action="store_true",
                        help="print, as `specatlas run` arguments, the lossless method measured fastest on the embedded "
                             "model on this hardware (else on any, said so on stderr); exit 1 when none is (make demo)")


def execute(args: argparse.Namespace) -> int:
    if args.targets:
        verdict, _ = check_files([args.targets])[args.targets]
        if verdict.run is None:  # the file the leaderboard would refuse: what `results check` says first
            print(f"specatlas leaderboard: {args.targets}: {verdict.problems[0]}", file=sys.stderr)
            return 1
        run = verdict.run
        sys.stdout.write(targets_markdown(run, args.targets.name) + "\n")
        return 0
    results_dir = args.results or repo_root() / "results"
    if not results_dir.is_dir():
        print(f"specatlas leaderboard: no results folder at {results_dir}", file=sys.stderr)
        return 2
    if args.fastest:
        return _print_fastest(results_dir)
    if args.print:
        try:
            page = render_markdown(results_dir)
        except PublishedDataError as exc:
            print(f"specatlas leaderboard: {exc}", file=sys.stderr)
            return 1
        sys.stdout.write(page + "\n")
        return 0
    page, expected = results_dir / PAGE_FILE, measured_markdown(results_dir) + "\n"
    if args.check:
        if page.is_file() and page.read_text(encoding="utf-8") == expected:
            return 0
        print(f"specatlas leaderboard: {page} is out of date; run `specatlas leaderboard`", file=sys.stderr)
        return 1
    default = repo_root() / "results"
    try:  # the page goes into a results folder, never the checkout or a record folder, over its own only
        output_place(results_dir, "the leaderboard", allowed=default)
        write_atomic(output_file(page, "the leaderboard", starts_with(PAGE_START), allowed=default), expected)
    except WriteError as exc:
        print(f"specatlas leaderboard: {exc}", file=sys.stderr)
        return 1
    _, failed = load_all(results_dir)
    for name, why in failed:
        print(f"{results_dir / name}: {why}", file=sys.stderr)
    for note in History.of(results_dir).notes:  # what the validator could not check there
        print(f"{results_dir}: {note}", file=sys.stderr)
    print(f"leaderboard written to {page}")
    return 0


def _print_fastest(results_dir: Path) -> int:
    from specatlas.bench.provenance import hardware
    from specatlas.impls.engine.models import EMBEDDED, pick_device

    device = pick_device()
    found = fastest_here(results_dir, label(hardware(device)), device.type, EMBEDDED)
    if found is None:
        print(f"specatlas leaderboard: no result in {results_dir} ranks a lossless method on {EMBEDDED} on {device.type}",
              file=sys.stderr)
        return 1
    row, here = found
    where = "this hardware" if here else f"{row.hardware}, not this machine (no result was measured here)"
    print(f"specatlas leaderboard: the fastest lossless method measured on {where}: {row.method_id} ({row.policy}), "
          f"{row.speedup:.2f}× on {row.table.prompt_set}, {row.table.sample_size}", file=sys.stderr)
    print(row.method_id + (f" --draft-length {row.policy}" if row.policy != PAPER_POLICY else ""))
    return 0


# For other pages -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Measured:
    """A ranked leaderboard row, as other pages quote it."""

    method_id: str
    policy: str
    speedup: float
    runs: int
    hardware: str
    model: str
    accepted: float | None = None
    table: Table | None = None  # the leaderboard table it is ranked in
    device: str = ""  # the runs' torch device: cpu, cuda, mps (one per table in practice; joined if not)
    kind: str = "specatlas"  # results.Method.kind: "specatlas" or "peer"


def measured_rows(results_dir: Path, loaded: Loaded | None = None) -> list[Measured]:
    """Every ranked row of every table, fastest first."""
    runs, _ = loaded or load_all(Path(results_dir))
    out = []
    for table, members in tables(runs):
        device = ", ".join(sorted({str(run.config.get("device", "")) for run, _ in members}))
        out += [Measured(line.method_id, line.policy, line.mean("overall", "speedup"), len(line.ok), table.hardware,
                         table.model, line.mean("overall", "mean_accepted"), table, device, line.method.kind)
                for line in _lines(members) if line.ranked and not line.own_engine]
    return sorted(out, key=lambda m: -m.speedup)


def measured_here(results_dir: Path, hardware_label: str, device: str, model: str,
                  keep: Callable[[Measured], bool] = lambda m: True) -> tuple[list[Measured], bool]:
    """The ranked rows of SpecAtlas methods (the baseline aside) on `model` and `device` (cpu, cuda,
    mps) that `keep` keeps, fastest first: from the tables of this hardware (`hardware_label`) when
    any ranks one, else from every table; the flag says which."""
    rows = [m for m in measured_rows(results_dir) if m.kind == "specatlas" and m.method_id != BASELINE
            and m.model == model and m.device == device and keep(m)]
    here = [m for m in rows if m.hardware == hardware_label]
    return (here, True) if here else (rows, False)


def fastest_here(results_dir: Path, hardware_label: str, device: str, model: str) -> tuple[Measured, bool] | None:
    """The fastest ranked row of a lossless SpecAtlas method (paper settings or cost-aware) on
    `model` and `device`, from this hardware's tables when any ranks one (see `measured_here`);
    None when no table ranks one."""
    rows, here = measured_here(results_dir, hardware_label, device, model, lambda m: m.policy in (
        PAPER_POLICY, DEFAULT_POLICY) and (spec := resolve(m.method_id)) is not None and spec.lossless)
    return (rows[0], here) if rows else None


@dataclass(frozen=True)
class MethodMeasurement:
    """One method's rows in one leaderboard table, as its paper page shows them: per policy
    (paper settings first), per category, the speedup and the mean accepted tokens."""

    table: Table
    files: list[str]  # the result files the rows come from
    lines: list[Line]
    categories: list[str]  # "overall", then the subtasks measured

    @property
    def rows(self) -> list[tuple[str, list[str]]]:
        """(category name, speedup and mean accepted tokens under each policy in the order of `lines`)."""
        return [("Overall" if category == "overall" else SUBTASKS.get(category, category),
                 [cell for line in self.lines for cell in line.speedup_and_accepted(category)]) for category in self.categories]

    @property
    def failures(self) -> list[str]:
        return [f"{line.policy}: {e.failure} ({e.file})" for line in self.lines for e in current_failures(line)]


def measured_by_method(loaded: Loaded) -> dict[str, list[MethodMeasurement]]:
    """paper id -> its rows in every table, the tables in leaderboard order."""
    order = {PAPER_POLICY: 0, DEFAULT_POLICY: 1}
    out: dict[str, list[MethodMeasurement]] = {}
    for table, members in tables(loaded[0]):
        by_method: dict[str, list[Line]] = {}
        for line in _lines(members):
            by_method.setdefault(line.method_id, []).append(line)
        for method_id, lines in by_method.items():
            lines.sort(key=lambda line: (order.get(line.policy, 2), line.policy))
            measured = {c for line in lines for e in line.ok for c in e.summary} - {"overall", "lossless"}
            categories = ["overall", *(c for c in SUBTASKS if c in measured), *sorted(measured - set(SUBTASKS))]
            files = sorted({e.file for line in lines for e in line.entries})
            out.setdefault(method_id, []).append(MethodMeasurement(table, files, lines, categories))
    return out
