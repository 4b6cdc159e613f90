"""How a page cites a record: the paper's public address, and where in it a reported number
stands. The site's pages and the leaderboard's reported numbers show both."""

from __future__ import annotations

from specatlas.catalog.schema import STATISTIC_LABELS, Paper, ReportedResult
from specatlas.catalog.sources import public
from specatlas.escaping import safe_url


def public_url(paper: Paper) -> str | None:
    """The paper's public address (a safe http(s) URL): its arXiv abstract, else its page, DOI or PDF;
    None when it has none."""
    if paper.arxiv:
        return safe_url(f"https://arxiv.org/abs/{paper.arxiv}")
    found = paper.url or (f"https://doi.org/{paper.doi}" if paper.doi else paper.pdf)
    return safe_url(found) if found else None


def source_text(result: ReportedResult) -> str:
    """Where in the paper a number is, how it aggregates and the record's note, as a page shows them:
    wording about how the record was compiled (`sources.public`) is left out, so the source shown
    is the paper's public address (`public_url`) with what the record says of it."""
    note = public(result.note)
    return (public(result.source) or "the paper") + statistic_label(result) + (f" ({note})" if note else "")


def statistic_label(result: ReportedResult) -> str:
    """' [up to (best setting)]', ' [benchmark mean]'...: how the number aggregates, so an abstract's
    best case is not read as a typical figure; '' when the record does not say."""
    return f" [{STATISTIC_LABELS[result.statistic]}]" if result.statistic else ""
