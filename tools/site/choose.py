""""Which method should I use?": per hardware setting and model size (7B, 13B, 33B+...), a ranking
read from ONE benchmark table (measured here by `specatlas bench`, or a third party's published
table such as Spec-Bench's), never mixing tables; verdicts for the constraints a reader has (lossless required or not, a head
can be trained or not) picked from that same table; the papers' own claims on that hardware shown
apart, unranked; serving at batch > 1, which no table here measures, listed without a ranking.

A table's rows are methods, each with what it needs (a trained head, a draft model, nothing), its
losslessness (from its record or the registry), the serving engines that implement it (when the
records say so) and the command that runs it: on the table's own target model and a GPU, with the
drafter its authors publish (published_drafters.yaml), for a published table; as measured, for ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlencode

import yaml

from specatlas.bench.aggregate import NO_POLICY
from specatlas.bench.measured import Measured, measured_rows
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
# Model sizes, each ranked by its own table: (upper bound in billions of parameters, label).
SIZES = ((1, "under 1B"), (10, "7B"), (20, "13B"), (float("inf"), "33B+"))
NO_SIZE = "size not stated"
DRAFTERS_FILE = Path(__file__).resolve().parent / "published_drafters.yaml"


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
    command_note: str = ""  # what the command still needs (a head to train)
    engine_runs: tuple[tuple[str, str, str], ...] = ()  # (engine, how it is switched on or its command, source)

    @property
    def paper(self) -> Paper | None:
        return self.papers[0] if self.papers else None

    @property
    def lossless_variants(self) -> list[str]:
        """Where the method is not lossless as a whole, the variants its record says are."""
        if self.lossless is not False or self.paper is None:
            return []
        return [v.variant for v in self.paper.lossless_variants if v.lossless]


@dataclass
class Source:
    """One benchmark table: every row measured together, on one machine, model and prompt set."""

    setting: str  # a HARDWARE_SETTINGS key
    measured_here: bool
    title: str
    detail: str  # sample size, settings, source
    device: str  # measured here: the torch device; published: ""
    link: str  # the page holding the whole table (a .md path)
    rows: list[Row] = field(default_factory=list)
    size: int = 0  # measured here: questions × tokens × runs of one run (Table.size); published: 0
    target: str = ""  # the target model every row ran
    query: str = ""  # the page's filters that show this table alone (results.js reads them from the query)

    @property
    def methods(self) -> int:
        return len(self.rows)

    @property
    def model_size(self) -> str:
        return model_size(self.target)

    def best(self, lossless: bool, may_train: bool) -> Row | None:
        """The fastest row that fits the constraints and beats plain decoding, or None."""
        return next((r for r in self.rows if r.speedup > 1.0 and (r.lossless is True or not lossless)
                     and (may_train or r.needs in (NOTHING, DRAFT_MODEL))), None)


@dataclass
class Ranking:
    """One model size on one hardware setting, ranked by one table (the others on it listed apart)."""

    size: str  # a SIZES label
    key: str  # its anchor on the page
    source: Source
    others: list[Source]

    @property
    def verdicts(self) -> list[tuple[str, Row | None]]:
        return [(label, self.source.best(lossless, train)) for lossless, train, label in CONSTRAINTS]

    @property
    def top(self) -> Row | None:
        """The headline pick: the fastest row that beats plain decoding, whatever it needs."""
        return self.source.best(False, True)


@dataclass
class Setting:
    key: str
    title: str
    meaning: str
    rankings: list[Ranking]  # smallest model first; empty when no table covers the hardware
    claims: list[tuple[Paper, reported.ResultRow]]  # the papers' own numbers here, unranked
    claims_total: int


def model_size(target: str) -> str:
    """The SIZES label of a target model's text ("Vicuna-13B-v1.3" -> "13B")."""
    size = reported.billions(target)
    return NO_SIZE if size == float("inf") else next(label for limit, label in SIZES if size < limit)


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


def registry_spec(papers: tuple[Paper, ...]):
    """The registry method that runs a table's row, or None: a record's own method; for a
    combination (Spec-Bench's SAMD[EAGLE2]: SAM-Decoding falling back to EAGLE-2), the labelled
    variant of the first record whose name brackets the second (SAM-Decoding[EAGLE-2])."""
    from specatlas.impls.registry import METHODS

    if not papers:
        return None
    if len(papers) == 1:
        return METHODS.get(papers[0].id)
    inner = {_plain(name) for paper in papers[1:] for name in (*paper.aliases, short_name(paper))}
    return next((spec for spec in METHODS.values() if spec.variant_of == papers[0].id
                 and _plain(_bracketed(spec.name.partition(":")[0])) in inner), None)


def _bracketed(name: str) -> str:
    found = re.search(r"\[(.*?)\]", name)
    return found.group(1) if found else ""


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


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
                        re.sub(r"[^a-z0-9:, ]", "", device), "leaderboard.md", size=table.size, target=table.model)
        seen = set()
        for m in rows:  # fastest first: each method's best policy
            spec = _spec(m.method_id)
            paper = catalog.by_id.get(spec.record_id if spec else m.method_id)
            if paper is None or m.kind != "specatlas" or m.method_id in seen:
                continue
            seen.add(m.method_id)
            name = spec.name.partition(":")[0] if spec else method_name(paper)
            source.rows.append(Row(name, (paper,), m.speedup, m.accepted, spec.lossless if spec else _lossless([paper]),
                                   needs(catalog, paper), run_command(m.method_id, m.policy) if spec else None,
                                   engines(paper), m.policy))
        out.append(source)
    return out


def published_sources(catalog: Catalog, data: SpecBenchLeaderboard) -> list[Source]:
    """Spec-Bench's published leaderboard: one table per device and target model, each row with the
    command that runs it on that target on a GPU."""
    by_alias, hub = reported.aliases(catalog), published_drafters()["targets"]
    out: dict[tuple[str, str], Source] = {}
    for r in reported.spec_bench_rows(catalog, data):
        if r.speedup is None:
            continue
        key = (r.hardware, r.target)
        if key not in out:
            query = urlencode({"hardware": r.hardware_class, "size": r.size, "by": r.measured_by})
            out[key] = Source(hardware_setting(r.hardware) or DATACENTER, False,
                              f"Spec-Bench's published leaderboard: {r.target} on {r.hardware}",
                              f"{data.settings}; {data.source}", "", "results.md", target=r.target,
                              query=f"?{query}#results-spec-bench")
        papers = tuple(catalog.by_id[i] for i in reported.components(r.method, by_alias))
        spec = registry_spec(papers)
        command, note = own_model_command(spec, hub.get(r.target)) if spec else (None, "")
        main = catalog.by_id.get(spec.record_id) if spec else papers[0] if papers else None
        out[key].rows.append(Row(
            spec.name.partition(":")[0] if spec else r.method, papers, r.speedup, r.accepted,
            spec.lossless if spec else _lossless(papers), _most(needs(catalog, p) for p in papers), command,
            engines(main), command_note=note, engine_runs=engine_runs(main, hub.get(r.target), spec)))
    for source in out.values():
        source.rows.sort(key=lambda row: -row.speedup)
    return list(out.values())


@lru_cache(maxsize=None)
def published_drafters() -> dict:
    """published_drafters.yaml: Spec-Bench's targets by hub id, the drafters published for them."""
    data = yaml.safe_load(DRAFTERS_FILE.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("targets"), dict) or not isinstance(data.get("drafters"), dict):
        raise ValueError(f"{DRAFTERS_FILE}: needs a targets and a drafters mapping")
    return data


def own_model_command(spec, model: str | None) -> tuple[str, str]:
    """(command, what it still needs) that runs a registry method on `model` (a hub id) on a GPU,
    with the drafter published for that model when one is known."""
    drafters = published_drafters()["drafters"]
    parts = [f"specatlas run {spec.id}", f"--model {model or '<your model>'}", "--device cuda"]
    note = ""
    if spec.trained_head:
        checkpoint = drafters.get(spec.trained_head, {}).get(model)
        parts.append(f"--drafter-checkpoint {checkpoint or '<your head>'}")
        if not checkpoint:
            note = f"no published {spec.trained_head} head for this model: `specatlas train {spec.trained_head} --model {model or '<your model>'}` trains one"
    elif spec.uses_draft_model and drafters.get("draft-model", {}).get(model):
        parts.append(f"--draft-model {drafters['draft-model'][model]}")
    return " ".join(parts), note


def engine_runs(paper: Paper | None, model: str | None, spec=None) -> tuple[tuple[str, str, str], ...]:
    """(engine, how to run the method in it, the page that says so) for each serving engine the
    record names: a launch command where the record's `option` is the engine's own switch (SGLang's
    --speculative-algorithm, vLLM's speculative_config method), else that option as the record gives it."""
    if paper is None:
        return ()
    drafter = published_drafters()["drafters"].get(spec.trained_head, {}).get(model) if spec and spec.trained_head else None
    out = []
    for support in paper.serving_engines:
        how = support.option or support.feature
        sglang = re.match(r"--speculative-algorithm ([A-Z0-9_]+)", how)
        vllm = re.search(r"speculative_config=\{method: ([a-z0-9_]+)", how)
        if support.engine == "sglang" and sglang and model:
            how = (f"python -m sglang.launch_server --model-path {model} --speculative-algorithm {sglang.group(1)}"
                   + (f" --speculative-draft-model-path {drafter}" if drafter else ""))
        elif support.engine == "vllm" and vllm and model and drafter:
            how = f'vllm serve {model} --speculative-config \'{{"method": "{vllm.group(1)}", "model": "{drafter}"}}\''
        out.append((ENGINE_NAMES[support.engine], how, support.source))
    return tuple(out)


def _order(source: Source) -> tuple:
    """Which table a setting is ranked by: the one with the most methods; on a tie, ours, and
    of ours the largest run (as the leaderboard's headline)."""
    return (-source.methods, not source.measured_here, -source.size, source.title)


def settings(catalog: Catalog, loaded, spec_bench: SpecBenchLeaderboard) -> list[Setting]:
    sources = measured_sources(catalog, loaded) + published_sources(catalog, spec_bench)
    claims = _claims(catalog)
    out = []
    for key, title, meaning, _ in HARDWARE_SETTINGS:
        mine = [s for s in sources if s.setting == key and s.rows]
        sizes = sorted({s.model_size for s in mine}, key=lambda size: [label for _, label in SIZES].index(size)
                       if size != NO_SIZE else len(SIZES))
        rankings = []
        for size in sizes:
            tables = sorted((s for s in mine if s.model_size == size), key=_order)
            rankings.append(Ranking(size, f"{key}-{_plain(size)}", tables[0], tables[1:]))
        here = claims.get(key, [])
        out.append(Setting(key, title, meaning, rankings, here[:CLAIMS_SHOWN], len(here)))
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
