"""`specatlas check-links` with recorded answers: HEAD then GET, file:line: field: status, bounded
concurrency, and a clear exit when there is no network."""

import argparse
import threading
import time
import urllib.parse

import pytest

from specatlas import paths
from specatlas.catalog import links
from specatlas.catalog.links import NetworkError

RECORD = """\
id: gamma2025links
title: Links of Every Kind
authors: [Gamma Author]
year: 2025
venue: arXiv
arxiv: '2501.00003'
url: https://arxiv.org/abs/2501.00003
pdf: https://example.org/refuses-head.pdf
code:
  - https://github.com/gamma/ok
  - https://github.com/gamma/deleted
links:
  slides: https://slides.example.net/deck
  video: https://blocked.example.com/v
"""

# (method, url) -> status, or an exception; HEAD of a url not listed falls through to its GET.
ANSWERS = {
    ("HEAD", "https://arxiv.org/abs/2501.00003"): 200,
    ("HEAD", "https://example.org/refuses-head.pdf"): 405,
    ("GET", "https://example.org/refuses-head.pdf"): 200,
    ("HEAD", "https://github.com/gamma/ok"): 200,
    ("HEAD", "https://github.com/gamma/deleted"): 404,
    ("GET", "https://github.com/gamma/deleted"): 404,
    ("HEAD", "https://slides.example.net/deck"): NetworkError("[Errno -2] Name or service not known"),
    ("GET", "https://slides.example.net/deck"): NetworkError("[Errno -2] Name or service not known"),
    ("HEAD", "https://blocked.example.com/v"): 403,
    ("GET", "https://blocked.example.com/v"): 403,
}


class Recorded:
    def __init__(self, answers, delay=0.0):
        self.answers, self.delay, self.asked = answers, delay, []
        self.active = self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, method, url, timeout):
        with self.lock:
            self.asked.append((method, url))
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(self.delay)
            if urllib.parse.urlsplit(url).path == "/":  # the offline probe asks https://host/
                return 200, url
            answer = self.answers[(method, url)]
            if isinstance(answer, Exception):
                raise answer
            return answer, url
        finally:
            with self.lock:
                self.active -= 1


@pytest.fixture
def catalog(make_catalog, monkeypatch, tmp_path):
    record = tmp_path / "gamma2025links.yaml"
    record.write_text(RECORD, encoding="utf-8")
    root = make_catalog(record, base=False)
    monkeypatch.setenv("SPECATLAS_ROOT", str(root))
    paths.repo_root.cache_clear()
    yield root
    paths.repo_root.cache_clear()


def args(**overrides):
    base = dict(paths=[], fields=None, jobs=8, per_host=2, timeout=5.0, strict=False, format="text")
    return argparse.Namespace(**{**base, **overrides})


def test_reports_file_line_field_status(catalog, capsys):
    http = Recorded(ANSWERS)
    assert links.execute(args(), http=http) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "papers/gamma2025links.yaml:11: code[1]: 404 Not Found https://github.com/gamma/deleted",
        "papers/gamma2025links.yaml:13: links.slides: unreachable ([Errno -2] Name or service not known) https://slides.example.net/deck",
        "papers/gamma2025links.yaml:14: links.video: 403 Forbidden https://blocked.example.com/v",
    ]
    assert "6 distinct link(s)" in err and "3 ok, 1 broken, 1 unreachable, 1 unverified" in err
    # HEAD first; GET only where HEAD was refused or failed.
    assert ("GET", "https://example.org/refuses-head.pdf") in http.asked
    assert ("GET", "https://github.com/gamma/ok") not in http.asked


def test_a_renamed_repository_is_reported_but_does_not_fail(catalog, capsys):
    def renamed(method, url, timeout):
        if url == "https://github.com/gamma/ok":
            return 200, "https://github.com/gamma-lab/ok-renamed"
        return 200, url

    assert links.execute(args(), http=renamed) == 0
    out, err = capsys.readouterr()
    assert out == "papers/gamma2025links.yaml:10: code[0]: moved to https://github.com/gamma-lab/ok-renamed (was https://github.com/gamma/ok)\n"
    assert "6 ok (1 code link(s) moved)" in err


def test_unverified_fails_only_when_strict(catalog, capsys):
    answers = {**ANSWERS, ("HEAD", "https://slides.example.net/deck"): 200}
    assert links.execute(args(fields=["links"]), http=Recorded(answers)) == 0  # a 403 alone is a warning
    assert links.execute(args(fields=["links"], strict=True), http=Recorded(answers)) == 1
    capsys.readouterr()
    links.execute(args(fields=["links"], format="github"), http=Recorded(answers))
    assert capsys.readouterr().out == "::warning file=papers/gamma2025links.yaml,line=14,title=links.video::403 Forbidden https://blocked.example.com/v\n"


def test_no_network_is_a_clear_exit_3(catalog, capsys):
    def down(method, url, timeout):
        raise NetworkError("[Errno -3] Temporary failure in name resolution")

    assert links.execute(args(), http=down) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no network, nothing checked" in err and "Traceback" not in err


def test_concurrency_is_bounded_per_host():
    urls = [f"https://github.com/org/repo{i}" for i in range(12)]
    http = Recorded({("HEAD", u): 200 for u in urls}, delay=0.05)
    outcomes = links.check_all(urls, http, timeout=1, jobs=8, per_host=2)
    assert len(outcomes) == 12 and all(o.kind == "ok" for o in outcomes.values()) and 1 < http.peak <= 2
    # Many hosts: the pool's bound holds, and one busy host does not serialise the others.
    urls = [f"https://host{h}.example/p{i}" for h in range(6) for i in range(4)]
    http = Recorded({("HEAD", u): 200 for u in urls}, delay=0.05)
    assert len(links.check_all(urls, http, timeout=1, jobs=4, per_host=2)) == 24 and 2 < http.peak <= 4


def test_the_real_http_function_against_a_loopback_server(serve, refused_url):
    """http_status itself (urllib: HEAD, redirects, HTTP errors, refused connections) on 127.0.0.1."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, head: bool):
            if self.path == "/moved":
                self.send_response(301)
                self.send_header("Location", "/here")
            elif self.path == "/no-head" and head:
                self.send_response(405)
            else:
                self.send_response(200 if self.path in ("/here", "/no-head") else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self):
            self._answer(head=True)

        def do_GET(self):
            self._answer(head=False)

    base = serve(Handler)
    assert links.check_url(f"{base}/here", links.http_status, 5) == links.Outcome(200, f"{base}/here")
    assert links.check_url(f"{base}/moved", links.http_status, 5) == links.Outcome(200, f"{base}/here")
    assert links.check_url(f"{base}/no-head", links.http_status, 5).kind == "ok"
    assert links.check_url(f"{base}/gone", links.http_status, 5).describe() == "404 Not Found"
    assert links.check_url(refused_url, links.http_status, 5).kind == "unreachable"


def test_bad_arguments_are_one_line_errors(catalog, capsys):
    from specatlas import cli

    assert links.execute(args(paths=[catalog / "papers" / "nope.yaml"]), http=Recorded({})) == 2
    assert "no such record:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["check-links", "--per-host", "0"])
    assert "argument --per-host: must be at least 1" in capsys.readouterr().err


def test_a_hostile_record_cannot_break_an_annotation_line(catalog, capsys):
    evil = catalog / "papers" / "gamma2025links,x\n::error::pwned.yaml"
    evil.write_text("url: https://github.com/gamma/deleted\npdf: \"https://e.example/a\\n::error::pwned\"\n",
                    encoding="utf-8")
    assert links.execute(args(paths=[evil], format="github"), http=Recorded(ANSWERS)) == 1
    assert capsys.readouterr().out == ("::error file=papers/gamma2025links%2Cx%0A%3A%3Aerror%3A%3Apwned.yaml,line=1,"
                                       "title=url::404 Not Found https://github.com/gamma/deleted\n")
