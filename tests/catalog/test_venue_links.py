"""A record that names a venue other than arXiv links to that venue's version of the paper (a DOI,
or a url/pdf/link on the venue's own site), so the venue claim can be checked. Records whose
venue page has not been found yet are listed, each with what was searched, in
tools/catalog/venue_link_gaps.yaml; that list may only shrink."""

from urllib.parse import urlparse

import yaml

from specatlas.catalog.validate import validate
from specatlas.catalog.venues import VENUES
from specatlas.paths import repo_root

GAPS_FILE = repo_root() / "tools" / "catalog" / "venue_link_gaps.yaml"
# Kinds whose version of record lives somewhere other than arXiv.
PUBLISHED_KINDS = {"conference", "journal", "workshop"}
# Hosts that serve a venue's own version (proceedings, anthologies, review sites, publishers).
VENUE_HOSTS = (
    "openreview.net", "aclanthology.org", "proceedings.mlr.press", "proceedings.neurips.cc", "papers.nips.cc",
    "neurips.cc", "nips.cc", "iclr.cc", "icml.cc", "dl.acm.org", "ieeexplore.ieee.org", "doi.org", "ojs.aaai.org",
    "openaccess.thecvf.com", "usenix.org", "jmlr.org", "mlsys.org", "link.springer.com", "isca-archive.org",
    "ecva.net", "ijcai.org", "sciencedirect.com", "mlanthology.org",
)


def _on_venue_host(url: str | None) -> bool:
    host = (urlparse(url).hostname or "") if url else ""
    return any(host == h or host.endswith("." + h) for h in VENUE_HOSTS)


def has_venue_link(paper) -> bool:
    if paper.doi:
        return True
    return any(_on_venue_host(u) for u in (paper.url, paper.pdf, *paper.links.values()))


def _published(papers):
    return {p.id: p for p in papers if VENUES[p.venue].kind in PUBLISHED_KINDS or p.venue == "OpenReview"}


def test_published_records_link_to_their_venue_version():
    _, records, _ = validate()
    published = _published(r.paper for r in records if r.paper)
    gaps = yaml.safe_load(GAPS_FILE.read_text(encoding="utf-8"))["gaps"]
    listed = {g["id"]: g for g in gaps}
    missing = sorted(pid for pid, p in published.items() if not has_venue_link(p) and pid not in listed)
    assert not missing, "records naming a venue without a link to the venue version (add doi/url from the venue page):\n" + "\n".join(missing)
    stale = sorted(pid for pid in listed if pid not in published or has_venue_link(published[pid]))
    assert not stale, f"venue_link_gaps.yaml lists records that now have a venue link (or no venue); remove them: {stale}"
    assert all(len(g.get("searched", "")) > 10 for g in gaps), "say for each gap what was searched"


def test_venue_link_check_accepts_venue_hosts_only():
    from types import SimpleNamespace as P

    arxiv_only = P(doi=None, url="https://arxiv.org/abs/2401.00001", pdf="https://arxiv.org/pdf/2401.00001", links={"code": "https://github.com/x/y"})
    assert not has_venue_link(arxiv_only)
    assert has_venue_link(P(doi="10.1145/1", url=arxiv_only.url, pdf=None, links={}))
    assert has_venue_link(P(doi=None, url="https://openreview.net/forum?id=abc", pdf=None, links={}))
    assert has_venue_link(P(doi=None, url=arxiv_only.url, pdf=None, links={"poster": "https://neurips.cc/virtual/2024/poster/1"}))
    assert not has_venue_link(P(doi=None, url="https://evil.example/openreview.net", pdf=None, links={}))
