"""Fuzzing the record loader and validator: whatever bytes a pull request puts in papers/, reading
and validating them never raises, every problem is one line naming a line of the file, and what
validates also renders as BibTeX that parses back to the same entry.

Hypothesis runs derandomized (a fixed seed derived from the test), without a database, so CI sees
the same 1,200 documents every run; SPECATLAS_FUZZ_EXAMPLES raises the count for a longer hunt.
"""

import datetime as dt
import os
from pathlib import Path

import bibtexparser
import yaml
from bibtexparser.middlewares import LatexDecodingMiddleware
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specatlas.catalog import bibtex
from specatlas.catalog.records import Problem, read_record
from specatlas.catalog.taxonomy import load_taxonomy
from specatlas.catalog.validate import _cross_record_problems

REPO = Path(__file__).resolve().parent.parent.parent
BASE = REPO / "tests" / "fixtures" / "base"
EXAMPLES = int(os.environ.get("SPECATLAS_FUZZ_EXAMPLES", "1200"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))

VALID = yaml.safe_load((BASE / "alpha2023drafting.yaml").read_text(encoding="utf-8")) | {
    "id": "gamma2024case", "title": "Gamma Study of Fuzzed Input", "arxiv": "2402.00003", "year": 2024,
    "url": "https://arxiv.org/abs/2402.00003", "aliases": ["gamma"]}

# Text that YAML, BibTeX, Markdown and terminals treat specially.
NASTY = ["{", "}", "\\", "%", "&", "#", "$", "_", "~", "^", "@", ",", "=", '"', "'", ":", "-", "*", "!",
         "\n", "\r", "\t", "\x00", "\x07", "\x1b[31m", "\u202e", "\ufeff", "\ud800", "é", "ü", "—", "𝔘",
         "<script>", "javascript:", "::error::", "2024-02-30", "1e309", "nan", ".inf", "null", "~", "TODO",
         "et al.", "@misc{x,", "},note={", "https://", "10.1000/", "../", "/etc/passwd", " and "]
nasty_text = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=8)), max_size=12).map("".join)
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                    st.floats(allow_nan=True, allow_infinity=True), nasty_text,
                    st.dates(min_value=dt.date(1, 1, 1)), st.sampled_from(["leviathan2023fast", "gamma2024case",
                                                                           "speculative-sampling", "arXiv", "ICML"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                      max_leaves=12)


@st.composite
def mutated_records(draw, max_changes: int = 4) -> str:
    """A valid record with some fields replaced, added or dropped, dumped as YAML."""
    doc = dict(VALID)
    for key in draw(st.lists(st.sampled_from([*VALID, "bibtex", "implementation", "reported_results", "links",
                                              "venue_note", "doi", "pdf", "not_duplicate_of", "extra"]),
                             max_size=max_changes)):
        action = draw(st.sampled_from(["replace", "replace", "drop", "text"]))
        if action == "drop":
            doc.pop(key, None)
        elif action == "text":
            doc[key] = draw(nasty_text)
        else:
            doc[key] = draw(values)
    return yaml.safe_dump(doc, allow_unicode=draw(st.booleans()), sort_keys=False)


# Fragments of YAML syntax, so raw documents reach the parser's and composer's corners.
YAML_BITS = ["\n", "\n  ", "- ", ": ", "? ", "&a ", "*a", "<<: ", "!!binary ", "!!python/name:os.system ",
             "!!set ", "!!timestamp ", "[", "]", "{", "}", ",", "'", '"', "|", ">-", "---\n", "...\n", "%YAML 1.1\n",
             "#", "id", "title", "authors", "year", "taxonomy", "drafting", "2024-02-30", "0x1F", "1_000",
             "2099-13-45 25:61:61", "\t", "\x00", "\ufeff", "\u2028"]
raw_yaml = st.lists(st.one_of(st.sampled_from(YAML_BITS), st.text(max_size=6)), max_size=40).map("".join)


@st.composite
def documents(draw) -> bytes:
    kind = draw(st.sampled_from(["record", "record", "record", "nearly-valid", "raw", "raw", "bytes", "spliced"]))
    if kind in ("record", "nearly-valid"):
        # Nearly valid records (one change) keep the cross-record rules and BibTeX round trip in reach.
        return draw(mutated_records(4 if kind == "record" else 1)).encode("utf-8", "surrogatepass")
    if kind == "raw":
        return draw(raw_yaml).encode("utf-8", "surrogatepass")
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    text = draw(mutated_records())
    cut = draw(st.integers(min_value=0, max_value=len(text)))
    return (text[:cut] + draw(raw_yaml) + text[cut:]).encode("utf-8", "surrogatepass")


def test_loader_and_validator_never_crash_on_generated_documents(tmp_path):
    root = tmp_path / "catalog"
    (root / "papers").mkdir(parents=True)
    taxonomy = load_taxonomy(REPO / "taxonomy")
    base = [read_record(path, BASE)[0] for path in sorted(BASE.glob("*.yaml"))]
    target = root / "papers" / "gamma2024case.yaml"
    seen = {"documents": 0, "valid": 0}

    @FUZZ
    @given(documents())
    def check(data: bytes) -> None:
        seen["documents"] += 1
        target.write_bytes(data)
        record, problems = read_record(target, root)
        lines = len(data.decode("utf-8", "replace").splitlines()) + 1  # YAML also breaks lines at \r, U+2028...
        for problem in problems:
            assert isinstance(problem, Problem)
            assert "\n" not in str(problem) and "\r" not in str(problem), problem
            assert len(str(problem)) < 1000, problem
            assert 1 <= problem.line <= lines, (problem, lines)
        assert (record.paper is None) == bool(problems)
        if record.paper is None:
            return
        seen["valid"] += 1
        for problem in _cross_record_problems([*base, record], taxonomy, dt.date(2026, 12, 1)):
            assert "\n" not in str(problem) and len(str(problem)) < 1000, problem
        # Whatever validates must build, and what builds must round-trip.
        library = bibtexparser.parse_string(bibtex.render([record.paper]), append_middleware=[LatexDecodingMiddleware()])
        assert not library.failed_blocks and len(library.entries) == 1
        assert library.entries[0].key == record.paper.id
        assert library.entries[0]["title"] == record.paper.title

    check()
    assert seen["documents"] >= 1000
    assert seen["valid"] >= 50, "the generator must also reach the validator's cross-record rules"
