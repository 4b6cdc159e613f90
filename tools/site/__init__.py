"""The SpecAtlas website: pages generated from the catalog at build time, built with MkDocs.

`pages.generate()` turns a `Catalog` into Markdown (a plain function, tested on its own) through
the Jinja2 templates in templates/ (`templating`; the environment, autoescaped with the escaping
filters, is `specatlas.templating`'s); `plugin.SpecAtlasPlugin` hands those pages to MkDocs;
`mkdocs_build` builds the site; `build` is the `specatlas site` command, which no module of the
site imports. The site sits above the bench: its leaderboard page is the bench's.
"""
