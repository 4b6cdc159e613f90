"""How complete the catalog is, measured by capture-recapture, per quarter (`specatlas recall` prints
it, the timeline page shows it).

Two sweeps of the literature list the papers they found (`tools/catalog/recall/round-<n>/sweep-*.yaml`:
arXiv id or title, posted month, the public page each was seen on). They are independent by
construction: different strategies and sources, each run blind to the other's finds and to the
catalog until both were done. Each round is a new pair; once the catalog has taken in a round's
finds, that round no longer measures it independently, and the estimate is the newest round's
(earlier rounds stay as the record of how the catalog was completed). Per posted quarter:

- the field's size N, from the two sweeps' overlap (Chapman's form of the Lincoln-Petersen
  estimator, which stays finite for small overlaps), with Chao's log-normal 95% interval;
- the catalog's recall: its records of the quarter over the field's size, the papers either sweep
  found plus those neither found (N's estimate less the papers found, or the catalog's own records
  beyond the sweeps' finds where those are more), with the interval N's gives;
- beside it, the share of the papers the sweeps found that have a record (Wilson 95% interval):
  before the catalog took in the sweeps' finds, an independent sample's estimate of recall.

A paper matches a record by arXiv id, else by normalized title (`records.normalize_title`).
Both estimates assume every paper is as findable as every other; papers that neither sweep's
strategies reach are missed by both, so the estimate is an upper bound on recall when the
catalog and the sweeps favour the same well-known papers.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from specatlas.catalog.records import normalize_title, posted_month
from specatlas.catalog.yamlio import YamlProblem, load_yaml, one_line

SWEEPS = Path(__file__).resolve().parent / "recall"
MAX_SWEEP_BYTES = 4 * 1024 * 1024
Z95 = 1.959964
_MONTH = re.compile(r"^(20\d\d)-(0[1-9]|1[0-2])$")
_ARXIV = re.compile(r"^\d{4}\.\d{4,5}$")


class SweepError(ValueError):
    """A sweep file that cannot be used: one line naming the file, the entry and the field."""


@dataclass(frozen=True)
class Sweep:
    name: str
    ended: str
    period: tuple[str, str]
    papers: dict[str, str]  # match key (arXiv id, else "title:" + normalized title) -> posted month


def read_sweep(path: Path) -> Sweep:
    """One sweep file, checked: a one-line `SweepError` for anything malformed."""
    try:
        if path.stat().st_size > MAX_SWEEP_BYTES:
            raise SweepError(f"{path}: larger than {MAX_SWEEP_BYTES:,} bytes")
        data = load_yaml(path.read_text(encoding="utf-8")).data
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError(f"{path}: cannot be read ({one_line(str(exc))})") from None
    except YamlProblem as exc:
        raise SweepError(f"{path}:{exc.line}: {exc.field}: {exc.message}") from None
    if not isinstance(data, dict) or not isinstance(data.get("papers"), list):
        raise SweepError(f"{path}: papers: a list of the papers the sweep found is required")
    for field in ("sweep", "ended"):
        if not isinstance(data.get(field), (str, date)):
            raise SweepError(f"{path}: {field}: required")
    period = data.get("period") or {}
    if not isinstance(period, dict) or not all(_MONTH.match(str(period.get(k, ""))) for k in ("from", "to")):
        raise SweepError(f"{path}: period: needs from and to as YYYY-MM")
    papers: dict[str, str] = {}
    for index, entry in enumerate(data["papers"]):
        key, month = _entry(path, index, entry)
        papers.setdefault(key, month)
    return Sweep(str(data["sweep"]), str(data["ended"]), (str(period["from"]), str(period["to"])), papers)


def _entry(path: Path, index: int, entry) -> tuple[str, str]:
    where = f"{path}: papers[{index}]"
    if not isinstance(entry, dict):
        raise SweepError(f"{where}: an entry is a mapping with arxiv, title, posted and source")
    arxiv, title, posted = entry.get("arxiv"), entry.get("title"), str(entry.get("posted", ""))
    if arxiv is not None and not (isinstance(arxiv, str) and _ARXIV.match(arxiv)):
        raise SweepError(f"{where}.arxiv: {one_line(repr(arxiv))[:40]} is not a new-style arXiv id")
    if not isinstance(title, str) or not title.strip():
        raise SweepError(f"{where}.title: required")
    if not _MONTH.match(posted):
        raise SweepError(f"{where}.posted: {one_line(posted)[:20]!r} is not YYYY-MM")
    if not str(entry.get("source", "")).startswith(("https://", "http://")):
        raise SweepError(f"{where}.source: the public address the paper was seen on")
    if arxiv and f"20{arxiv[:2]}-{arxiv[2:4]}" != posted:
        raise SweepError(f"{where}.posted: {posted} is not the month of arXiv id {arxiv}")
    return (arxiv or f"title:{normalize_title(title)}"), posted


def quarter(month: str) -> str:
    year, number = month.split("-")
    return f"{year}Q{(int(number) - 1) // 3 + 1}"


def chapman(n1: int, n2: int, m: int) -> tuple[float, float, float]:
    """N from two captures of n1 and n2 with m in both: Chapman's estimate and Chao's log-normal
    95% interval (never below the r = n1 + n2 - m papers actually seen)."""
    seen = n1 + n2 - m
    estimate = (n1 + 1) * (n2 + 1) / (m + 1) - 1
    variance = (n1 + 1) * (n2 + 1) * (n1 - m) * (n2 - m) / ((m + 1) ** 2 * (m + 2))
    unseen = estimate - seen
    if unseen <= 0 or variance <= 0:
        return estimate, float(seen), max(float(seen), estimate)
    spread = math.exp(Z95 * math.sqrt(math.log(1 + variance / unseen**2)))
    return estimate, seen + unseen / spread, seen + unseen * spread


def wilson(hits: int, total: int) -> tuple[float, float, float]:
    """A proportion and its Wilson 95% interval."""
    if total == 0:
        return math.nan, 0.0, 1.0
    p = hits / total
    centre = (p + Z95**2 / (2 * total)) / (1 + Z95**2 / total)
    half = Z95 * math.sqrt(p * (1 - p) / total + Z95**2 / (4 * total**2)) / (1 + Z95**2 / total)
    return p, max(0.0, centre - half), min(1.0, centre + half)


def recall(records: int, found: int, catalogued: int, size: tuple[float, float, float]) -> tuple[float, float, float]:
    """The catalog's recall in a quarter and its 95% interval: its `records` over the field's size,
    counted as the `found` papers plus those neither sweep found (N - found, by capture-recapture;
    at least the catalog's own records beyond the sweeps' finds, records - `catalogued`), at N's
    estimate and at each end of its interval."""
    beyond = records - catalogued

    def share(n: float) -> float:
        total = found + max(n - found, beyond)
        return min(1.0, records / total) if total > 0 else math.nan

    n, low, high = size
    return share(n), share(high), share(low)


def estimate(papers, sweeps: list[Sweep]) -> dict:
    """Per quarter of the sweeps' common period: both sweeps' counts, their overlap, N with its
    interval, the catalog's share of the papers found and its interval, the catalog's records
    (`papers`: the records' `Paper`s)."""
    if len(sweeps) != 2:
        raise SweepError(f"capture-recapture needs exactly two sweeps, {len(sweeps)} given")
    a, b = sweeps
    start, end = max(a.period[0], b.period[0]), min(a.period[1], b.period[1])
    catalogued = {p.arxiv for p in papers if p.arxiv} | {
        f"title:{normalize_title(title)}" for p in papers for title in (p.title, *p.previous_titles)}
    records = Counter(quarter(m) for p in papers for m in [posted_month(p)] if m and start <= m <= end)
    rows = {}
    for q in sorted({quarter(m) for s in sweeps for m in s.papers.values() if start <= m <= end}):
        in_a = {k for k, m in a.papers.items() if quarter(m) == q}
        in_b = {k for k, m in b.papers.items() if quarter(m) == q}
        found = in_a | in_b
        size = chapman(len(in_a), len(in_b), len(in_a & in_b))
        held = records.get(q, 0)
        rows[q] = {"sweep_a": len(in_a), "sweep_b": len(in_b), "both": len(in_a & in_b), "found": len(found),
                   "catalogued": len(found & catalogued), "field_size": [round(x, 1) for x in size],
                   "share_catalogued": [round(x, 3) for x in wilson(len(found & catalogued), len(found))],
                   "records": held, "recall": [round(x, 3) for x in recall(held, len(found), len(found & catalogued), size)],
                   "missing": sorted(found - catalogued)}
    return {"sweeps": {s.name: {"ended": s.ended, "papers": len(s.papers)} for s in sweeps},
            "period": [start, end], "quarters": rows}


def read_sweeps(folder: Path) -> list[Sweep]:
    return [read_sweep(path) for path in sorted(folder.glob("sweep-*.yaml"))]


def latest_round(root: Path = SWEEPS) -> Path | None:
    """The newest round's folder (`round-<n>`, the highest n) under `root`; None when there is none."""
    rounds = [(int(p.name.split("-", 1)[1]), p) for p in root.glob("round-*") if p.is_dir() and p.name[6:].isdigit()]
    return max(rounds)[1] if rounds else None
