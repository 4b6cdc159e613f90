"""`specatlas new --arxiv/--doi`: parsing of recorded arXiv, Semantic Scholar, DBLP and Crossref
responses, the published-venue decision, and the scaffold it fills. No network: every request
goes to a replayer of tests/fixtures/metadata/."""

import datetime as dt
from pathlib import Path

import pytest
import yaml

from specatlas import cli
from specatlas.catalog import metadata
from specatlas.catalog.metadata import MetadataError, Offline
from specatlas.catalog.venue_names import venue_key
from specatlas.catalog.records import read_record

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "metadata"


class Replay:
    """A `Fetch` answering from recorded files by URL prefix; anything else is a test failure."""

    def __init__(self, routes: dict[str, str | Exception]):
        self.routes, self.asked = routes, []

    def __call__(self, url: str) -> bytes:
        self.asked.append(url)
        for prefix, answer in self.routes.items():
            if url.startswith(prefix):
                if isinstance(answer, Exception):
                    raise answer
                return (RECORDED / answer).read_bytes()
        raise AssertionError(f"unexpected request {url}")


ARXIV = "https://export.arxiv.org/api/query?id_list="
S2 = "https://api.semanticscholar.org/graph/v1/paper/"
DBLP = "https://dblp.org/search/publ/api?"
CROSSREF = "https://api.crossref.org/works/"

MEDUSA = {ARXIV + "2401.10774": "arxiv_2401.10774.xml", S2 + "arXiv:2401.10774": "s2_arxiv_2401.10774.json", DBLP: "dblp_medusa.json"}
MCSD = {ARXIV + "2401.06706": "arxiv_2401.06706.xml", S2 + "arXiv:2401.06706": "s2_arxiv_2401.06706.json", DBLP: "dblp_mcsd.json"}
CLASP = {CROSSREF + "10.18653/v1/2025.acl-long.1525": "crossref_10.18653_v1_2025.acl-long.1525.json",
         S2 + "DOI:10.18653/v1/2025.acl-long.1525": "s2_doi_clasp.json", ARXIV + "2505.24196": "arxiv_2505.24196.xml"}


def test_arxiv_atom_is_parsed_exactly():
    entries, total = metadata.parse_arxiv_feed((RECORDED / "arxiv_2401.10774.xml").read_bytes())
    assert total == 1 and len(entries) == 1
    entry = entries[0]
    assert (entry.arxiv_id, entry.version) == ("2401.10774", 3)
    assert entry.title == "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads"  # wrapped line joined
    assert entry.authors == ["Tianle Cai", "Yuhong Li", "Zhengyang Geng", "Hongwu Peng", "Jason D. Lee", "Deming Chen", "Tri Dao"]
    assert entry.published == dt.date(2024, 1, 19) and entry.updated == dt.date(2024, 6, 14)
    assert entry.primary_category == "cs.LG" and entry.categories == ["cs.LG", "cs.CL"]
    assert entry.doi == "10.48550/arXiv.2401.10774"
    assert entry.abstract.startswith("Large Language Models (LLMs) employ") and "\n" not in entry.abstract


def test_arxiv_failures_answered_with_http_200_are_errors():
    with pytest.raises(MetadataError, match="incorrect id format for 2401.1077"):
        metadata.parse_arxiv_feed((RECORDED / "arxiv_error.xml").read_bytes())
    with pytest.raises(MetadataError, match="not an Atom feed: 'Rate exceeded.'"):
        metadata.parse_arxiv_feed(b"Rate exceeded.")
    with pytest.raises(MetadataError, match="arXiv has no paper 2612.99999"):
        metadata.fetch_arxiv("2612.99999", Replay({ARXIV: "arxiv_empty.xml"}))


def test_code_links_from_comment_and_abstract():
    assert metadata.code_links("Code: https://github.com/FasterDecoding/Medusa.", "see http://www.github.com/a/b.git, and https://github.com/FasterDecoding/medusa") == [
        "https://github.com/FasterDecoding/Medusa", "https://github.com/a/b"]
    assert metadata.code_links("no code", "") == []


@pytest.mark.parametrize("name, key", [
    ("ICML", "ICML"),
    ("ACL (1)", "ACL"),
    ("ACL (Findings)", "ACL-Findings"),
    ("EMNLP (Findings)", "EMNLP-Findings"),
    ("Findings of the Association for Computational Linguistics: EMNLP 2024", "EMNLP-Findings"),
    ("Findings of the Association for Computational Linguistics ACL 2024", "ACL-Findings"),
    ("International Conference on Machine Learning", "ICML"),
    ("Neural Information Processing Systems", "NeurIPS"),
    ("Advances in Neural Information Processing Systems 36", "NeurIPS"),
    ("Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics (Volume 1: Long Papers)", "ACL"),
    ("Proceedings of the 2024 Conference on Empirical Methods in Natural Language Processing", "EMNLP"),
    ("NAACL-HLT (1)", "NAACL"),
    ("ICASSP 2024 - 2024 IEEE International Conference on Acoustics, Speech and Signal Processing (ICASSP)", "ICASSP"),
    ("Trans. Mach. Learn. Res.", "TMLR"),
    ("Proceedings of the AAAI Conference on Artificial Intelligence", "AAAI"),
    ("Forty-first International Conference on Machine Learning", "ICML"),
    ("Thirty-seventh Conference on Neural Information Processing Systems", "NeurIPS"),
    ("Proceedings of the 2025 Conference of the Nations of the Americas Chapter of the Association for Computational Linguistics: "
     "Human Language Technologies (Volume 1: Long Papers)", "NAACL"),
    ("ES-FoMo@ICML", "ICML-Workshop"),
    ("NeurIPS 2024 Workshop on Efficient Natural Language and Speech Processing", "NeurIPS-Workshop"),
    ("CoRR", "arXiv"),
    ("arXiv.org", "arXiv"),
    ("International Conference on Machine Learning and Applications", None),
    ("Findings of the Association for Computational Linguistics", None),  # which one? refuse to guess
    ("", None),
])
def test_venue_names_map_onto_the_controlled_list(name, key):
    assert venue_key(name) == key


@pytest.mark.parametrize("comment, journal_ref, stated", [
    ("Accepted to ICLR 2025", "", ("ICLR", 2025)),
    ("Accepted at Findings of ACL 2024. 12 pages", "", ("ACL-Findings", 2024)),
    ("Accepted at the ES-FoMo workshop at ICML 2024", "", ("ICML-Workshop", 2024)),
    ("12 pages, 5 figures; tokens accepted per step in Table 2", "", None),
    ("", "Proceedings of the 41st International Conference on Machine Learning, PMLR 235, 2024", ("ICML", 2024)),
])
def test_venue_stated_in_the_arxiv_comment(comment, journal_ref, stated):
    entry = metadata.parse_arxiv_feed((RECORDED / "arxiv_2401.06706.xml").read_bytes())[0][0]
    entry.comment, entry.journal_ref = comment, journal_ref
    assert metadata._comment_venue(entry) == stated


def test_published_paper_takes_the_venue_version_from_dblp():
    fetch = Replay(MEDUSA)
    meta = metadata.from_arxiv("https://arxiv.org/abs/2401.10774v3", fetch)
    assert meta.venue == "ICML" and meta.year == 2024 and meta.month is None
    assert meta.url == "https://proceedings.mlr.press/v235/cai24b.html"  # the proceedings page, not arXiv
    assert meta.pdf == "https://arxiv.org/pdf/2401.10774" and meta.arxiv == "2401.10774"
    assert meta.authors[0] == "Tianle Cai" and len(meta.authors) == 7  # DBLP's '0001' dropped
    assert meta.code == ["https://github.com/FasterDecoding/Medusa"]
    assert meta.doi is None  # arXiv's own 10.48550 DOI is not the paper's DOI
    assert meta.previous_title is None
    assert any("conf/icml/CaiLGPLCD24" in s for s in meta.sources)
    assert len(fetch.asked) == 3


def test_main_track_beats_a_workshop_version(tmp_path):
    workshop_first = (RECORDED / "dblp_medusa.json").read_text(encoding="utf-8").replace(
        '"hit": [', '"hit": [{"@score": "12", "info": {"authors": {"author": [{"text": "Tianle Cai 0001"}]}, '
        '"title": "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads.", "venue": "ES-FoMo@ICML", '
        '"year": "2025", "type": "Conference and Workshop Papers", "key": "conf/icml/Workshop25"}},', 1)
    (tmp_path / "dblp.json").write_text(workshop_first, encoding="utf-8")
    meta = metadata.from_arxiv("2401.10774", Replay({**MEDUSA, DBLP: str(tmp_path / "dblp.json")}))
    assert meta.venue == "ICML" and meta.year == 2024


def test_acl_dois_lead_to_the_anthology_page():
    hit = '{"result": {"hits": {"hit": [{"info": {"title": "T.", "venue": "ACL (Findings)", "year": "2024", "type": "Conference and Workshop Papers", "doi": "10.18653/V1/2024.FINDINGS-ACL.456", "ee": "https://doi.org/10.18653/v1/2024.findings-acl.456"}}]}}}'
    (parsed,) = metadata.parse_dblp(hit.encode())
    assert parsed.doi == "10.18653/v1/2024.findings-acl.456" and parsed.authors == [] and not parsed.preprint
    assert metadata._landing_page(parsed.doi, parsed.ee) == "https://aclanthology.org/2024.findings-acl.456/"
    assert metadata._landing_page(None, "http://papers.nips.cc/paper_files/paper/2023/hash/x-Abstract-Conference.html") == (
        "https://papers.nips.cc/paper_files/paper/2023/hash/x-Abstract-Conference.html")


def test_preprint_stays_arxiv_with_its_first_posting_date():
    meta = metadata.from_arxiv("2401.06706", Replay(MCSD))
    assert (meta.venue, meta.year, meta.month) == ("arXiv", 2024, 1)
    assert meta.url == "https://arxiv.org/abs/2401.06706" and meta.code == ["https://github.com/NJUNLP/MCSD"]
    assert meta.authors == ["Sen Yang", "Shujian Huang", "Xinyu Dai", "Jiajun Chen"]


def test_optional_sources_failing_leave_a_note_not_an_error():
    meta = metadata.from_arxiv("2401.06706", Replay({ARXIV: "arxiv_2401.06706.xml", S2: MetadataError("api.semanticscholar.org answered HTTP 429 Too Many Requests"),
                                                      DBLP: Offline("cannot reach dblp.org (timed out)")}))
    assert meta.venue == "arXiv" and meta.title == "Multi-Candidate Speculative Decoding"
    assert any("HTTP 429" in n for n in meta.notes) and any("dblp.org" in n for n in meta.notes)


def test_comment_names_the_venue_when_the_indexes_do_not():
    meta = metadata.from_arxiv("2505.24196", Replay({ARXIV: "arxiv_2505.24196.xml", S2: MetadataError("not found"), DBLP: "dblp_mcsd.json"}))
    assert meta.venue == "ACL" and meta.year == 2025
    assert any("arXiv comment" in n for n in meta.notes)


def test_doi_via_crossref_with_the_arxiv_version():
    meta = metadata.from_doi("https://doi.org/10.18653/v1/2025.acl-long.1525", Replay(CLASP))
    assert meta.title == "CLaSp: In-Context Layer Skip for Self-Speculative Decoding"
    assert meta.authors[-2:] == ["Hamid Alinejad-Rokny", "Min Yang"] and len(meta.authors) == 9
    assert (meta.venue, meta.year, meta.month) == ("ACL", 2025, 7)
    assert meta.url == "https://aclanthology.org/2025.acl-long.1525/"
    assert meta.pdf == "https://aclanthology.org/2025.acl-long.1525.pdf"
    assert meta.doi == "10.18653/v1/2025.acl-long.1525" and meta.arxiv == "2505.24196"


def test_an_arxiv_doi_is_looked_up_on_arxiv():
    meta = metadata.from_doi("10.48550/arXiv.2401.06706", Replay(MCSD))
    assert meta.arxiv == "2401.06706" and meta.venue == "arXiv" and meta.doi is None


def _new(argv, tmp_path, monkeypatch, fetch):
    monkeypatch.setattr(metadata, "http_get", fetch)
    return cli.main(["new", *argv, "--dir", str(tmp_path)])


def test_new_from_arxiv_writes_a_record_that_only_lacks_its_summary_and_tags(tmp_path, monkeypatch, capsys):
    assert _new(["--arxiv", "2401.10774"], tmp_path, monkeypatch, Replay(MEDUSA)) == 0
    path = tmp_path / "cai2024medusa.yaml"
    record = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert record["venue"] == "ICML" and record["arxiv"] == "2401.10774"
    assert record["url"] == "https://proceedings.mlr.press/v235/cai24b.html"
    assert record["pdf"] == "https://arxiv.org/pdf/2401.10774"
    assert record["code"] == ["https://github.com/FasterDecoding/Medusa"] and record["found_via"].startswith("arXiv: https://arxiv.org/abs/2401.10774v")
    assert "abstract (read it" in capsys.readouterr().err
    _, problems = read_record(path)
    assert [p.field for p in problems] == ["summary"] and "TODO" in problems[0].message


def test_a_paper_already_in_the_catalog_is_not_scaffolded_twice(tmp_path, monkeypatch, capsys):
    (tmp_path / "cai2024medusa.yaml").write_text("id: cai2024medusa\ntitle: Something Else\narxiv: '2401.10774'\n", encoding="utf-8")
    assert _new(["--arxiv", "2401.10774"], tmp_path, monkeypatch, Replay(MEDUSA)) == 1
    assert f"already in the catalog: {tmp_path.name}/cai2024medusa.yaml; edit that record" in capsys.readouterr().err
    (tmp_path / "cai2024medusa.yaml").write_text("id: cai2024medusa\ntitle: Something Else\n"
                                                  "previous_titles: ['Medusa: simple LLM inference acceleration framework with multiple decoding heads']\n", encoding="utf-8")
    assert _new(["--arxiv", "2401.10774"], tmp_path, monkeypatch, Replay(MEDUSA)) == 1  # by a previous title
    assert len(list(tmp_path.glob("*.yaml"))) == 1


def test_flags_win_over_fetched_facts(tmp_path, monkeypatch):
    assert _new(["--arxiv", "2401.10774", "--venue", "ICML-Workshop", "--code", "https://github.com/x/y"], tmp_path, monkeypatch, Replay(MEDUSA)) == 0
    text = (tmp_path / "cai2024medusa.yaml").read_text(encoding="utf-8")
    assert "venue: ICML-Workshop" in text and 'code: ["https://github.com/x/y"]' in text


def test_renamed_published_version_keeps_the_preprint_title(tmp_path, monkeypatch):
    renamed = (RECORDED / "dblp_medusa.json").read_text(encoding="utf-8").replace(
        'Framework with Multiple Decoding Heads.", "venue": "ICML"', 'Framework.", "venue": "ICML"')
    (tmp_path / "dblp_renamed.json").write_text(renamed, encoding="utf-8")
    s2 = (RECORDED / "s2_arxiv_2401.10774.json").read_text(encoding="utf-8").replace("Framework with Multiple Decoding Heads", "Framework")
    (tmp_path / "s2_renamed.json").write_text(s2, encoding="utf-8")
    routes = {**MEDUSA, S2 + "arXiv:2401.10774": str(tmp_path / "s2_renamed.json"), DBLP: str(tmp_path / "dblp_renamed.json")}
    meta = metadata.from_arxiv("2401.10774", Replay(routes))
    assert meta.title == "Medusa: Simple LLM Inference Acceleration Framework"
    assert meta.previous_title == "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads"


def test_offline_gives_one_line_and_the_manual_path(tmp_path, monkeypatch, capsys):
    status = _new(["--arxiv", "2401.10774"], tmp_path, monkeypatch, Replay({ARXIV: Offline("cannot reach export.arxiv.org ([Errno -3] Temporary failure in name resolution)")}))
    err = capsys.readouterr().err
    assert status == 2 and not list(tmp_path.glob("*.yaml"))
    assert err.count("\n") == 1 and "offline?" in err and 'specatlas new --title "..."' in err and "Traceback" not in err


def test_offline_flag_never_asks_the_network(tmp_path, monkeypatch, capsys):
    status = _new(["--arxiv", "2401.10774", "--offline"], tmp_path, monkeypatch, Replay({}))
    assert status == 2 and "missing --title, --authors, --year, --venue" in capsys.readouterr().err


def test_http_get_turns_failures_into_one_line_errors(serve, refused_url):
    """The real fetcher on 127.0.0.1: a body, an HTTP error, and a refused connection."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<feed/>" if self.path == "/ok" else b"busy"
            self.send_response(200 if self.path == "/ok" else 503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    base = serve(Handler)
    assert metadata.http_get(f"{base}/ok", timeout=5) == b"<feed/>"
    with pytest.raises(MetadataError, match="127.0.0.1 answered HTTP 503") as raised:
        metadata.http_get(f"{base}/busy", timeout=5)
    assert not isinstance(raised.value, Offline)
    with pytest.raises(Offline, match="cannot reach 127.0.0.1"):
        metadata.http_get(refused_url, timeout=5)


def test_an_entry_without_a_readable_date_or_id_is_an_error_or_named_and_skipped():
    feed = (RECORDED / "arxiv_2401.10774.xml").read_bytes()
    undated = feed.replace(b"<published>2024-01-19", b"<published>2024-02-30")
    with pytest.raises(MetadataError, match="published date '2024-02-30T.*' is not a date"):
        metadata.parse_arxiv_feed(undated)
    skipped = []
    assert metadata.parse_arxiv_feed(undated, skipped) == ([], 1)
    assert len(skipped) == 1 and skipped[0].startswith("entry 1 (http://arxiv.org/abs/2401.10774v3) published date '2024-02-30")
    skipped = []
    assert metadata.parse_arxiv_feed(feed.replace(b"abs/2401.10774v3", b"abs/garbage"), skipped)[0] == []
    assert "'http://arxiv.org/abs/garbage' is not an arXiv id" in skipped[0]


def test_a_feed_that_is_not_atom_is_refused_not_read_as_empty():
    for document, root in ((b'<rss version="2.0"><channel/></rss>', "<rss>"),
                           (b'<html xmlns="http://www.w3.org/1999/xhtml"/>', "<html> in http://www.w3.org/1999/xhtml"),
                           (b"<feed/>", "<feed>")):
        with pytest.raises(MetadataError, match=f"not an Atom feed: the document is {root},"):
            metadata.parse_arxiv_feed(document)
