"""The SpecAtlas website: pages generated from the catalog at build time, built with MkDocs.

`pages.generate()` turns a `Catalog` into Markdown (a plain function, tested on its own);
`plugin.SpecAtlasPlugin` hands those pages to MkDocs; `build` is `specatlas site`.
"""
