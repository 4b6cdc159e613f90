"""The Jinja2 environment of the generated pages (templates/*.md.j2: Markdown with some HTML).

Autoescape is on, so any value a template inserts as it is comes out HTML-escaped. Where a value
lands in Markdown, the template says so with one of the filters below, the escaping functions of
`specatlas.escaping`: their output is final (it is already escaped for where it lands), so it is
marked safe and not escaped twice.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from specatlas.catalog.schema import Paper
from specatlas.catalog.venues import VENUES
from specatlas import escaping as text
from specatlas.site import internal
from specatlas.site.catalog import posted

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _final(escape: Callable[..., str]) -> Callable[..., Markup]:
    def apply(value: object, *args: object) -> Markup:
        # plain str in: Markup's own methods would escape those functions' arguments once more
        return Markup(escape(str(value) if isinstance(value, str) else value, *args))

    return apply


@lru_cache(maxsize=None)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(
        md=_final(text.md),  # inline Markdown that renders literally
        md_prose=_final(text.md_prose),  # the same, keeping *emphasis*
        md_code=_final(text.md_code),  # the same, its `backticked` parts as code
        code=_final(text.code_span),  # an inline code span
        html=_final(text.attr),  # an HTML element body or attribute value
        md_link=_final(text.md_link),  # label|md_link(url): a link, or the bare label for an unsafe URL
        code_fence=_final(text.code_fence),  # code|code_fence(lang)
        script_json=_final(text.script_json),  # data inside <script type="application/json">
        tag_name=_final(text.tag_name),  # a node's name as a Material tag
        yaml_str=_final(text.yaml_str),  # a double-quoted YAML scalar (front matter)
    )
    env.filters["public"] = lambda value: internal.public(value) or ""  # record text, "" where it cites working notes
    return env


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)


def venue(paper: Paper) -> str:
    return paper.venue if paper.venue in VENUES else "?"


def when(paper: Paper) -> str:
    year, month = posted(paper)
    return f"{year}-{month:02d}" if month else str(year)


def render_page(template: str, **context: object) -> str:
    """A site page from its template, with the page functions the shared macros use."""
    return render(template, when=when, venue=venue, **context)
