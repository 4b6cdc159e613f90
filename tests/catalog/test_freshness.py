"""`specatlas freshness` on a recorded arXiv search feed: what is new, what the catalog already
has (by id or title), what was triaged away, and the markdown the weekly issue gets."""

import argparse
import datetime as dt
import urllib.parse
from pathlib import Path

import pytest

from specatlas import paths
from specatlas.catalog import freshness
from specatlas.catalog.metadata import MetadataError, Offline

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "metadata"
FEED = (RECORDED / "arxiv_search_speculative.xml").read_bytes()
EMPTY = (RECORDED / "arxiv_empty.xml").read_bytes()
SINCE = dt.date(2026, 10, 1)


def fake_arxiv(asked):
    """The recorded feed for the 'speculative decoding' query, an empty one for the others."""

    def fetch(url: str) -> bytes:
        asked.append(url)
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["search_query"][0]
        return FEED if '"speculative decoding"' in query else EMPTY

    return fetch


def test_search_url_filters_categories_and_sorts_newest_first():
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(freshness.search_url('all:"speculative decoding"', 100, 50)).query)
    assert query["search_query"] == ['(all:"speculative decoding") AND (cat:cs.CL OR cat:cs.LG OR cat:cs.AI)']
    assert query["sortBy"] == ["submittedDate"] and query["sortOrder"] == ["descending"]
    assert query["start"] == ["100"] and query["max_results"] == ["50"]


def test_search_keeps_the_window_and_stops_paging_past_it():
    asked, pauses = [], []
    found = freshness.search(SINCE, fake_arxiv(asked), pause=pauses.append)
    assert sorted(found) == ["2610.30123", "2611.05555", "2611.09001", "2611.20417"]  # 2609.01234 is before the window
    assert found["2611.20417"].queries == ["speculative decoding"]
    # One page per query: the recorded page reaches back past SINCE although 1874 results exist.
    assert len(asked) == len(freshness.QUERIES)
    assert pauses == [freshness.API_DELAY_S] * (len(asked) - 1)  # arXiv's one request per 3 s


def test_a_busy_api_is_asked_again_after_a_wait():
    answers = [MetadataError("export.arxiv.org answered HTTP 503 Service Unavailable"), b"Rate exceeded.", FEED]

    def flaky(url):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    pauses = []
    found = freshness.search(SINCE, flaky, queries={"speculative decoding": 'all:"speculative decoding"'}, pause=pauses.append)
    assert len(found) == 4 and pauses == [freshness.RETRY_WAIT_S, 2 * freshness.RETRY_WAIT_S]
    with pytest.raises(MetadataError, match="Rate exceeded"):
        freshness.search(SINCE, lambda url: b"Rate exceeded.", queries={"q": "all:x"}, pause=lambda s: None)


def test_missing_drops_catalogued_ids_titles_and_triaged_ids():
    found = freshness.search(SINCE, fake_arxiv([]), pause=lambda s: None)
    catalog = freshness.Catalog(arxiv_ids={"2610.30123"}, titles={"verifying token trees in one pass"}, newest_arxiv="2610.30123")
    left = freshness.missing(found, catalog, ignored={"2611.05555": "multi-token prediction as a training loss only"})
    assert [c.entry.arxiv_id for c in left] == ["2611.20417"]


def test_markdown_has_a_ready_command_per_paper_and_respects_the_issue_size():
    found = freshness.search(SINCE, fake_arxiv([]), pause=lambda s: None)
    candidates = freshness.missing(found, freshness.Catalog(set(), set(), None), {})
    text = freshness.render(candidates, SINCE, dt.date(2026, 11, 30), freshness.Catalog(set(), set(), None))
    assert "**4 paper(s)**" in text and text.index("2611.20417") < text.index("2610.30123")  # newest first
    assert "  specatlas new --arxiv 2611.20417\n" in text
    assert "[abs](https://arxiv.org/abs/2610.30123)" in text and "Ada Quist, Bo Lind, Cyrus Vale and 2 more" in text
    small = freshness.render(candidates, SINCE, dt.date(2026, 11, 30), freshness.Catalog(set(), set(), None), limit=1400)
    assert len(small) < 1400 and "more not shown" in small and "specatlas new --arxiv 2611.20417" in small
    nothing = freshness.render([], SINCE, dt.date(2026, 11, 30), freshness.Catalog(set(), set(), None))
    assert "Nothing new" in nothing


@pytest.fixture
def catalog_root(make_catalog, monkeypatch):
    root = make_catalog()
    monkeypatch.setenv("SPECATLAS_ROOT", str(root))
    paths.repo_root.cache_clear()
    yield root
    paths.repo_root.cache_clear()


def test_command_reads_the_catalog_and_writes_markdown(catalog_root, tmp_path, capsys):
    out = tmp_path / "freshness.md"
    args = argparse.Namespace(since=SINCE, days=30, max_per_query=500, out=out)
    assert freshness.execute(args, fetch=fake_arxiv([]), pause=lambda s: None, today=dt.date(2026, 11, 30)) == 0
    text = out.read_text(encoding="utf-8")
    # The base catalog holds 'Verifying Token Trees in One Pass' (under another arXiv id): matched by title.
    assert "2611.09001" not in text and "specatlas new --arxiv 2611.20417" in text
    assert "newest 2401.00002" in text
    assert "4 matching paper(s) since 2026-10-01, 3 not in the catalog" in capsys.readouterr().err


def test_offline_is_one_line_and_exit_3(catalog_root, capsys):
    def fetch(url):
        raise Offline("cannot reach export.arxiv.org (timed out)")

    args = argparse.Namespace(since=None, days=30, max_per_query=500, out=None)
    assert freshness.execute(args, fetch=fetch, pause=lambda s: None) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "offline?" in err and "Traceback" not in err


def test_the_ignore_file_parses():
    assert isinstance(freshness.read_ignored(), dict)


def test_weekly_workflow_runs_a_command_that_parses():
    import re
    import shlex

    import yaml

    from specatlas import cli

    workflow = yaml.safe_load((Path(__file__).resolve().parents[2] / ".github" / "workflows" / "freshness.yml").read_text(encoding="utf-8"))
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["schedule"][0]["cron"] and "workflow_dispatch" in triggers
    steps = workflow["jobs"]["freshness"]["steps"]
    command = next(s["run"] for s in steps if s.get("run", "").startswith("specatlas freshness"))
    argv = shlex.split(re.sub(r"\$\{\{[^}]*\}\}", "60", command))[1:]
    parsed = cli.build_parser(argv).parse_args(argv)
    assert parsed.days == 60 and parsed.out == Path("freshness.md")
    assert any("gh issue edit" in s.get("run", "") and "gh issue create" in s.get("run", "") for s in steps)


def test_queries_match_locally_as_arxiv_reads_them():
    q = freshness.QUERIES
    assert freshness.matches(q["speculative decoding"], "Adaptive Draft Trees for Long-Output Speculative\n Decoding")
    assert not freshness.matches(q["speculative decoding"], "speculative sampling and decoding")  # a phrase, not two words
    assert freshness.matches(q["draft model"], "A small draft model speeds up inference")
    assert not freshness.matches(q["draft model"], "A draft model for essays")  # AND (decoding OR inference)
    assert freshness.matches(q["draft then verify"], "Draft-then-verify decoding")
    assert not freshness.matches(q["self-speculative"], "speculative self-attention")


def test_a_saved_listing_is_swept_offline_like_the_api(catalog_root, tmp_path, capsys):
    listing = tmp_path / "cs.LG.xml"
    listing.write_bytes(FEED)
    out = tmp_path / "freshness.md"
    args = argparse.Namespace(since=SINCE, days=30, max_per_query=500, out=out, listing=[listing])

    def no_network(url):
        raise AssertionError("a listing sweep asked the network")

    assert freshness.execute(args, fetch=no_network, pause=lambda s: None, today=dt.date(2026, 11, 30)) == 0
    text = out.read_text(encoding="utf-8")
    # The feed is one query's answer; swept locally, each entry is matched by the phrases it holds:
    # the long-output paper, the pre-training paper ("multi-token prediction", as the API would find it)
    # and the diffusion paper ("lossless acceleration"); the catalogued copy holds none, the old one
    # is outside the window.
    assert "specatlas new --arxiv 2611.20417" in text and "2611.09001" not in text and "2609.01234" not in text
    assert "matched: lossless acceleration" in text and "matched: multi-token prediction" in text
    assert "3 matching paper(s) since 2026-10-01, 3 not in the catalog" in capsys.readouterr().err


def test_a_listing_that_is_not_a_feed_is_one_line_naming_it(catalog_root, tmp_path, capsys):
    page = tmp_path / "listing.html"
    page.write_text("<html><body>not a feed", encoding="utf-8")
    for path in (page, tmp_path / "missing.xml"):
        args = argparse.Namespace(since=SINCE, days=30, max_per_query=500, out=None, listing=[path])
        assert freshness.execute(args, pause=lambda s: None) == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err


def test_feed_text_is_inert_in_the_report():
    assert freshness.inert("A\n```bash\nrm -rf ~\n```") == r"A \`\`\`bash rm -rf \~ \`\`\`"
    assert freshness.inert("[x](https://e.example) <b> @team #12 &#64;x") == \
        r"\[x\](https://e.example) \<b\> @&#8203;team \#&#8203;12 &amp;\#&#8203;64;x"
    assert freshness.inert("Title\u2028# Heading\u202e") == r"Title \#&#8203; Heading"


def test_a_future_since_is_named_as_the_problem(catalog_root, capsys):
    args = argparse.Namespace(since=dt.date(2999, 1, 1), days=30, max_per_query=500, out=None, listing=None)
    assert freshness.execute(args, fetch=lambda url: FEED, pause=lambda s: None, today=dt.date(2026, 11, 30)) == 2
    assert capsys.readouterr().err == ("specatlas freshness: --since 2999-01-01 is in the future (today is 2026-11-30); "
                                       "no paper has been posted since then, give a past date\n")


def test_entries_without_a_date_are_skipped_with_one_warning_naming_them(catalog_root, tmp_path, capsys):
    listing = tmp_path / "cs.LG.xml"
    listing.write_bytes(FEED.replace(b"<published>2026-11-24T18:02:11Z</published>", b""))
    args = argparse.Namespace(since=SINCE, days=30, max_per_query=500, out=None, listing=[listing])
    assert freshness.execute(args, pause=lambda s: None, today=dt.date(2026, 11, 30)) == 0
    out, err = capsys.readouterr()
    assert "2611.20417" not in out and "specatlas new --arxiv 2610.30123" in out
    assert err.splitlines()[0] == ("specatlas freshness: warning: skipped 1 feed entry without a readable id or date: "
                                   "cs.LG.xml: entry 1 (http://arxiv.org/abs/2611.20417v1) has no published date")
