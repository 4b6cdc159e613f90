"""The leaderboard's ranked rows as other pages quote them: the site's method pages and its
"Which method?" page, and `specatlas advise` and `specatlas leaderboard --fastest`, which pick the
fastest method measured on this hardware."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specatlas.bench.aggregate import Line, Loaded, Table, current_failures, load_all, table_lines, tables
from specatlas.bench.questions import SUBTASKS
from specatlas.bench.results import BASELINE
from specatlas.impls.engine.draft_length import COST_AWARE as DEFAULT_POLICY
from specatlas.impls.engine.draft_length import PAPER as PAPER_POLICY
from specatlas.impls.registry import resolve

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
                for line in table_lines(members) if line.ranked and not line.own_engine]
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
        for line in table_lines(members):
            by_method.setdefault(line.method_id, []).append(line)
        for method_id, lines in by_method.items():
            lines.sort(key=lambda line: (order.get(line.policy, 2), line.policy))
            measured = {c for line in lines for e in line.ok for c in e.summary} - {"overall", "lossless"}
            categories = ["overall", *(c for c in SUBTASKS if c in measured), *sorted(measured - set(SUBTASKS))]
            files = sorted({e.file for line in lines for e in line.entries})
            out.setdefault(method_id, []).append(MethodMeasurement(table, files, lines, categories))
    return out
