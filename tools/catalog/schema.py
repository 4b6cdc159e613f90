"""The paper record schema: the single source of truth for what a record may contain.

`papers/<id>.yaml` holds one `Paper`. Cross-record rules (unique ids, lineage, duplicates,
taxonomy ids) live in `validate.py`; everything checkable on one record alone lives here.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from specatlas.catalog.sources import no_narration, public_addresses
from specatlas.catalog.venues import VENUES

SCHEMA_VERSION = 1

ID_PATTERN = r"^[a-z][a-z0-9]*[0-9]{4}[a-z0-9]+$"
ARXIV_PATTERN = r"^([0-9]{4}\.[0-9]{4,5}|[a-z-]+(\.[A-Z]{2})?/[0-9]{7})$"
# No braces, backslashes or quotes: identifiers are written into BibTeX and HTML as they are.
DOI_PATTERN = r"^10\.[0-9]{4,9}/[^\s{}\\\"\x00-\x1f\x7f]+$"
ALIAS_PATTERN = r"^[a-z0-9][a-z0-9.+-]*$"
NODE_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"

# Caps on sizes keep a hostile record from costing minutes (the near-duplicate check compares
# titles pairwise); real records are far below them (the longest title has 172 characters).
MAX_LINE = 300
MAX_NOTE = 600
MAX_URL = 2000


def _one_line(value: str | None) -> str | None:
    """Text shown on one line (titles, names, notes): no control or bidirectional-override
    characters, which could break a line in reports or reverse what a reader sees, and balanced
    braces, without which BibTeX cannot hold the value even escaped."""
    if value and ("{" in value or "}" in value):
        depth = 0
        for char in value:
            depth += {"{": 1, "}": -1}.get(char, 0)
            if depth < 0:
                break
        if depth:
            raise ValueError("has an unbalanced '{' or '}'; BibTeX cannot store it")
    return _no_controls(value, _CONTROL)


def _prose(value: str | None) -> str | None:
    """Summaries and notes: one line too (a line break would end a table cell or start a block on
    a page), but never written into BibTeX, so braces need not balance."""
    return _no_controls(value, _CONTROL)


# C0 and C1 controls, lone surrogates, the line and paragraph separators (U+2028, U+2029: many
# readers break lines there), and the bidirectional marks and overrides.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
# What no string of a record holds, whatever its field (identifiers and URLs included).
_CONTROL_ANYWHERE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


def _no_controls(value: str | None, pattern: re.Pattern) -> str | None:
    found = pattern.search(value or "")
    if found:
        fold = " (a YAML '>-' block folds its lines into one)" if found.group() == "\n" else ""
        raise ValueError(f"contains the control character U+{ord(found.group()):04X}; write plain text on one line{fold}")
    return value


# Characters that show nothing (zero-width spaces and joiners, word joiners, byte-order mark) or
# reorder what follows (bidirectional marks): in a name, DOI or URL they make two different
# strings look the same, so what names something is written in visible characters only.
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _visible(value: str | None) -> str | None:
    found = _INVISIBLE.search(value or "")
    if found:
        raise ValueError(f"contains the invisible character U+{ord(found.group()):04X}; names, DOIs and URLs "
                         "are written in visible characters only")
    return value


Line = Annotated[str, Field(max_length=MAX_LINE), AfterValidator(_one_line)]
Note = Annotated[str, Field(max_length=MAX_NOTE), AfterValidator(_prose)]
# Text that says where a fact stands (a result's source and note, an engine's note): cited, never narrated.
CitedLine = Annotated[Line, AfterValidator(no_narration)]
CitedNote = Annotated[Note, AfterValidator(no_narration)]
HttpsUrl = Annotated[str, Field(pattern=r"^https://[^\s<>\"'{}\\\x00-\x1f\x7f]+$", max_length=MAX_URL,
                                description="An https:// URL."), AfterValidator(_visible)]
NodeId = Annotated[str, Field(pattern=NODE_PATTERN)]
PaperId = Annotated[str, Field(pattern=ID_PATTERN)]
VenueKey = Literal[tuple(VENUES)]  # type: ignore[valid-type]

Metric = Literal[
    "speedup",  # wall-clock speedup over autoregressive decoding (x)
    "mean-accepted-tokens",  # tokens committed per target forward (Spec-Bench's tau)
    "acceptance-rate",  # fraction of drafted tokens accepted (0-1)
    "throughput",  # tokens per second
    "throughput-gain",  # serving throughput over a baseline (x)
    "latency-reduction",  # fraction of latency removed (0-1)
    "memory-overhead",
]

# How a reported number aggregates the paper's settings: the reader must not compare a best case with
# a typical one. "mean": the paper's average over a benchmark (or over its benchmarks), e.g. a table's
# Mean/Overall column or "on average"; "up-to": the best of several settings, as in an abstract's "up to
# 3.6x" (also a range's upper end); "setting": one number for one stated setting (one model, benchmark
# and hardware, e.g. a single table cell); "unqualified": a headline number whose aggregation the
# source does not say.
Statistic = Literal["mean", "up-to", "setting", "unqualified"]
STATISTIC_LABELS = {"mean": "benchmark mean", "up-to": "up to (best setting)", "setting": "one setting",
                    "unqualified": "headline, aggregation not stated"}
_UP_TO = re.compile(r"\bup\s*to\b|\bas much as\b", re.IGNORECASE)

# Why a record has no reported result. Every reason but 'not-yet-recorded' says the paper has no headline
# speed number to copy; 'not-yet-recorded' is a gap in the catalog, counted by `specatlas stats`.
NO_RESULT_REASONS = {
    "survey": "a survey, tutorial or reading list",
    "theory": "theoretical analysis without a decoding-speed measurement",
    "position": "a position or perspective paper",
    "benchmark": "a benchmark, dataset or evaluation suite",
    "analysis": "an empirical study of existing methods, no new method",
    "no-speed-metric": "experiments report only metrics the schema does not hold (quality, energy, cost)",
    "not-yet-recorded": "the paper reports a result that the catalog has not copied yet (a gap)",
}
NoResultReason = Literal[tuple(NO_RESULT_REASONS)]  # type: ignore[valid-type]
RESULT_GAP = "not-yet-recorded"

FRACTION_METRICS = ("acceptance-rate", "latency-reduction")
RATIO_METRICS = ("speedup", "throughput-gain")

_HTML = re.compile(r"<\s*/?\s*[a-zA-Z!][^>]*>|javascript:|\bon[a-z]+\s*=", re.IGNORECASE)


def no_markup(value: str | None) -> str | None:
    """Free text (titles, names, summaries) holds no HTML tags, script URLs or event handlers."""
    if value and _HTML.search(value):
        raise ValueError("contains HTML or script markup; write plain text (Markdown emphasis is fine)")
    return value


# A record's title and author names, as the record holds them and `specatlas new` takes them.
Title = Annotated[str, Field(min_length=4, max_length=MAX_LINE), AfterValidator(_one_line), AfterValidator(no_markup)]
AuthorName = Annotated[str, Field(min_length=2, max_length=MAX_LINE), AfterValidator(_one_line), AfterValidator(_visible),
                       AfterValidator(no_markup)]


class _Strict(BaseModel):
    """Unknown fields are refused, and every value is strict: pydantic would otherwise read 'on',
    'yes' or 1 as true and the text '2024' as 2024."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _no_hidden_characters(cls, data):
        """Every string of the record, identifiers and URLs included, is free of control characters
        and line separators (at its ends they are stripped like spaces); bidirectional marks are
        each field's own rule (text calls them controls, names and URLs invisible characters)."""
        for key, value in data.items() if isinstance(data, dict) else ():
            for where, text in _strings(value, str(key)):
                try:
                    _no_controls(text.strip(), _CONTROL_ANYWHERE)
                except ValueError as exc:
                    raise ValueError(f"{where}: {exc}") from None
        return data


def _strings(value, where: str):
    """(place, text) for every string in a raw value, lists and mappings (nested models) walked:
    'reported_results[0].note'."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")


class TaxonomyTags(_Strict):
    """Tags on the survey's three axes plus what the work targets. Ids are nodes of
    taxonomy/<facet>.yaml."""

    drafting: list[NodeId] = Field(default_factory=list, description="How drafts are made.")
    verification: list[NodeId] = Field(default_factory=list, description="How drafts are verified.")
    alignment: list[NodeId] = Field(default_factory=list, description="How drafter and target are aligned.")
    scope: list[NodeId] = Field(default_factory=list, description="What the work targets.")


class ReportedResult(_Strict):
    """One number as the paper reports it. Copy it exactly; say where it stands."""

    metric: Metric
    value: float = Field(allow_inf_nan=False)
    target_model: Line = Field(min_length=1)
    drafter: Line | None = Field(None, description="Draft model or drafting setup; null when the method drafts itself.")
    hardware: Line | None = None
    benchmark: Line = Field(min_length=1, description="Benchmark or dataset, e.g. MT-Bench, Spec-Bench, GSM8K.")
    temperature: float | None = Field(None, ge=0, allow_inf_nan=False)
    batch_size: int | None = Field(None, ge=1, le=1_000_000)
    baseline: Line | None = Field(None, description="What a speedup or gain is measured against when it is not autoregressive decoding of the same target, e.g. 'EAGLE-2', 'MTP-1 production serving'. Null: plain autoregressive decoding.")
    source: CitedLine = Field(min_length=1, description="Where in the paper: 'Table 2', 'Figure 4', 'Abstract'.")
    statistic: Statistic | None = Field(None, description="How the number aggregates the paper's settings: 'mean' (a benchmark average), 'up-to' (the best of several settings, an 'up to' claim), 'setting' (one stated setting), 'unqualified' (a headline number whose aggregation the source does not say). Every result in the catalog says it.")
    note: CitedNote | None = None

    @model_validator(mode="after")
    def _value_in_range(self) -> "ReportedResult":
        if self.metric in FRACTION_METRICS and not 0 <= self.value <= 1:
            raise ValueError(f"value: {self.metric} is a fraction in [0, 1]; write {self.value / 100:g} for {self.value:g}%")
        if self.metric in RATIO_METRICS and self.value <= 0:
            raise ValueError(f"value: a {self.metric} is a ratio of two speeds, above 0 (1 = no change), not {self.value:g}")
        if self.statistic in ("mean", "setting") and _UP_TO.search(f"{self.source} {self.note or ''}"):
            raise ValueError(f"statistic: is '{self.statistic}', but the source or note calls the number an 'up to' "
                             "figure (the best of several settings); write statistic: up-to")
        if self.metric == "mean-accepted-tokens" and self.value < 1:
            raise ValueError(f"value: every verification step commits at least 1 token, so mean-accepted-tokens "
                             f"is at least 1, not {self.value:g}")
        return self


class LosslessVariant(_Strict):
    """One variant of a method (a verification rule, a training mode) and whether it is lossless.
    Lossless always means: the output distribution of the *unmodified* target model (greedy:
    its identical output). A variant that fine-tunes the target's own weights is compared with the
    original target, so it is not lossless even if it reproduces the fine-tuned model exactly; the same
    holds for a quantized copy of the target that verifies in the original's place."""

    variant: Line = Field(min_length=2, description="The variant as the paper names it, e.g. 'exact verification', 'typical acceptance', 'Medusa-2 (backbone fine-tuned)'.")
    lossless: bool = Field(description="true when this variant provably keeps the unmodified target's output distribution.")
    modifies_target: bool = Field(False, description="true when this variant trains or fine-tunes the target's own weights; it then cannot be lossless, and the record is tagged target-fine-tuning on the alignment axis.")
    quantized_target: bool = Field(False, description="true when this variant verifies with a quantized copy of the target (lower-precision weights, activations or KV cache) that is served in place of the original: its output is exactly the quantized model's, not the unmodified target's, so it cannot be lossless. A quantized copy that only drafts, with the original model verifying, leaves this false.")
    note: CitedNote | None = None


Engine = Literal["vllm", "sglang", "tensorrt-llm", "transformers", "llama.cpp", "mlx-lm"]
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt-llm": "TensorRT-LLM", "transformers": "transformers",
                "llama.cpp": "llama.cpp", "mlx-lm": "MLX LM"}  # as the engines spell themselves, for pages


class EngineSupport(_Strict):
    """A serving engine or library that ships the method, as a fact with the page that says so."""

    engine: Engine
    feature: Line = Field(min_length=2, description="The engine's own name for the method, e.g. 'EAGLE-3', 'Prompt lookup decoding'.")
    option: Line = Field(min_length=2, description="The setting that switches it on, as the engine spells it, e.g. '--speculative-algorithm EAGLE3', 'speculative_config={method: eagle3}', 'generate(assistant_model=...)'.")
    version: Line = Field(min_length=2, description="The engine release or commit whose documentation or source was read, e.g. 'v0.11.0', 'commit 002e77c'; option names change between versions.")
    source: HttpsUrl = Field(description="The engine's documentation or source page that states the support, at that version where the page allows it.")
    note: CitedNote | None = None


class BibtexOverrides(_Strict):
    """Fields that replace what the BibTeX generator derives from the record."""

    entry_type: Literal["article", "inproceedings", "misc", "techreport", "online"] | None = None
    booktitle: Line | None = None
    journal: Line | None = None
    volume: Line | None = None
    number: Line | None = None
    pages: Line | None = None
    publisher: Line | None = None
    note: Line | None = None


class Paper(_Strict):
    """A paper (or blog post, tutorial, software release) about speculative decoding."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, strict=True, title="SpecAtlas paper record")

    id: PaperId = Field(description="Immutable BibTeX key, e.g. leviathan2023fast: first author's surname, year, first content word of the title. Never change it once merged.")
    kind: Literal["paper", "blog", "software", "tutorial"] = "paper"
    title: Title = Field(description="Exact title, as in the paper.")
    authors: list[AuthorName] = Field(min_length=1, description="Full names in paper order.")
    year: int = Field(ge=1990, le=2999, description="Year of the cited version: the venue's year, or the first arXiv posting for preprints. The timeline uses the arXiv id's month when there is one.")
    month: int | None = Field(None, ge=1, le=12, description="Month of the cited version (conference month, or first arXiv posting for preprints).")
    venue: VenueKey = Field(description="Controlled venue key; 'arXiv' for preprints.")
    venue_note: Line | None = Field(None, description="Track, workshop name or award, e.g. 'ES-FoMo workshop', 'Oral'.")
    arxiv: Annotated[str, Field(pattern=ARXIV_PATTERN)] | None = Field(None, description="arXiv id without version, quoted: '2302.01318'.")
    doi: Annotated[str, Field(pattern=DOI_PATTERN), AfterValidator(_visible)] | None = None
    url: HttpsUrl | None = Field(None, description="Canonical landing page (publisher, anthology, OpenReview or arXiv abs).")
    pdf: HttpsUrl | None = None
    code: list[HttpsUrl] = Field(default_factory=list, description="Official code repositories.")
    links: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")], HttpsUrl] = Field(default_factory=dict, description="Other links: homepage, blog, slides, video, models.")
    aliases: list[Annotated[str, Field(pattern=ALIAS_PATTERN, max_length=64)]] = Field(default_factory=list, description="Short method names users type: eagle, medusa, pld.")
    previous_titles: list[Annotated[Line, Field(min_length=4)]] = Field(default_factory=list, description="Earlier titles of the same paper (usually the arXiv preprint's) when the cited version was renamed; kept so searches and citations by the old title still find it.")
    taxonomy: TaxonomyTags
    lossless: bool | None = Field(description="true when the output distribution provably equals the unmodified target's in every variant the paper proposes; false when any variant relaxes acceptance, approximates, changes the target's weights or verifies with a quantized replacement of the target (then say which variants are lossless in lossless_variants); null when not a decoding method.")
    lossless_variants: list[LosslessVariant] = Field(default_factory=list, description="Per-variant losslessness when the paper's variants differ, e.g. exact verification (lossless) and typical acceptance (not).")
    builds_on: list[PaperId] = Field(default_factory=list, description="Ids of cataloged papers this work extends.")
    not_duplicate_of: list[PaperId] = Field(default_factory=list, description="Ids of records whose titles are nearly identical but that are different papers.")
    summary: Annotated[str, AfterValidator(_prose)] = Field(min_length=40, max_length=900, description="1-4 sentences in our own words. No HTML.")
    reported_results: list[ReportedResult] = Field(default_factory=list)
    serving_engines: list[EngineSupport] = Field(default_factory=list, description="Serving engines and libraries (vLLM, SGLang, TensorRT-LLM, transformers, llama.cpp, MLX LM) that implement the method, each with the page that says so; one entry per engine.")
    implementation: Annotated[str, Field(pattern=ID_PATTERN)] | None = Field(
        None, description="Registry id of the reference implementation, once one exists: the record's own id.")
    bibtex: BibtexOverrides | None = None
    no_result_reason: NoResultReason | None = Field(None, description="Why reported_results is empty: " + "; ".join(f"'{k}': {v}" for k, v in NO_RESULT_REASONS.items()) + ". A method record (drafting or verification tags, not a survey, analysis or benchmark) needs a result or this reason; a record with results leaves it out.")
    found_via: Annotated[str, AfterValidator(_prose), AfterValidator(public_addresses)] | None = Field(None, min_length=8, max_length=400, description="The public addresses that confirm the record's facts (arXiv, proceedings, repository, project page), each an https:// URL optionally after a short label, several separated by '; ', e.g. 'paper list: https://github.com/hemingkx/SpeculativeDecodingPapers; https://arxiv.org/abs/2606.02091'. Never how they were looked up. Optional; new records should give it.")

    @field_validator("summary", "venue_note")
    @classmethod
    def _no_markup(cls, value: str | None) -> str | None:
        return no_markup(value)

    @field_validator("previous_titles")
    @classmethod
    def _no_markup_in_titles(cls, value: list[str]) -> list[str]:
        for title in value:
            no_markup(title)
        return value

    @field_validator("summary")
    @classmethod
    def _sentence_count(cls, value: str) -> str:
        if "TODO" in value:
            raise ValueError("still holds the scaffold's TODO; write 1-4 sentences in your own words")
        sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])", value.strip()) if s]
        if len(sentences) > 4:
            raise ValueError(f"has {len(sentences)} sentences; keep it to 1-4")
        return value

    @field_validator("authors")
    @classmethod
    def _real_authors(cls, value: list[str]) -> list[str]:
        for name in value:
            if "et al" in name.lower():
                raise ValueError(f"'{name}': list every author instead of 'et al.'")
        if len(set(value)) != len(value):
            raise ValueError("the same author is listed twice")
        return value

    @field_validator("aliases", "code", "builds_on", "not_duplicate_of", "previous_titles")
    @classmethod
    def _no_repeats(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("has a repeated entry")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "Paper":
        if self.id in self.builds_on:
            raise ValueError("builds_on: a paper cannot build on itself")
        # Ids are minted once (often from the preprint) and never change, so a paper published
        # later keeps its older year: the id's year may precede the record's, never follow it.
        id_year = int(re.search(r"[0-9]{4}", self.id).group())
        if id_year > self.year:
            raise ValueError(f"id: '{self.id}' has year {id_year}, after the record's year {self.year}")
        if self.implementation and self.implementation != self.id:
            raise ValueError(f"implementation: reference implementations are registered under their paper's id; "
                             f"write implementation: {self.id}")
        engines = [support.engine for support in self.serving_engines]
        if len(set(engines)) != len(engines):
            repeated = next(e for e in engines if engines.count(e) > 1)
            raise ValueError(f"serving_engines: '{repeated}' is listed twice; give one entry per engine (name every feature in it)")
        if self.serving_engines and self.lossless is None:
            raise ValueError("serving_engines: an engine implements a decoding method, but lossless is null (not a decoding method)")
        if self.no_result_reason and self.reported_results:
            raise ValueError(f"no_result_reason: is '{self.no_result_reason}', but reported_results lists results; drop the reason")
        if self.venue == "arXiv" and not self.arxiv and not self.url:
            raise ValueError("arxiv: an arXiv preprint needs its arxiv id or a url")
        return self


def json_schema() -> dict:
    schema = Paper.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://specatlas.dev/schema/paper-v{SCHEMA_VERSION}.json"
    return schema
