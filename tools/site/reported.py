"""Reported results compared: every number the catalog's records report (`reported_results`), plus
third-party measurements (Spec-Bench's published leaderboard, committed in results/published/), as rows
grouped by benchmark, with the target model's family and size and the hardware read from the
record's free text so that the results page can filter on them.

Records say "MT-Bench" or "MT-bench, HumanEval, GSM8K, Alpaca" or "see paper": a number belongs
to a benchmark's table only when its text names that benchmark alone; the others are listed
together under "Several or unnamed benchmarks", their text shown as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specatlas.bench.published import SpecBenchLeaderboard
from specatlas.catalog.citations import public_url, source_text, statistic_label
from specatlas.catalog.schema import Paper
from specatlas.site.catalog import Catalog, short_name

# (shown name, pattern over the record's benchmark text), in display order.
BENCHMARKS = (
    ("Spec-Bench", r"spec-?bench"),
    ("MT-Bench", r"mt-?bench"),
    ("HumanEval", r"human-?eval"),
    ("GSM8K", r"gsm-?8k"),
    ("Alpaca", r"alpaca"),
    ("CNN/DailyMail", r"cnn|daily-?mail"),
    ("XSum", r"xsum"),
    ("MBPP", r"mbpp"),
    ("MATH", r"\bMATH\b"),
    ("WMT", r"\bwmt"),
)
MIXED = "Several or unnamed benchmarks"
# Model families by the first name the target model's text mentions (LLaVA before LLaMA).
FAMILIES = (
    ("LLaVA", r"llava"), ("Vicuna", r"vicuna"), ("Code Llama", r"code-?llama"), ("Llama", r"llama"),
    ("Qwen", r"qwen"), ("Mistral / Mixtral", r"mi[sx]tral"), ("DeepSeek", r"deepseek"), ("Gemma", r"gemma"),
    ("Phi", r"\bphi"), ("OPT", r"\bopt-?\d"), ("T5", r"\bt5\b|\bt5-"), ("GPT", r"\bgpt"), ("GLM", r"\bglm"),
    ("StarCoder", r"starcoder"), ("Chinchilla", r"chinchilla"), ("Whisper", r"whisper"),
)
HARDWARE = (
    ("H100", r"h100|hopper"), ("H200", r"h200"), ("H800", r"h800"), ("A100", r"a100"), ("A800", r"a800"),
    ("A10", r"\ba10\b"), ("A6000", r"a6000"), ("L40", r"\bl40"), ("V100", r"v100"), ("RTX 3090", r"3090"),
    ("RTX 4090", r"4090"), ("AMD MI250", r"mi250"), ("TPU", r"\btpu"), ("Edge device", r"jetson|raspberry|mobile|edge"),
    ("FPGA", r"fpga"), ("CPU", r"\bcpu|intel core|xeon"),
)
NOT_STATED = "not stated"
# 7B, 13B and 33B targets (Spec-Bench's three tables) each in a bucket of their own
SIZE_BUCKETS = ((3, "< 3B"), (10, "3–10B"), (20, "10–20B"), (40, "20–40B"), (float("inf"), "≥ 40B"))
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([bm])\b", re.IGNORECASE)
OWN, THIRD_PARTY = "paper's own", "third party"


@dataclass(frozen=True)
class ResultRow:
    """One reported setting: its speedup and mean accepted tokens when the source gives them,
    or another metric (throughput gain, latency reduction...) as `other`."""

    benchmark: str  # one of BENCHMARKS' names, or MIXED
    benchmark_text: str  # as the source writes it
    method: str  # shown name
    paper_id: str | None  # the method's record, when known
    speedup: float | None
    accepted: float | None
    other: str | None
    target: str
    drafter: str
    hardware: str
    batch: int | None
    temperature: float | None
    source: str  # where in the source
    measured_by: str  # OWN or THIRD_PARTY
    source_name: str  # the reporting paper's title, or the third party's name
    source_id: str | None  # the reporting record's id, when it is one
    paper_title: str | None = None  # the method's paper, when known
    source_url: str | None = None  # the public address the number is read from

    @property
    def family(self) -> str:
        return family(self.target)

    @property
    def size(self) -> str:
        return size_bucket(self.target)

    @property
    def hardware_class(self) -> str:
        return hardware_class(self.hardware)


def _first(table: tuple[tuple[str, str], ...], text: str, flags: int = re.IGNORECASE) -> str | None:
    return next((name for name, pattern in table if re.search(pattern, text, flags)), None)


def benchmark(text: str) -> str:
    names = [name for name, pattern in BENCHMARKS
             if re.search(pattern, text, 0 if name == "MATH" else re.IGNORECASE)]
    return names[0] if len(names) == 1 else MIXED


def family(target: str) -> str:
    return _first(FAMILIES, target) or "other or unspecified"


def billions(target: str) -> float:
    """The parameter count a target model's text states, in billions ("Vicuna-7B" -> 7.0); inf when none."""
    match = _SIZE.search(target)
    return float(match.group(1)) / (1000 if match.group(2).lower() == "m" else 1) if match else float("inf")


def size_bucket(target: str) -> str:
    size = billions(target)
    return NOT_STATED if size == float("inf") else next(label for limit, label in SIZE_BUCKETS if size < limit)


def hardware_class(hardware: str) -> str:
    if hardware in ("", "–"):
        return NOT_STATED
    return _first(HARDWARE, hardware) or "other"


def collect(catalog: Catalog, spec_bench: SpecBenchLeaderboard) -> list[ResultRow]:
    """Every reported number of the catalog (one row per setting), then Spec-Bench's published
    leaderboard."""
    return [row for paper in catalog.papers for row in paper_rows(paper)] + spec_bench_rows(catalog, spec_bench)


def paper_rows(paper: Paper) -> list[ResultRow]:
    """The paper's reported numbers, merging a speedup and a mean-accepted-tokens number given
    for the same setting into one row."""
    merged: dict[tuple, dict] = {}
    for r in paper.reported_results:
        key = (r.benchmark, r.target_model, r.drafter, r.hardware, r.batch_size, r.temperature)
        row = merged.setdefault(key, {"speedup": None, "accepted": None, "other": [], "sources": []})
        if r.metric == "speedup" and row["speedup"] is None:
            row["speedup"] = r.value
        elif r.metric == "mean-accepted-tokens" and row["accepted"] is None:
            row["accepted"] = r.value
        else:
            row["other"].append(f"{r.metric} {r.value:g}{'×' if r.metric in ('speedup', 'throughput-gain') else ''}")
        row["sources"].append(source_text(r))
    name = short_name(paper)
    return [ResultRow(
        benchmark=benchmark(key[0]), benchmark_text=key[0], method=name, paper_id=paper.id,
        speedup=row["speedup"], accepted=row["accepted"], other="; ".join(row["other"]) or None,
        target=key[1], drafter=key[2] or "–", hardware=key[3] or "–", batch=key[4], temperature=key[5],
        source="; ".join(dict.fromkeys(row["sources"])), measured_by=OWN, source_name=paper.title, source_id=paper.id,
        paper_title=paper.title, source_url=public_url(paper),
    ) for key, row in merged.items()]


def spec_bench_rows(catalog: Catalog, data: SpecBenchLeaderboard) -> list[ResultRow]:
    """Spec-Bench's published leaderboard, one row per device, target model and method."""
    by_alias = aliases(catalog)
    reporter = by_alias.get("spec-bench")
    batch = 1 if "batch size 1" in data.settings else None
    out = []
    for r in data.rows:
        method = r["method"]
        paper_id = _paper_for(method, by_alias)
        out.append(ResultRow(
            benchmark="Spec-Bench", benchmark_text="Spec-Bench (overall)", method=method,
            paper_id=paper_id, speedup=r.get("Overall"), accepted=r.get("#Mean Accepted Tokens"), other=None,
            target=r["target_model"], drafter="Spec-Bench's setup for the method",
            hardware=data.hardware.get(r["device"], r["device"]), batch=batch,
            temperature=0.0 if "greedy" in data.settings else None, source=data.source,
            measured_by=THIRD_PARTY, source_name="Spec-Bench leaderboard", source_id=reporter,
            paper_title=catalog.by_id[paper_id].title if paper_id else None, source_url=data.url))
    return out


# Spec-Bench's abbreviations that are not catalog aliases.
SPEC_BENCH_ALIASES = {"recycling": "token-recycling", "samd": "sam-decoding"}


def aliases(catalog: Catalog) -> dict[str, str]:
    """alias -> paper id."""
    return {alias: p.id for p in catalog.papers for alias in p.aliases}


def _paper_for(method: str, by_alias: dict[str, str]) -> str | None:
    """The record of a Spec-Bench method name: 'EAGLE2' -> eagle2, 'SAMD[EAGLE2]' -> sam-decoding."""
    key = method.lower().strip()
    base = re.sub(r"\[.*\]", "", key).strip()
    for candidate in (key, base, SPEC_BENCH_ALIASES.get(base)):
        if candidate in by_alias:
            return by_alias[candidate]
    return None


def components(method: str, by_alias: dict[str, str]) -> list[str]:
    """The records a Spec-Bench method name combines: 'SAMD[EAGLE2]' -> [sam-decoding's, EAGLE-2's]
    (SAM-Decoding falling back to EAGLE-2's drafts): what it needs is what either needs."""
    inner = re.search(r"\[(.*)\]", method)
    ids = [_paper_for(method, by_alias), _paper_for(inner.group(1), by_alias) if inner else None]
    return list(dict.fromkeys(i for i in ids if i))


def best_speedup(paper: Paper) -> tuple[float, str] | None:
    """The paper's highest reported speedup and its setting, for the catalog's Speedup column."""
    speedups = [r for r in paper.reported_results if r.metric == "speedup"]
    if not speedups:
        return None
    best = max(speedups, key=lambda r: r.value)
    setting = ", ".join(x for x in (best.target_model, best.benchmark, best.hardware) if x) + statistic_label(best)
    return best.value, setting
