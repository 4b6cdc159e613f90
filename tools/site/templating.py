"""The site's pages from their templates (templates/*.md.j2 here, and the leaderboard's that
the site's leaderboard page includes), in `specatlas.templating`'s environment."""

from __future__ import annotations

from pathlib import Path

from specatlas.bench import leaderboard_page
from specatlas.catalog.schema import Paper
from specatlas.catalog.venues import VENUES
from specatlas.site.catalog import posted
from specatlas.templating import environment

TEMPLATES = Path(__file__).resolve().parent / "templates"


def render(template: str, **context: object) -> str:
    return environment(TEMPLATES, leaderboard_page.TEMPLATES).get_template(template).render(**context)


def venue(paper: Paper) -> str:
    return paper.venue if paper.venue in VENUES else "?"


def when(paper: Paper) -> str:
    year, month = posted(paper)
    return f"{year}-{month:02d}" if month else str(year)


def render_page(template: str, **context: object) -> str:
    """A site page from its template, with the page functions the shared macros use."""
    return render(template, when=when, venue=venue, **context)
