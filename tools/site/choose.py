""""Which method should I use?": per hardware setting, a ranking read from ONE benchmark table
(measured here by `specatlas bench`, or a third party's published table such as Spec-Bench's),
never mixing tables; verdicts for the constraints a reader has (lossless required or not, a head
can be trained or not) picked from that same table; the papers' own claims on that hardware shown
apart, unranked; serving at batch > 1, which no table here measures, listed without a ranking.

A table's rows are methods, each with what it needs (a trained head, a draft model, nothing), its
losslessness (from its record or the registry), the serving engines that implement it (when the
records say so) and the command that runs it here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from specatlas.bench.leaderboard import NO_POLICY, Measured, measured_rows
from specatlas.bench.published import SpecBenchLeaderboard
from specatlas.catalog.schema import ENGINE_NAMES, Paper
from specatlas.impls.engine.draft_length import PAPER as PAPER_POLICY
from specatlas.site import reported
from specatlas.site.catalog import Catalog, chronological, short_name

# Hardware settings: (key, heading, who it is for, hardware classes of `reported.HARDWARE`).
DATACENTER, CONSUMER, CPU = "datacenter-gpu", "consumer-gpu", "cpu"
HARDWARE_SETTINGS = (
    (DATACENTER, "Datacenter GPU, batch 1",
     "One request at a time on an A100, H100 or similar accelerator: latency-bound chat and agents.",
     {"H100", "H200", "H800", "A100", "A800", "A10", "L40", "V100", "AMD MI250", "TPU"}),
    (CONSUMER, "Consumer or workstation GPU, batch 1",
     "One request at a time on a desktop card (RTX 3090, 4090, A6000): local assistants.",
     {"RTX 3090", "RTX 4090", "A6000"}),
    (CPU, "CPU / on-device, batch 1",
     "No GPU: a laptop or server CPU, Apple silicon, phones and edge boards. Memory bandwidth is "
     "scarce and drafting is not free, so cheap drafters (lookup, retrieval) often win.",
     {"CPU", "Edge device"}),
)
# What a method needs before it can run: in the order of how much it asks of the user.
NOTHING, DRAFT_MODEL, TRAINING = "nothing", "a draft model", "training"
UNKNOWN = "not known"  # a method with no record in the catalog
TRAINED_NODES = {"extra-heads", "feature-level-drafting", "learnable-draft-tokens", "multi-token-prediction",
                 "independent-fine-tuned"}
# (lossless required, may train): the verdict lines of every setting, strictest first.
CONSTRAINTS = ((True, False, "Lossless, nothing to train"), (True, True, "Lossless, can train a head"),
               (False, False, "Lossy allowed, nothing to train"), (False, True, "Lossy allowed, can train a head"))
CLAIMS_SHOWN = 15
SERVING_SHOWN = 15


@dataclass(frozen=True)
class Row:
    """One method in one benchmark table."""

    method: str  # as the table names it
    papers: tuple[Paper, ...]  # its records (a combination such as SAMD[EAGLE2] has two)
    speedup: float
    accepted: float | None
    lossless: bool | None
    needs: str  # NOTHING, DRAFT_MODEL or TRAINING
    command: str | None  # how to run it here, when it runs here
    engines: tuple[str, ...]
    policy: str | None = None  # measured here: the draft-length policy of the row
    command_note: str = ""  # when the command runs only part of what the table measured

    @property
    def paper(self) -> Paper | None:
        return self.papers[0] if self.papers else None


@dataclass
class Source:
    """One benchmark table: every row measured together, on one machine, model and prompt set."""

    setting: str  # a HARDWARE_SETTINGS key
    measured_here: bool
    title: str
    detail: str  # sample size, settings, source
    device: str  # measured here: the torch device; published: ""
    link: str  # the page holding the whole table
    rows: list[Row] = field(default_factory=list)
    size: int = 0  # measured here: questions × tokens × runs of one run (Table.size); published: 0

    @property
    def methods(self) -> int:
        return len(self.rows)

    def best(self, lossless: bool, may_train: bool) -> Row | None:
        """The fastest row that fits the constraints and beats plain decoding, or None."""
        return next((r for r in self.rows if r.speedup > 1.0 and (r.lossless is True or not lossless)
                     and (may_train or r.needs in (NOTHING, DRAFT_MODEL))), None)


@dataclass
class Setting:
    key: str
    title: str
    meaning: str
    source: Source | None  # the table it is ranked by
    others: list[Source]  # other tables on this hardware, not mixed in
    claims: list[tuple[Paper, reported.ResultRow]]  # the papers' own numbers here, unranked
    claims_total: int

    @property
    def verdicts(self) -> list[tuple[str, Row | None]]:
        return [(label, self.source.best(lossless, train)) for lossless, train, label in CONSTRAINTS] if self.source else []

    @property
    def top(self) -> Row | None:
        """The headline pick: the fastest row that beats plain decoding, whatever it needs."""
        return self.source.best(False, True) if self.source else None


def engines(paper: Paper | None) -> tuple[str, ...]:
    """The serving engines the record says implement the method (none when it says nothing)."""
    return tuple(ENGINE_NAMES[support.engine] for support in paper.serving_engines) if paper is not None else ()


def has_engine_data(catalog: Catalog) -> bool:
    return any(engines(p) for p in catalog.papers)


def needs(catalog: Catalog, paper: Paper) -> str:
    """What the method asks for before it runs: the registry's composition when it runs here (a
    trained head family, a draft model), else the record's tags."""
    spec = _spec(paper.id)
    if spec is not None:
        return TRAINING if spec.trained_head else DRAFT_MODEL if spec.uses_draft_model else NOTHING
    tags = set(catalog.expanded_tags(paper))
    if tags & TRAINED_NODES or catalog.tags(paper, "alignment"):
        return TRAINING
    return DRAFT_MODEL if "independent-drafting" in tags else NOTHING


def _spec(paper_id: str):
    from specatlas.impls.registry import METHODS

    return METHODS.get(paper_id)


def method_name(paper: Paper) -> str:
    """The method's name as the registry gives it (its head before a colon), else the record's short name."""
    spec = _spec(paper.id)
    return spec.name.partition(":")[0] if spec is not None else short_name(paper)


def _lossless(papers: Iterable[Paper]) -> bool | None:
    """Lossless when every component is; a composition that runs here answers for itself."""
    values = []
    for paper in papers:
        spec = _spec(paper.id)
        values.append(spec.lossless if spec is not None else paper.lossless)
    if not values or None in values:
        return None
    return all(values)


def _most(values: Iterable[str]) -> str:
    order = (NOTHING, DRAFT_MODEL, TRAINING)
    return max(values, key=order.index, default=UNKNOWN)


def run_command(paper_id: str, policy: str | None = None) -> str:
    """The command that runs a method here, under the measured row's policy (a result file's
    policy is data: only a plain word becomes part of a command)."""
    plain = policy is not None and re.fullmatch(r"[a-z0-9][a-z0-9-]*", policy)
    suffix = f" --draft-length {policy}" if plain and policy not in (PAPER_POLICY, NO_POLICY) else ""
    return f"specatlas run {paper_id}{suffix}"


def hardware_setting(hardware: str) -> str | None:
    """The HARDWARE_SETTINGS key of a hardware text (`reported.hardware_class`), or None."""
    found = reported.hardware_class(hardware)
    return next((key for key, _, _, classes in HARDWARE_SETTINGS if found in classes), None)


# Tables --------------------------------------------------------------------------------------

def measured_sources(catalog: Catalog, loaded) -> list[Source]:
    """The leaderboard's tables (results/*.json), each method at its best policy in the table;
    the baseline and other libraries' implementations left out (plain decoding is 1.00×)."""
    groups: dict[object, list[Measured]] = {}
    for row in measured_rows(catalog.root / "results", loaded) if loaded else []:
        groups.setdefault(row.table, []).append(row)
    out = []
    for table, rows in groups.items():
        device = rows[0].device
        # CPU and Apple silicon are on-device; a GPU by its name, an unrecognised one counted as datacenter
        setting = CPU if device in ("cpu", "mps") else hardware_setting(table.hardware) or DATACENTER
        source = Source(setting, True, f"Measured here: {table.title}",
                        f"device {device}; every output checked token by token against plain decoding",
                        re.sub(r"[^a-z0-9:, ]", "", device), "leaderboard.md", size=table.size)
        seen = set()
        for m in rows:  # fastest first: each method's best policy
            paper = catalog.by_id.get(m.method_id)
            if paper is None or m.kind != "specatlas" or m.method_id in seen:
                continue
            seen.add(m.method_id)
            source.rows.append(Row(method_name(paper), (paper,), m.speedup, m.accepted, _lossless([paper]),
                                   needs(catalog, paper), run_command(paper.id, m.policy)
                                   if paper.id in catalog.implemented else None, engines(paper), m.policy))
        out.append(source)
    return out


def published_sources(catalog: Catalog, data: SpecBenchLeaderboard) -> list[Source]:
    """Spec-Bench's published leaderboard: one table per device and target model."""
    by_alias = reported.aliases(catalog)
    out: dict[tuple[str, str], Source] = {}
    for r in reported.spec_bench_rows(catalog, data):
        if r.speedup is None:
            continue
        key = (r.hardware, r.target)
        if key not in out:
            out[key] = Source(hardware_setting(r.hardware) or DATACENTER, False,
                              f"Spec-Bench's published leaderboard: {r.target} on {r.hardware}",
                              f"{data.settings}; {data.source}", "", "results.md")
        papers = tuple(catalog.by_id[i] for i in reported.components(r.method, by_alias))
        main = papers[0] if papers else None
        runs = main is not None and main.id in catalog.implemented
        out[key].rows.append(Row(
            r.method, papers, r.speedup, r.accepted, _lossless(papers), _most(needs(catalog, p) for p in papers),
            run_command(main.id) if runs else None, engines(main),
            command_note=f"{method_name(main)} alone: this combination is not built here" if runs and len(papers) > 1 else ""))
    for source in out.values():
        source.rows.sort(key=lambda row: -row.speedup)
    return list(out.values())


def _order(source: Source) -> tuple:
    """Which table a setting is ranked by: the one with the most methods; on a tie, ours, and
    of ours the largest run (as the leaderboard's headline)."""
    return (-source.methods, not source.measured_here, -source.size, source.title)


def settings(catalog: Catalog, loaded, spec_bench: SpecBenchLeaderboard) -> list[Setting]:
    sources = measured_sources(catalog, loaded) + published_sources(catalog, spec_bench)
    claims = _claims(catalog)
    out = []
    for key, title, meaning, _ in HARDWARE_SETTINGS:
        mine = sorted((s for s in sources if s.setting == key and s.rows), key=_order)
        here = claims.get(key, [])
        out.append(Setting(key, title, meaning, mine[0] if mine else None, mine[1:], here[:CLAIMS_SHOWN], len(here)))
    return out


def _claims(catalog: Catalog) -> dict[str, list[tuple[Paper, reported.ResultRow]]]:
    """setting -> (paper, its highest reported speedup on that hardware), newest paper first: the
    papers' own numbers, each on its own model and setup, so never ranked against each other."""
    best: dict[tuple[str, str], reported.ResultRow] = {}
    for paper in catalog.papers:
        if paper.lossless is None:
            continue
        for row in reported.paper_rows(paper):
            key = hardware_setting(row.hardware)
            if key is None or row.speedup is None or (row.batch or 1) > 1:
                continue
            if (key, paper.id) not in best or row.speedup > best[key, paper.id].speedup:
                best[key, paper.id] = row
    out: dict[str, list[tuple[Paper, reported.ResultRow]]] = {}
    for (key, paper_id), row in best.items():
        out.setdefault(key, []).append((catalog.by_id[paper_id], row))
    for rows in out.values():
        rows.sort(key=lambda item: chronological(item[0]), reverse=True)
    return out


# Serving -------------------------------------------------------------------------------------

def serving(catalog: Catalog) -> tuple[list[tuple[Paper, reported.ResultRow | None]], int]:
    """Methods for serving at batch > 1 (tagged serving-systems, not only edge devices, or
    reporting a batch above 1): runnable here first, then newest; with the paper's own highest
    batch > 1 speedup when it reports one. No table here measures them together: not ranked."""
    fits = []
    for paper in catalog.papers:
        if paper.lossless is None:
            continue
        tags = set(catalog.tags(paper, "scope"))
        batched = [r for r in reported.paper_rows(paper) if (r.batch or 1) > 1 and r.speedup is not None]
        if "serving-systems" in tags or batched:
            fits.append((paper, max(batched, key=lambda r: r.speedup) if batched else None))
    fits.sort(key=lambda item: (item[0].id not in catalog.implemented, not engines(item[0]),
                                tuple(-x for x in chronological(item[0])[:2])))
    return fits[:SERVING_SHOWN], len(fits)
