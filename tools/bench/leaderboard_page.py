"""The leaderboard page: measured result files, then what the papers and Spec-Bench report.

`render_markdown(results_dir)` is the site's leaderboard page body. Its first part,
`measured_markdown`, depends on the result files alone (and on which measured methods have a
record in papers/, to link them); `specatlas leaderboard` writes it to
results/LEADERBOARD.md (or checks that file), so the committed page is exactly what the committed
results say. The reported part reads the catalog beside results/ and Spec-Bench's published
leaderboard (results/published/, see `specatlas.bench.published`), which change independently of
the measured runs.

The markup is in templates/ beside this module, rendered in `specatlas.templating`'s environment; the
site (which imports the bench, never the other way) includes the same templates in its page.

Each table's heading states what its numbers depend on (`aggregate.Table`). Methods that could not
run are listed as failed, never ranked; refused result files are listed with their first problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from statistics import fmean
from urllib.parse import quote

from markupsafe import Markup

from specatlas.bench import charts
from specatlas.bench.aggregate import (NO_POLICY, Entry, Line, Loaded, Table, current_failures, fmt, load_all,
                                       method_paper_id, milliseconds, percent, table_lines, tables)
from specatlas.bench.published import SpecBenchLeaderboard, load_spec_bench
from specatlas.bench.questions import SUBTASKS
from specatlas.bench.results import Run, curve_warning, forward_cost, references, row_name
from specatlas.bench.targets import WIDE_RATIO, WIDE_ROWS
from specatlas.catalog.citations import public_url, source_text
from specatlas.catalog.schema import Paper
from specatlas.catalog.validate import validate
from specatlas.escaping import md
from specatlas.impls.engine.draft_length import COST_AWARE as DEFAULT_POLICY
from specatlas.impls.engine.draft_length import PAPER as PAPER_POLICY
from specatlas.impls.registry import resolve
from specatlas.templating import environment

TEMPLATES = Path(__file__).resolve().parent / "templates"  # the site's leaderboard page includes them too
PAGE_FILE = "LEADERBOARD.md"
PAGE_START = "Measured by `specatlas bench`"  # how every page this module writes begins (its template's first words)
KINDS = {"specatlas": "SpecAtlas", "peer": "peer"}
IDLE_DRAFTING = 0.05  # drafted tokens per step below which a method effectively did not speculate
TOP_ROWS = 10  # rows shown above the fold of each table; the rest open on a click
Linker = Callable[[str], "str | None"]
FileLinker = Callable[[str], str]  # a result file's name, URL-quoted -> the URL of the raw file


def render_markdown(results_dir: Path, link: Linker | None = None, papers: dict[str, Paper] | None = None,
                    loaded: Loaded | None = None, raw: FileLinker | None = None) -> str:
    """The site's leaderboard page body (leaderboard_tables.md.j2). `link(method id)` is the URL of
    the method's paper page, or None; by default, its record beside results/. `raw(file name)` is
    the URL of a result file; by default the file beside the page. `papers` (id -> record) and
    `loaded` (what `load_all` returned) save a caller that has them from reading them again."""
    return _render("leaderboard_tables.md.j2", **page_context(results_dir, link, papers, loaded, raw))


def page_context(results_dir: Path, link: Linker | None = None, papers: dict[str, Paper] | None = None,
                 loaded: Loaded | None = None, raw: FileLinker | None = None) -> dict:
    """What leaderboard_tables.md.j2 (the site's page, through leaderboard.md.j2) renders."""
    runs, failed = loaded or load_all(Path(results_dir))
    root = Path(results_dir).parent
    link = link or record_linker(root)
    measured_ids = sorted({method_paper_id(m.id) for run, _ in runs for m in run.methods})
    return {"measured": MeasuredPage(runs, failed, link, raw or _beside),
            "reported": reported(measured_ids, root, link, papers), **FILTERS}


def measured_markdown(results_dir: Path, link: Linker | None = None, raw: FileLinker | None = None) -> str:
    """results/LEADERBOARD.md (leaderboard_measured.md.j2): the result files alone."""
    page = MeasuredPage(*load_all(Path(results_dir)), link or record_linker(Path(results_dir).parent), raw or _beside)
    return _render("leaderboard_measured.md.j2", measured=page, **FILTERS)


def _render(template: str, **context: object) -> str:
    return environment(TEMPLATES).get_template(template).render(**context).rstrip("\n")


def _beside(name: str) -> str:
    """results/LEADERBOARD.md links to the result files in its own folder."""
    return name


def record_linker(root: Path) -> Linker:
    """Links from results/LEADERBOARD.md to the records in papers/."""
    return lambda method_id: f"../papers/{method_id}.yaml" if (root / "papers" / f"{method_id}.yaml").is_file() else None


@dataclass
class MeasuredPage:
    """The measured part: a section per table, and the result files refused."""

    runs: list[tuple[Run, str]]
    failed: list[tuple[str, str]]  # (file name, why)
    link: Linker
    raw: FileLinker

    @cached_property
    def sections(self) -> list[Section]:
        grouped = tables(self.runs)
        headlines = {}  # hardware -> its first table, the largest run
        for table, _ in grouped:
            headlines.setdefault(table.hardware, table)
        return [Section(table, members, self.link, self.raw, headlines[table.hardware] is table) for table, members in grouped]

    @property
    def headlines(self) -> list[Section]:
        return [section for section in self.sections if section.headline]


@dataclass
class Section:
    """One table's section: what is fastest here and why, a chart and the top rows, then everything
    else folded (every row, policies side by side, subtasks, time, engines, failures, runs)."""

    table: Table
    members: list[tuple[Run, str]]
    link: Linker
    raw: FileLinker
    headline: bool  # the largest run on its hardware
    lines: list[Line] = field(init=False)

    def __post_init__(self):
        self.lines = table_lines(self.members)
        self.ranked = sorted((line for line in self.lines if line.ranked and not line.own_engine),
                             key=lambda line: -line.mean("overall", "speedup"))
        self.engines = [line for line in self.lines if line.ranked and line.own_engine]
        self.broken = [(line, e) for line in self.lines for e in current_failures(line)]
        shown = self.ranked + self.engines
        measured = {c for line in shown for e in line.ok for c in e.summary}
        self.categories = [c for c in SUBTASKS if c in measured] + sorted(measured - {*SUBTASKS, "overall", "lossless"})
        self.names = _display_names(self.lines)
        self._policies = len({line.policy for line in self.lines} - {NO_POLICY}) > 1

    def name(self, line: Line) -> str:
        """The row's name in charts and lists: the method's, with its policy where the table has several."""
        return self.names[line.method_id] + (f" ({line.policy})" if self._policies and line.policy != NO_POLICY else "")

    def method_link(self, method) -> tuple[str, str | None, str]:
        """(name, URL of its paper's page or None, paper id) of a row's method."""
        paper_id = method_paper_id(method.id)
        return self.names.get(paper_id, method.name), self.link(paper_id), paper_id

    @property
    def files(self) -> list[tuple[str, str]]:
        return [(name, self.raw(quote(name))) for _, name in self.members]

    @property
    def top(self) -> list[Line]:
        return self.ranked[:TOP_ROWS]

    def chart(self, rows: list[Line], which: str) -> Markup:  # charts.py escapes every text it draws
        return Markup(charts.speedup_bars(
            [(self.name(line), line.mean("overall", "speedup"), min(line.values("overall", "speedup")),
              max(line.values("overall", "speedup"))) for line in rows],
            f"Overall speedup over the baseline, {which} (mean over runs; whiskers: lowest to highest run): "
            f"{self.table.hardware}, {self.table.model}"))

    def accepted_chart(self) -> Markup:
        return Markup(charts.accepted_vs_speedup(
            [(self.name(line), line.mean("overall", "mean_accepted"), line.mean("overall", "speedup"))
             for line in self.ranked if line.mean("overall", "mean_accepted")],
            "Mean accepted tokens against measured speedup: a point far right but low "
            "loses its accepted tokens to drafting and verification cost"))

    @property
    def idle(self) -> list[Line]:
        """Ranked rows that drafted (almost) nothing."""
        return [line for line in self.ranked if line.policy != NO_POLICY
                and line.drafted_per_step is not None and line.drafted_per_step < IDLE_DRAFTING]

    @property
    def side_by_side(self) -> list[tuple[Line, Line]]:
        """(paper settings, cost-aware) rows of each method measured under both, the fastest first."""
        by_method: dict[str, dict[str, Line]] = {}
        for line in self.lines:
            by_method.setdefault(line.method_id, {})[line.policy] = line
        pairs = [(ps[PAPER_POLICY], ps[DEFAULT_POLICY]) for ps in by_method.values() if PAPER_POLICY in ps and DEFAULT_POLICY in ps]

        def best(pair: tuple[Line, Line]) -> float:
            return max((line.mean("overall", "speedup") or 0) if line.ranked else 0 for line in pair)

        return sorted(pairs, key=lambda pair: (-best(pair), pair[0].method_id))

    @property
    def earlier(self) -> list[Line]:
        """Rows some of whose runs were left out for their weights."""
        return sorted((line for line in self.lines if line.left_out), key=lambda line: (line.method_id, line.policy))

    @property
    def engine_rows(self) -> list[Line]:
        return sorted(self.engines, key=lambda line: (references(line.method)[0] != line.method_id, line.method_id))

    @property
    def run_rows(self) -> list[Line]:
        return sorted(self.lines, key=lambda line: (line.method_id, line.policy))

    def commits(self, run: Run) -> str:
        return ", ".join(dict.fromkeys(f"{(s.git_commit or 'unknown')[:10]}{' (dirty)' if s.git_dirty else ''}" for s in run.sessions))

    def run_label(self, line: Line) -> str:
        return self.names[line.method_id] + (f" (over {references(line.method)[0]})" if line.own_engine else "")

    def run_cells(self, line: Line) -> list[str]:
        """The row's overall speedup in each run of the table: – where it did not run, failed, or of other weights."""
        by_file = {e.file: e for e in (*line.entries, *line.left_out)}
        left_out = {e.file for e in line.left_out}
        cells = []
        for _, name in self.members:
            entry = by_file.get(name)
            if entry is None:
                cells.append("–")
            elif entry.failure is not None:
                cells.append("failed")
            else:
                cells.append(fmt(entry.summary["overall"]["speedup"]) + (" (other weights)" if name in left_out else ""))
        return cells

    @property
    def has_more(self) -> bool:
        return bool(self.ranked or self.engines or self.broken or self.earlier or self.side_by_side)

    # In short: the table's answer from its numbers --------------------------------------------

    @property
    def verify_cost(self) -> float | None:
        """A forward over WIDE_ROWS new tokens as a multiple of a one-token forward, mean over the runs' cost curves."""
        curves = [run.cost_curve for run, _ in self.members if run.cost_curve]
        return fmean(forward_cost(c, WIDE_ROWS) / forward_cost(c, 1) for c in curves) if curves else None

    @property
    def verify_is_cheap(self) -> bool:
        return self.verify_cost is not None and self.verify_cost <= WIDE_RATIO

    @property
    def drafting_shares(self) -> tuple[float, float] | None:
        """The mean share of their time that rows drafting with a model or head, and rows copying
        from the context, spend drafting; None when either kind is missing or nothing timed drafting."""
        shares = {True: [], False: []}
        for line in self.ranked:
            seconds, drafting = line.mean("overall", "seconds"), line.mean("overall", "draft_seconds")
            if seconds and drafting is not None and line.policy != NO_POLICY:
                shares[drafts_with_a_model(line.method_id)].append(drafting / seconds)
        if shares[True] and shares[False] and max(map(fmean, shares.values())) > 0.005:  # older files timed no drafting
            return fmean(shares[True]), fmean(shares[False])
        return None

    @property
    def rival(self) -> Line | None:
        """The fastest row of the other kind of drafter than the fastest row's."""
        top = drafts_with_a_model(self.ranked[0].method_id)
        return next((line for line in self.ranked if drafts_with_a_model(line.method_id) != top), None)


def drafts_with_a_model(method_id: str) -> bool:
    spec = resolve(method_id)
    return bool(spec and (spec.trained_head or spec.uses_draft_model))


def _display_names(lines: list[Line]) -> dict[str, str]:
    """method id -> the name rows and charts show: the method's own name (its head before a colon);
    the id added where two methods would read alike."""
    heads = {line.method_id: method_paper_id(line.method.name.partition(":")[0].strip()) or line.method_id for line in lines}
    repeated = {head for head in heads.values() if list(heads.values()).count(head) > 1}
    return {i: f"{head} ({i})" if head in repeated else head for i, head in heads.items()}


def lossless(line: Line) -> tuple[str, int, int, list[str]]:
    """A row's lossless checks: ("pass" | "fail" | "n/a", identical, compared, the reasons of n/a)."""
    checks = [e.summary["lossless"] for e in line.ok]
    statuses = {c["status"] for c in checks}
    identical, compared = sum(c.get("identical", 0) for c in checks), sum(c.get("compared", 0) for c in checks)
    status = "pass" if statuses == {"pass"} else "fail" if "fail" in statuses else "n/a"
    return status, identical, compared, list(dict.fromkeys(c["reason"] for c in checks if "reason" in c))


def breakable(drafter: str) -> Markup:
    """A drafter, escaped, may name a path or hub id with no space in it: let it wrap after each "/"
    so that the table fits the page instead of scrolling."""
    return Markup(md(drafter).replace("/", "/<wbr>"))


def acceptance_by_position(line: Line) -> list[float | None]:
    """Per draft position, the mean acceptance over the runs that drafted there (None: none did)."""
    runs = [r for r in (e.summary["overall"]["acceptance_by_position"] for e in line.ok) if r]
    by_position = [[r[k] for r in runs if len(r) > k and r[k] is not None] for k in range(max(map(len, runs), default=0))]
    return [fmean(values) if values else None for values in by_position]


# What the templates use beside the escaping filters (`specatlas.templating`).
FILTERS = {"fmt": fmt, "milliseconds": milliseconds, "percent": percent, "subtask": lambda c: SUBTASKS.get(c, c),
           "kinds": KINDS, "curve_warning": curve_warning, "wide_rows": WIDE_ROWS, "lossless": lossless,
           "acceptance_by_position": acceptance_by_position, "breakable": breakable, "drafts_with_a_model": drafts_with_a_model,
           "references": references, "row_name": row_name}


# Reported numbers ------------------------------------------------------------------------------

@dataclass
class Reported:
    """Paper-reported results of the measured methods, and Spec-Bench's published leaderboard."""

    papers: list[tuple[Paper, str | None]] | None  # (record, its page's URL) of the measured methods; None: no catalog
    spec_bench: SpecBenchLeaderboard

    @property
    def numbers(self) -> int:
        return sum(len(paper.reported_results) for paper, _ in self.papers or [])

    @property
    def devices(self) -> list[str]:
        return list(dict.fromkeys(row["device"] for row in self.spec_bench.rows))

    @property
    def columns(self) -> list[str]:
        return [*SUBTASKS.values(), "#Mean Accepted Tokens", "Overall"]

    source_text = staticmethod(source_text)
    public_url = staticmethod(public_url)


def reported(method_ids: list[str], root: Path, link: Linker | None = None,
             papers: dict[str, Paper] | None = None) -> Reported:
    link = link or record_linker(root)
    if papers is None and (root / "papers").is_dir():
        _, records, _ = validate(root=root)
        papers = {r.paper.id: r.paper for r in records if r.paper}
    listed = None if papers is None else [(papers[i], link(i)) for i in method_ids if i in papers]
    return Reported(listed, load_spec_bench(root))
