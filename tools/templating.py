"""The Jinja2 environment of the generated pages (*.md.j2: Markdown with some HTML): the site's
(tools/site/templates/) and the leaderboard's (tools/bench/templates/, rendered into
results/LEADERBOARD.md and the site's leaderboard page).

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

from specatlas import escaping
from specatlas.catalog.sources import public


def _final(escape: Callable[..., str]) -> Callable[..., Markup]:
    def apply(value: object, *args: object) -> Markup:
        # plain str in: Markup's own methods would escape those functions' arguments once more
        return Markup(escape(str(value) if isinstance(value, str) else value, *args))

    return apply


@lru_cache(maxsize=None)
def environment(*folders: Path) -> Environment:
    """The environment over the templates in `folders` (a name is looked up in them in order)."""
    env = Environment(loader=FileSystemLoader(folders), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(
        md=_final(escaping.md),  # inline Markdown that renders literally
        md_prose=_final(escaping.md_prose),  # the same, keeping *emphasis*
        md_code=_final(escaping.md_code),  # the same, its `backticked` parts as code
        code=_final(escaping.code_span),  # an inline code span
        html=_final(escaping.attr),  # an HTML element body or attribute value
        md_link=_final(escaping.md_link),  # label|md_link(url): a link, or the bare label for an unsafe URL
        code_fence=_final(escaping.code_fence),  # code|code_fence(lang)
        script_json=_final(escaping.script_json),  # data inside <script type="application/json">
        tag_name=_final(escaping.tag_name),  # a node's name as a Material tag
        yaml_str=_final(escaping.yaml_str),  # a double-quoted YAML scalar (front matter)
    )
    env.filters["public"] = lambda value: public(value) or ""  # record text, "" where it cites working notes
    return env
