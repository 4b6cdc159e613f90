"""Every rule a paper record must satisfy, in one pass (`specatlas validate` prints them:
`specatlas.catalog.validate_command`; the site, stats and BibTeX read the valid records through it).

Each problem is one line `papers/x.yaml:LINE: field: what is wrong (how to fix it)`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from specatlas.catalog.records import (Problem, Record, arxiv_posted, display_path, normalize_title, read_record,
                                       safe_resolve)
from specatlas.catalog.schema import NO_RESULT_REASONS
from specatlas.catalog.taxonomy import FACETS, Taxonomy, load_taxonomy
from specatlas.paths import repo_root

NEAR_DUPLICATE_TITLE_SCORE = 95.0
# Tags that say an existing target's own weights are fine-tuned (Medusa-2, SDSAT): the output then
# follows a modified model, so the record cannot claim to keep the unmodified target's distribution.
# (Plain joint-training also covers pre-training a new model with a multi-token objective, where the
# trained model is the target; it is not in this set.)
TARGET_MODIFYING_TAGS = {"alignment": ("target-fine-tuning",)}
# Scope nodes of works that study methods rather than propose one: they need no speed result.
NON_METHOD_SCOPES = ("survey", "analysis", "benchmark")


def validate(paths: list[Path] | None = None, root: Path | None = None, today: dt.date | None = None) -> tuple[list[Problem], list[Record], Taxonomy]:
    """Validate the records at `paths` (default: the whole catalog) against the whole catalog.

    Cross-record rules (unique ids, duplicates, lineage) always see every record in papers/, so
    a new file is checked against what is already there; problems are reported for the files
    asked about only.
    """
    root = root or repo_root()
    today = today or dt.date.today()
    taxonomy = load_taxonomy(root / "taxonomy")
    problems = [Problem(display_path(f, root), line, field, msg) for f, line, field, msg in taxonomy.problems]

    catalog_files = sorted((root / "papers").glob("*.yaml"))
    if paths:
        targets, found = _expand(paths, root)
        problems.extend(found)
    else:
        targets = catalog_files
        problems.extend(_misnamed(root / "papers", root))
    resolved = {p: safe_resolve(p) for p in (*catalog_files, *targets)}
    target_set = {resolved[p] for p in targets}
    records: list[Record] = []
    for path in sorted({resolved[p]: p for p in resolved}.values()):
        record, found = read_record(path, root)
        records.append(record)
        if resolved[path] in target_set:
            problems.extend(found)
    cross = _cross_record_problems([r for r in records if r.paper], taxonomy, today)
    problems.extend(p for p in cross if _resolve(root, p.file) in target_set)
    return sorted(set(problems)), records, taxonomy


def _resolve(root: Path, shown: str) -> Path:
    path = Path(shown)
    return safe_resolve(path if path.is_absolute() else root / path)


def _expand(paths: list[Path], root: Path) -> tuple[list[Path], list[Problem]]:
    """The record files named by `paths` (folders give their *.yaml files), and a problem for each
    path that names none: validating nothing must not read as "ok"."""
    out: list[Path] = []
    problems: list[Problem] = []
    for path in paths:
        path = path if path.is_absolute() or path.exists() or path.is_symlink() else root / path
        shown = display_path(path, root)
        if path.is_dir():
            found = sorted(path.glob("*.yaml"))
            problems.extend(_misnamed(path, root))
            if not found:
                problems.append(Problem(shown, 1, "(folder)", "holds no records (*.yaml files); nothing to validate"))
            out.extend(found)
        elif not path.exists() and not path.is_symlink():
            problems.append(Problem(shown, 1, "(file)", "does not exist"))
        elif path.suffix != ".yaml":
            problems.append(Problem(shown, 1, "(file)", f"records are named <id>.yaml; rename it to {path.stem}.yaml"))
        else:
            out.append(path)
    return out, problems


def _misnamed(folder: Path, root: Path) -> list[Problem]:
    """Records the glob would silently skip: papers/x.yml, papers/x.YAML."""
    return [Problem(display_path(p, root), 1, "(file)", f"records are named <id>.yaml; rename it to {p.stem}.yaml")
            for p in sorted(folder.iterdir()) if p.suffix.lower() in (".yml", ".yaml") and p.suffix != ".yaml"] \
        if folder.is_dir() else []


def _cross_record_problems(records: list[Record], taxonomy: Taxonomy, today: dt.date) -> list[Problem]:
    problems: list[Problem] = []

    def report(record: Record, field: str, message: str, *loc) -> None:
        problems.append(Problem(record.display, record.line_of(*(loc or (field.split(".")[0],))), field, message))

    by_id: dict[str, Record] = {}
    owners: dict[str, str] = {}  # alias or id -> record id
    seen_keys: dict[tuple[str, str], Record] = {}
    for record in records:
        paper = record.paper
        if record.path.stem != paper.id:
            report(record, "id", f"'{paper.id}' must equal the file name '{record.path.stem}'; rename the file to {paper.id}.yaml (ids never change once merged)")
        if paper.id in by_id:
            report(record, "id", f"'{paper.id}' is already used by {by_id[paper.id].display}")
        else:
            by_id[paper.id] = record
        for i, alias in enumerate(paper.aliases):
            owner = owners.get(alias)
            if owner and owner != paper.id:
                report(record, f"aliases[{i}]", f"'{alias}' already names {owner}; aliases must be unique", "aliases", i)
            owners.setdefault(alias, paper.id)
        # The same paper under two ids: same arXiv id, DOI or normalized title.
        for key, value in (("arxiv", paper.arxiv), ("doi", (paper.doi or "").lower() or None), ("title", normalize_title(paper.title))):
            if not value:
                continue
            first = seen_keys.get((key, value))
            if first and first.paper.id != paper.id:
                report(record, key, f"the same paper as {first.display} (same {'normalized title' if key == 'title' else key}); keep one record and merge the facts")
            else:
                seen_keys.setdefault((key, value), record)
        _check_tags(record, taxonomy, report)
        _check_dates(record, today, report)
        if paper.lossless and not paper.taxonomy.verification:
            report(record, "lossless", "is true, but no verification tag says how drafts are checked; tag taxonomy.verification "
                   "(e.g. speculative-sampling, greedy-verification) or set lossless: null for a non-method")
        elif paper.lossless and all(
            taxonomy.facets["verification"].nodes.get(t) and "relaxed-acceptance" in (t, *taxonomy.facets["verification"].ancestors(t))
            for t in paper.taxonomy.verification
        ):
            report(record, "lossless", "is true, but every verification tag is a relaxed (lossy) rule; set lossless: false or fix the tags")
        _check_lossless_variants(record, report)
        _check_result_or_reason(record, report)
    for alias, owner in owners.items():
        if alias in by_id and owner != alias:
            report(by_id[owner], "aliases", f"'{alias}' is the id of another record; pick a different alias")
    _check_near_duplicates(records, report)
    _check_lineage(records, by_id, report)
    return problems


def _check_result_or_reason(record: Record, report) -> None:
    """A method record carries its headline result, or says in no_result_reason why it has none."""
    paper = record.paper
    tags = paper.taxonomy
    method = (tags.drafting or tags.verification) and not set(tags.scope) & set(NON_METHOD_SCOPES)
    if method and not paper.reported_results and not paper.no_result_reason:
        where = ("reported_results",) if record.line_of("reported_results") != record.line_of() else ("taxonomy",)
        report(record, "reported_results", "is empty for a method record (drafting/verification tags); copy the paper's "
               "headline result, or set no_result_reason to one of " + " | ".join(NO_RESULT_REASONS) + " saying why", *where)


def _check_lossless_variants(record: Record, report) -> None:
    """Lossless means the unmodified target's distribution: a record or variant that trains the
    target's weights, or verifies with a quantized copy served in its place, cannot claim it, and the
    top-level flag agrees with the variants."""
    paper = record.paper
    modifying = [f"taxonomy.{facet} '{tag}'" for facet, tags in TARGET_MODIFYING_TAGS.items()
                 for tag in getattr(paper.taxonomy, facet) if tag in tags]
    if paper.lossless and modifying:
        report(record, "lossless", f"is true, but {modifying[0]} says the target's own weights are trained, so the output is "
               "no longer the unmodified target's; set lossless: false and name the variants that keep the target "
               "frozen in lossless_variants")
    variants = paper.lossless_variants
    for i, variant in enumerate(variants):
        changed = ("modifies the target's weights" if variant.modifies_target else
                   "verifies with a quantized copy served in place of the target" if variant.quantized_target else None)
        if variant.lossless and changed:
            report(record, f"lossless_variants[{i}].lossless", f"is true, but '{variant.variant}' {changed}; lossless "
                   "means the unmodified target's distribution, so set it to false", "lossless_variants", i, "lossless")
        # The alignment axis is what the catalog filters and the site's badges read, so a variant that trains
        # the target must show there too, not only in this list.
        if variant.modifies_target and not modifying:
            report(record, f"lossless_variants[{i}].modifies_target", f"is true for '{variant.variant}', but no taxonomy "
                   "tag says the target is fine-tuned; add 'target-fine-tuning' to taxonomy.alignment",
                   "lossless_variants", i, "modifies_target")
    if not variants:
        return
    if paper.lossless is None:
        report(record, "lossless_variants", "lists variants, but lossless is null (not a decoding method); set lossless or drop the list")
    elif paper.lossless and not all(v.lossless for v in variants):
        report(record, "lossless", "is true, but lossless_variants lists a lossy variant; set lossless: false (true only when every variant is lossless)")
    elif paper.lossless is False and all(v.lossless for v in variants) and not modifying:
        report(record, "lossless", "is false, but every variant in lossless_variants is lossless; set lossless: true or mark the lossy variant")


def _check_tags(record: Record, taxonomy: Taxonomy, report) -> None:
    import difflib

    tags = record.paper.taxonomy
    for facet in FACETS:
        nodes = taxonomy.facets[facet].nodes if facet in taxonomy.facets else {}
        for i, tag in enumerate(getattr(tags, facet)):
            if tag in nodes:
                continue
            elsewhere = taxonomy.node(tag)
            if elsewhere:
                hint = f"is a {elsewhere.facet} node; move it under taxonomy.{elsewhere.facet}"
            else:
                close = difflib.get_close_matches(tag, list(nodes), n=2)
                hint = "is not a node of taxonomy/" + facet + ".yaml" + (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "")
            report(record, f"taxonomy.{facet}[{i}]", f"'{tag}' {hint}", "taxonomy", facet, i)
        if len(set(getattr(tags, facet))) != len(getattr(tags, facet)):
            report(record, f"taxonomy.{facet}", "lists the same node twice", "taxonomy", facet)
    if not tags.drafting and not tags.scope:
        report(record, "taxonomy", "tag at least one drafting or scope node", "taxonomy")


def _check_dates(record: Record, today: dt.date, report) -> None:
    paper = record.paper
    if (paper.year, paper.month or 1) > (today.year, today.month):
        report(record, "year" if paper.year > today.year else "month", f"{paper.year}-{paper.month or 1:02d} is in the future")
    posted = arxiv_posted(paper.arxiv)
    if posted:
        if paper.year < posted[0] - 1:
            report(record, "year", f"{paper.year} is long before arXiv {paper.arxiv} was posted ({posted[0]}-{posted[1]:02d}); check the id")
        elif (paper.year, paper.month or 12) > posted and paper.venue == "arXiv":
            report(record, "month" if paper.year == posted[0] else "year", f"the preprint is dated {paper.year}-{paper.month or 0:02d}, after arXiv {paper.arxiv} was posted ({posted[0]}-{posted[1]:02d}); use the first version's date")


def _check_near_duplicates(records: list[Record], report) -> None:
    from rapidfuzz import fuzz, process

    titles = [normalize_title(r.paper.title) for r in records]
    scores = process.cdist(titles, titles, scorer=fuzz.ratio, score_cutoff=NEAR_DUPLICATE_TITLE_SCORE, workers=1)
    for i, j in zip(*scores.nonzero()):
        if i >= j or titles[i] == titles[j]:
            continue  # identical titles are reported as exact duplicates
        a, b = records[i], records[j]
        if b.paper.id in a.paper.not_duplicate_of or a.paper.id in b.paper.not_duplicate_of:
            continue
        report(b, "title", f"nearly identical to {a.display} ('{a.paper.title}'); merge them if they are one paper, else add not_duplicate_of: [{a.paper.id}]")


def _check_lineage(records: list[Record], by_id: dict[str, Record], report) -> None:
    for record in records:
        for i, parent in enumerate(record.paper.builds_on):
            if parent not in by_id:
                report(record, f"builds_on[{i}]", f"'{parent}' is not a cataloged paper id", "builds_on", i)
        for i, other in enumerate(record.paper.not_duplicate_of):
            if other == record.paper.id:
                report(record, f"not_duplicate_of[{i}]", "names the record itself; list only the other records "
                       "whose titles are nearly identical", "not_duplicate_of", i)
            elif other not in by_id:
                report(record, f"not_duplicate_of[{i}]", f"'{other}' is not a cataloged paper id", "not_duplicate_of", i)
    # Depth-first search for cycles with an explicit stack: a chain of thousands of records must
    # not reach Python's recursion limit. `path` is the current chain, `on_path` its positions.
    done: set[str] = set()
    for start in sorted(by_id):
        if start in done:
            continue
        path, on_path = [start], {start: 0}
        pending = [iter(by_id[start].paper.builds_on)]
        while pending:
            parent = next(pending[-1], None)
            if parent is None:
                done.add(path[-1])
                del on_path[path.pop()]
                pending.pop()
            elif parent in on_path:
                cycle = path[on_path[parent]:] + [parent]
                for member in cycle[:-1]:
                    report(by_id[member], "builds_on", "lineage cycle: " + " -> ".join(cycle) + "; a paper cannot (indirectly) build on itself")
            elif parent in by_id and parent not in done:
                on_path[parent] = len(path)
                path.append(parent)
                pending.append(iter(by_id[parent].paper.builds_on))


def github_annotation(problem: Problem, level: str = "error") -> str:
    """A GitHub Actions annotation (error or warning). Values are escaped as the runner expects (%,
    CR, LF; also ':' and ',' in properties), so a record cannot end the line and inject its own command."""

    def data(text: str) -> str:
        return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    return f"::{level} file={prop(problem.file)},line={problem.line},title={prop(problem.field)}::{data(problem.message)}"
