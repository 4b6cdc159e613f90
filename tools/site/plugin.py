"""The MkDocs plugin (`plugins: [specatlas]` in mkdocs.yml): generates the catalog pages and
papers.bib into the build as virtual files, and derives the tags plugin's allow-list from the
taxonomy. Nothing is written into docs/."""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, event_priority
from mkdocs.structure.files import File, Files

from specatlas.bench.published import PublishedDataError
from specatlas.paths import repo_root
from specatlas.site import internal, urls
from specatlas.site.catalog import Catalog, load_catalog, log
from specatlas.site.pages import allowed_tags, generate
from specatlas.site.project_pages import RepositoryFileError


class SpecAtlasPlugin(BasePlugin):
    def __init__(self) -> None:
        # `specatlas site build` and tests may set a catalog before the build; else it is loaded
        # from the repository (SPECATLAS_ROOT or the working directory).
        self.catalog: Catalog | None = None

    @event_priority(100)  # before the tags plugin reads tags_allowed in its own on_config
    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        if self.catalog is None:
            self.catalog = load_catalog(repo_root())
        found = urls.resolve(self.catalog.root, urls.Addresses(config.site_url, config.repo_url, config.edit_uri))
        config["site_url"], config["repo_url"], config["edit_uri"] = found.site_url, found.repo_url, found.edit_uri
        from material.plugins.tags.plugin import TagsPlugin
        from material.plugins.tags.structure.tag import Tag

        for plugin in config.plugins.values():
            if isinstance(plugin, TagsPlugin):
                plugin.config.tags_allowed = {Tag(name) for name in allowed_tags(self.catalog)}
        return config

    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        assert self.catalog is not None
        try:
            generated = generate(self.catalog, directory_urls=config.use_directory_urls, repo_url=config.repo_url,
                                 site_url=config.site_url)
        except (PublishedDataError, RepositoryFileError) as exc:  # a page would lack numbers it promises: stop, in one line
            raise PluginError(f"specatlas: {exc}") from None
        for src_uri, content in generated.items():
            files.append(File.generated(config, src_uri, content=content))
        return files

    def on_page_markdown(self, markdown: str, page, config: MkDocsConfig, files: Files) -> str:
        """Point the edit link of a generated page at what it is generated from: a paper's record,
        a node's taxonomy file, CONTRIBUTING.md; pages derived from the whole catalog get none."""
        source = self.edit_source(page.file.src_uri)
        repo, edit_uri = config.repo_url, config.edit_uri
        if page.file.generated_by is not None or source is not None:
            page.edit_url = f"{repo.rstrip('/')}/{edit_uri.strip('/')}/{source}" if source and repo and edit_uri else None
        return markdown

    def on_pre_build(self, config: MkDocsConfig) -> None:
        self.leaks: list[str] = []

    def on_post_page(self, output: str, page, config: MkDocsConfig) -> str:
        """A page that shows how the catalog was compiled, or Markdown that did not render, is
        named here and stops the build once every page is checked (`internal.check_page`)."""
        problem = internal.check_page(output)
        if problem:
            self.leaks.append(f"{page.file.src_uri} {problem}")
            log.error("specatlas: %s %s", page.file.src_uri, problem)
        return output

    def on_post_build(self, config: MkDocsConfig) -> None:
        if self.leaks:
            raise PluginError(f"specatlas: {len(self.leaks)} page(s) show what no reader should see, first: {self.leaks[0]}")

    def edit_source(self, src_uri: str) -> str | None:
        """The repository path a generated page is edited through, or None."""
        assert self.catalog is not None
        if src_uri == "contributing.md":
            return "CONTRIBUTING.md"
        folder, _, name = src_uri.rpartition("/")
        stem = name.removesuffix(".md")
        if folder == "papers" and stem in self.catalog.by_id:
            return f"papers/{stem}.yaml"
        if folder == "taxonomy" and self.catalog.taxonomy is not None:
            node = next((n for n in self.catalog.taxonomy.all_nodes() if n.id == stem), None)
            return f"taxonomy/{node.facet}.yaml" if node else None
        return None

    def on_serve(self, server, config: MkDocsConfig, builder):
        root = self.catalog.root if self.catalog else repo_root()
        for path in (root / "papers", root / "taxonomy", root / "CONTRIBUTING.md"):
            server.watch(str(path))
        return server
