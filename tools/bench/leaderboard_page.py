"""The leaderboard page: measured result files, then what the papers and Spec-Bench report.

`render_markdown(results_dir)` is the site's leaderboard page body. Its first part,
`measured_markdown`, depends on the result files alone (and on which measured methods have a
record in papers/, to link them); `specatlas leaderboard` writes it to
results/LEADERBOARD.md (or checks that file), so the committed page is exactly what the committed
results say. The reported part reads the catalog beside results/ and Spec-Bench's published
leaderboard (results/published/, see `specatlas.bench.published`), which change independently of
the measured runs.

Each table's heading states what its numbers depend on (`aggregate.Table`). Methods that could not
run are listed as failed, never ranked; refused result files are listed with their first problem.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from statistics import fmean
from urllib.parse import quote

from specatlas.bench import charts
from specatlas.bench.aggregate import (NO_POLICY, Entry, Line, Loaded, Table, current_failures, fmt, load_all,
                                       method_paper_id, milliseconds, percent, table_lines, tables)
from specatlas.bench.published import SpecBenchLeaderboard, load_spec_bench
from specatlas.bench.questions import SUBTASKS
from specatlas.bench.results import Run, curve_warning, forward_cost, references, row_name
from specatlas.bench.targets import WIDE_RATIO, WIDE_ROWS
from specatlas.catalog.schema import Paper
from specatlas.catalog.validate import validate
from specatlas.impls.engine.draft_length import COST_AWARE as DEFAULT_POLICY
from specatlas.impls.engine.draft_length import PAPER as PAPER_POLICY
from specatlas.impls.registry import resolve
from specatlas.site.catalog import public_url
from specatlas.site.reported import source_text
from specatlas.site.text import md, md_code, md_link

PAGE_FILE = "LEADERBOARD.md"
PAGE_START = "Measured by `specatlas bench`"  # how every page this module writes begins
KINDS = {"specatlas": "SpecAtlas", "peer": "peer"}
IDLE_DRAFTING = 0.05  # drafted tokens per step below which a method effectively did not speculate
TOP_ROWS = 10  # rows shown above the fold of each table; the rest open on a click
Linker = Callable[[str], "str | None"]
FileLinker = Callable[[str], str]  # a result file's name, URL-quoted -> the URL of the raw file


def render_markdown(results_dir: Path, link: Linker | None = None, papers: dict[str, Paper] | None = None,
                    loaded: Loaded | None = None, raw: FileLinker | None = None) -> str:
    """The site's leaderboard page body. `link(method id)` is the URL of the method's paper page,
    or None; by default, its record beside results/. `raw(file name)` is the URL of a result
    file; by default the file beside the page. `papers` (id -> record) and `loaded` (what
    `load_all` returned) save a caller that has them from reading them again."""
    runs, failed = loaded or load_all(Path(results_dir))
    link = link or record_linker(Path(results_dir).parent)
    measured_ids = sorted({method_paper_id(m.id) for run, _ in runs for m in run.methods})
    return (_measured(runs, failed, link, raw or _beside) + "\n\n"
            + reported_markdown(measured_ids, Path(results_dir).parent, link, papers))


def _beside(name: str) -> str:
    """results/LEADERBOARD.md links to the result files in its own folder."""
    return name


def record_linker(root: Path) -> Linker:
    """Links from results/LEADERBOARD.md to the records in papers/."""
    return lambda method_id: f"../papers/{method_id}.yaml" if (root / "papers" / f"{method_id}.yaml").is_file() else None


def measured_markdown(results_dir: Path, link: Linker | None = None, raw: FileLinker | None = None) -> str:
    return _measured(*load_all(Path(results_dir)), link or record_linker(Path(results_dir).parent), raw or _beside)


def _measured(runs: list[tuple[Run, str]], failed: list[tuple[str, str]], link: Linker, raw: FileLinker) -> str:
    out = [
        PAGE_START + ", recomputed from the raw per-question samples in the result "
        "files under `results/`, which also record how to repeat each run. One table per hardware, "
        "model, dtype, kernels, prompt set and sample size, each stated in its heading: never compare "
        "rows across tables. On each hardware the largest run (questions × tokens × runs) comes first. "
        "What each column means is explained [under the tables](#reading-the-tables).",
    ]
    grouped = tables(runs)
    headlines = {}  # hardware -> its first table, the largest run
    for table, _ in grouped:
        headlines.setdefault(table.hardware, table)
    if grouped:
        members_of = {table: members for table, members in grouped}
        out += ["", "Hardware measured, with the fastest method of its headline table:", ""]
        out += [f"- {md(t.hardware)}: {_fastest(members_of[t])} ({md(t.prompt_set)}, {md(t.sample_size)}, "
                f"{md(t.model)} {md(t.dtype)})" for t in headlines.values()]
    for table, members in grouped:
        out += ["", _group_markdown(table, members, link, raw, headlines[table.hardware] is table)]
    if not grouped:
        out += ["", "No valid result files yet."]
    if failed:
        out += ["", "## Result files that failed checks", "", "| File | Problem |", "|---|---|"]
        out += [f"| {md(name)} | {md(why)} |" for name, why in failed]
    out += [
        "", "## Reading the tables", "",
        "- **Headings** state the hardware, the target model, its dtype and linear-layer kernels, the "
        "prompt set and the sample size: questions × new tokens per turn × runs of each question (the "
        "repeats of one result file). The raw result files are linked under each heading.",
        "- **One row per method and draft-length policy**, over every run in the table: the mean, "
        "± the standard deviation between runs when there are several; each run's own numbers are in "
        "the *Runs* block under the table. A method with trained weights (heads, adapter, the distilled "
        "drafter), which are retrained from time to time, counts only the runs of the weights its newest "
        "run used: the others are named under the table and marked *other weights* in the *Runs* block.",
        "- **Overall speedup** (×): Spec-Bench's definition, the mean per-question throughput divided "
        "by the autoregressive baseline's, measured in the same session and interleaved with the "
        "methods. **Tokens/s ratio** (×): total tokens over total time, divided likewise.",
        "- **Accepted** (tokens per target forward): mean tokens committed per verification step "
        "(1.00 for plain decoding).",
        "- **Predicted** (×): the speedup the accepted tokens would give if drafting were free, using "
        "the target's measured cost of a forward over *w* tokens relative to a one-token step. The "
        "gap to the measured speedup is drafting and overhead.",
        "- **Policy**: how the draft length was chosen. *paper*: the paper's own settings (draft "
        "length, tree, window). *cost-aware*: from the target's measured forward costs and the "
        "acceptance seen so far, drafting only as far as it is expected to pay on this hardware, "
        "down to none. Peers keep their library's schedule and the baseline drafts nothing: –. Methods "
        "measured under both are shown side by side under the ranking.",
        "- **Drafter**: what made the drafts in this run: a draft model (when none is given: the "
        "distilled drafter shipped for the embedded model, else a shallow slice of the target), "
        "heads, or a lookup in the prompt or a datastore.",
        "- **Kind**: *SpecAtlas* is this repository's reference implementation of the paper; *peer* "
        "is another library's implementation (transformers), run on the same machine, model and "
        "prompts, as a check on ours.",
        "- **Other engines** (llama.cpp through llama-cpp-python, on the GGUF file the embedded model "
        "ships in, with its own quantized kernels): each row's speedup is over that engine's own greedy "
        "decoding in the same run, with its absolute tokens per second; *Same tokens as* compares its "
        "greedy outputs with its own greedy's (its greedy row: with our baseline's, which decodes the "
        "dequantized float32 weights, so rounding may differ).",
        "- **Lossless** (identical outputs / compared): every greedy output compared token by "
        "token with the baseline's.",
        "- **Target forward** and **overhead** (ms per decoding step): a step drafts, then verifies in one "
        "target forward. *Target forward* is that forward as the engine timed it (result files before "
        "2026-12-05 price it at its width on the run's cost curve, timed after 64 cached tokens, so their "
        "overhead also holds attention over the rest of the context and the tree mask); *overhead* is the rest "
        "of the verification time (acceptance, KV rollback, commit; the tree mask and positions are built "
        "inside the timed forward call), also as a share of "
        "a one-token forward on the cost curve. Drafting is apart, in its own column. Blank (–) where a "
        "row's steps were not timed (peers) or, priced, its verifications ran outside the counted forward "
        "(resumed from an early exit).",
    ]
    return "\n".join(out)


def _breakable(cell: str) -> str:
    """A drafter may name a path or hub id with no space in it: let it wrap after each "/" so that the
    table fits the page instead of scrolling."""
    return cell.replace("/", "/<wbr>")


def _group_markdown(table: Table, members: list[tuple[Run, str]], link: Linker, raw: FileLinker, headline: bool) -> str:
    """A table's section: a paragraph answering what is fastest here and why, a chart and the top rows,
    then everything else folded (every row, policies side by side, subtasks, time, engines, failures, runs)."""
    lines = table_lines(members)
    ranked = sorted((line for line in lines if line.ranked and not line.own_engine), key=lambda line: -line.mean("overall", "speedup"))
    engines = [line for line in lines if line.ranked and line.own_engine]
    broken = [(line, e) for line in lines for e in current_failures(line)]
    categories = [c for c in SUBTASKS if any(c in e.summary for line in ranked + engines for e in line.ok)]
    categories += sorted({c for line in ranked + engines for e in line.ok for c in e.summary} - {*SUBTASKS, "overall", "lossless"})
    policies = len({line.policy for line in lines} - {NO_POLICY}) > 1
    names = _display_names(lines)

    def name(line: Line) -> str:
        return names[line.method_id] + (f" ({line.policy})" if policies and line.policy != NO_POLICY else "")

    files = ", ".join(f"[{md(name)}]({raw(quote(name))})" for _, name in members)
    out = [f"## {md(table.title)}", "", in_short(members, ranked, names), ""]
    if ranked:
        out += [_speedup_chart(ranked[:TOP_ROWS], name, table, f"the {min(TOP_ROWS, len(ranked))} fastest rows"), ""]
    out += [("The largest run on this hardware: its headline table. " if headline else
             "Another table on this hardware; its headline table, the largest run, is above. ")
            + f"{_count(len(members), 'run')} (result files: {files}), averaged per row; weights sha256 {md(table.model_digest)}…, "
            f"prompt set {md(table.prompt_id)} sha256 {md(table.prompt_digest)}…; {len(ranked)} ranked rows"
            + (f", and {len(engines)} of other engines against their own greedy decoding (below)." if engines else ".")]
    out += ["", _ranking(ranked[:TOP_ROWS], 1, link, names)]
    if ranked:
        chart = "\n\n" + _speedup_chart(ranked, name, table, "every ranked row") if len(ranked) > TOP_ROWS else ""
        out += ["", _folded(f"All {len(ranked)} ranked rows, with tokens/s, predicted speedup, drafter and kind",
                            _ranking(ranked, 1, link, names, wide=True) + chart)]
    more = _more(ranked, engines, broken, lines, categories, link, name, names)
    if more:
        out += ["", _folded("Policies side by side, speedup by subtask, where the time goes"
                            + (", other engines" if engines else "") + (", failed runs" if broken else ""), more)]
    out += ["", _runs_block(members, lines, names)]
    return "\n".join(out)


def _fastest(members: list[tuple[Run, str]]) -> str:
    lines = [line for line in table_lines(members) if line.ranked and not line.own_engine]
    if not lines:
        return "no method measured"
    top = max(lines, key=lambda line: line.mean("overall", "speedup"))
    return f"**{md(_display_names(lines)[top.method_id])}**, {fmt(top.mean('overall', 'speedup'))} ({md(top.policy)})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _folded(summary: str, body: str) -> str:
    return "\n".join(['<details markdown="1">', f"<summary>{md(summary)}</summary>", "", body, "", "</details>"])


def _display_names(lines: list[Line]) -> dict[str, str]:
    """method id -> the name rows and charts show: the method's own name (its head before a colon);
    the id added where two methods would read alike."""
    heads = {line.method_id: method_paper_id(line.method.name.partition(":")[0].strip()) or line.method_id for line in lines}
    repeated = {head for head in heads.values() if list(heads.values()).count(head) > 1}
    return {i: f"{head} ({i})" if head in repeated else head for i, head in heads.items()}


def _ranking(ranked: list[Line], first: int, link: Linker, names: dict[str, str], wide: bool = False) -> str:
    """The ranked rows: the few columns a reader needs, or (`wide`) every column."""
    head = "| # | Method | Policy | Overall speedup | Accepted (tokens/forward) | Lossless (identical/compared) | Runs |"
    rule = "|---:|---|---|---:|---:|---|---:|"
    if wide:
        head = ("| # | Method | Policy | Overall speedup | Tokens/s ratio | Accepted (tokens/forward) | Predicted speedup "
                "| Drafter | Kind | Lossless (identical/compared) | Runs |")
        rule = "|---:|---|---|---:|---:|---:|---:|---|---|---|---:|"
    out = [head, rule]
    for rank, line in enumerate(ranked, first):  # the policy beside the method: on a phone both show before scrolling
        cells = [str(rank), _method_cell(line.method, link, names), md(line.policy), f"**{line.cell('overall', 'speedup')}**"]
        if wide:
            cells += [line.cell("overall", "speedup_total"), line.cell("overall", "mean_accepted", ""),
                      line.cell("overall", "predicted"), _breakable(md(line.drafters)),
                      KINDS.get(line.method.kind, md(line.method.kind))]
        else:
            cells.append(line.cell("overall", "mean_accepted", ""))
        cells += [_lossless_cell(line), str(len(line.ok))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _speedup_chart(ranked: list[Line], name: Callable[[Line], str], table: Table, which: str) -> str:
    return charts.speedup_bars(
        [(name(line), line.mean("overall", "speedup"), min(line.values("overall", "speedup")),
          max(line.values("overall", "speedup"))) for line in ranked],
        f"Overall speedup over the baseline, {which} (mean over runs; whiskers: lowest to highest run): "
        f"{table.hardware}, {table.model}")


def _more(ranked: list[Line], engines: list[Line], broken: list[tuple[Line, Entry]], lines: list[Line],
          categories: list[str], link: Linker, name: Callable[[Line], str], names: dict[str, str]) -> str:
    """What the folded part of a table holds, below its ranking."""
    out = []
    side_by_side = _policies_side_by_side(lines, link, names)
    if side_by_side:
        out += ["", side_by_side]
    idle = [line for line in ranked if line.policy != NO_POLICY
            and line.drafted_per_step is not None and line.drafted_per_step < IDLE_DRAFTING]
    if idle:
        out += ["", "Rows near 1.00× that drafted (almost) nothing: "
                + ", ".join(f"{md(name(line))} ({line.drafted_per_step:.2f} drafted tokens per step)" for line in idle)
                + ". Under the cost-aware policy this means the drafter's tokens were predicted to cost more "
                "than they save on this hardware with this model, so the method fell back to plain decoding; "
                "its *paper* policy row, when measured, shows the method as published."]
    if ranked:
        out += ["", "**Speedup by subtask** (×, mean over runs):", "",
                "| Method | Policy | " + " | ".join(md(SUBTASKS.get(c, c)) for c in categories) + " | Overall |",
                "|---|---|" + "---:|" * (len(categories) + 1)]
        for line in ranked:
            out.append(f"| {_method_cell(line.method, link, names)} | {md(line.policy)} | "
                       + " | ".join(fmt(line.mean(c, "speedup")) for c in categories)
                       + f" | {fmt(line.mean('overall', 'speedup'))} |")
        out += ["", charts.accepted_vs_speedup(
                    [(name(line), line.mean("overall", "mean_accepted"), line.mean("overall", "speedup"))
                     for line in ranked if line.mean("overall", "mean_accepted")],
                    "Mean accepted tokens against measured speedup: a point far right but low "
                    "loses its accepted tokens to drafting and verification cost")]
        out += ["", _time_table(ranked, names)]
    if engines:
        out += ["", _engines_table(engines, categories, names)]
    if broken:
        out += ["", "**Failed (not ranked)**", "", "| Method | Policy | Why | Run |", "|---|---|---|---|"]
        out += [f"| {_method_cell(e.method, link, names)} | {md(line.policy)} | {md_code(e.failure)} | {md(e.file)} |"
                for line, e in broken]
    earlier = sorted((line for line in lines if line.left_out), key=lambda line: (line.method_id, line.policy))
    if earlier:
        out += ["", "**Runs left out for their weights**: a row averages only the runs of the trained weights (heads, "
                "adapter, distilled drafter) its newest run used; these rows' earlier runs used other weights:", ""]
        out += [f"- {md(name(line))}: {len(line.left_out)} earlier run{'s' if len(line.left_out) > 1 else ''} with "
                f"other weights left out ({', '.join(md(e.file) for e in line.left_out)})" for line in earlier]
    return "\n".join(out).strip()


def in_short(members: list[tuple[Run, str]], ranked: list[Line], names: dict[str, str]) -> str:
    """The table's answer in one paragraph, from its numbers: the fastest row, then why, from what
    verifying and drafting cost on this machine (the cost curve, the rows' drafting time)."""
    if not ranked:
        return "**In short:** no method measured a speedup in this table."
    top = ranked[0]
    out = (f"**In short:** the fastest here is **{md(names[top.method_id])}** ({md(top.policy)} policy) at "
           f"{fmt(top.mean('overall', 'speedup'))} plain decoding, "
           f"{fmt(top.mean('overall', 'mean_accepted'), '')} tokens accepted per target forward.")
    curves = [run.cost_curve for run, _ in members if run.cost_curve]
    wide = fmean(forward_cost(c, WIDE_ROWS) / forward_cost(c, 1) for c in curves) if curves else None
    if wide is not None:
        out += (f" Verifying is {'nearly free' if wide <= WIDE_RATIO else 'not free'} on this hardware: a forward over "
                f"{WIDE_ROWS} tokens costs {wide:.2f}× a one-token forward.")
    shares = {True: [], False: []}  # drafts with a model or head -> each row's share of its time spent drafting
    for line in ranked:
        seconds, drafting = line.mean("overall", "seconds"), line.mean("overall", "draft_seconds")
        if seconds and drafting is not None and line.policy != NO_POLICY:
            shares[_drafts_with_a_model(line.method_id)].append(drafting / seconds)
    if shares[True] and shares[False] and max(map(fmean, shares.values())) > 0.005:  # older files timed no drafting
        costly, cheap = fmean(shares[True]), fmean(shares[False])
        out += (f" Drafting {'is not' if costly > 2 * cheap else 'is cheap for every drafter'}: methods that draft with a "
                f"trained head or a draft model spend {costly:.0%} of their time drafting, those that copy from the prompt "
                f"or a datastore {cheap:.0%}")
        if costly > 2 * cheap and not _drafts_with_a_model(top.method_id):
            out += ", so drafters that copy from the context win"
        elif _drafts_with_a_model(top.method_id):
            out += ", and a trained drafter's longer accepted drafts pay for its drafting"
    rival = next((line for line in ranked if _drafts_with_a_model(line.method_id) != _drafts_with_a_model(top.method_id)), None)
    if rival:
        kind = "drafter that is a model or head" if _drafts_with_a_model(rival.method_id) else "method that needs no drafter"
        out += (f"{' The' if out.endswith('.') else '; the'} fastest {kind}, {md(names[rival.method_id])}, "
                f"reaches {fmt(rival.mean('overall', 'speedup'))}.")
    elif not out.endswith("."):
        out += "."
    return out


def _drafts_with_a_model(method_id: str) -> bool:
    spec = resolve(method_id)
    return bool(spec and (spec.trained_head or spec.uses_draft_model))


def _runs_block(members: list[tuple[Run, str]], lines: list[Line], labels: dict[str, str]) -> str:
    """Each run's settings and its own overall speedups, folded away under the table."""
    out = ['<details markdown="1">', f"<summary>Runs ({len(members)}): settings and each run's overall speedup</summary>", ""]
    for run, name in members:
        c, p = run.config, run.provenance
        commits = dict.fromkeys(f"{(s.git_commit or 'unknown')[:10]}{' (dirty)' if s.git_dirty else ''}" for s in run.sessions)
        out.append(f"- {md(name)}: {md(p['started'])}, commit {md(', '.join(commits))}, torch {md(c['torch'])}, "
                   f"transformers {md(c['transformers'])}, device {md(c['device'])}, {len(c['question_ids'])} questions × "
                   f"{c['repeats']} repeat(s), max {c['max_new_tokens']} new tokens per turn, temperature "
                   f"{c['temperature']:g}, seed {c['seed']}, {len(run.sessions)} session(s)"
                   + (f". **Warning**: {md(curve_warning(run))}" if curve_warning(run) else ""))
    names = [name for _, name in members]
    out += ["", "| Method | Policy | " + " | ".join(md(n) for n in names) + " |", "|---|---|" + "---:|" * len(names)]
    for line in sorted(lines, key=lambda line: (line.method_id, line.policy)):
        by_file = {e.file: e for e in (*line.entries, *line.left_out)}
        left_out = {e.file for e in line.left_out}
        cells = []
        for n in names:
            entry = by_file.get(n)
            if entry is None:
                cells.append("–")
            elif entry.failure is not None:
                cells.append("failed")
            else:
                cells.append(fmt(entry.summary["overall"]["speedup"]) + (" (other weights)" if n in left_out else ""))
        shown = labels[line.method_id] + (f" (over {references(line.method)[0]})" if line.own_engine else "")
        out.append(f"| {md(shown)} | {md(line.policy)} | " + " | ".join(cells) + " |")
    out += ["", "</details>"]
    return "\n".join(out)


def _method_cell(method, link: Linker, names: dict[str, str]) -> str:
    """The method's name, linked to its paper, its id in the link's title."""
    paper_id = method_paper_id(method.id)
    url = link(paper_id)
    label = md(names.get(paper_id, method.name))
    return f'[{label}]({url} "{paper_id}")' if url else label


def _policies_side_by_side(lines: list[Line], link: Linker, names: dict[str, str]) -> str | None:
    """Each method measured under both its paper's settings and the cost-aware (tuned) policy, the
    two rows side by side: what the method gives as published, and tuned to this hardware."""
    by_method: dict[str, dict[str, Line]] = {}
    for line in lines:
        by_method.setdefault(line.method_id, {})[line.policy] = line
    pairs = [(ps[PAPER_POLICY], ps[DEFAULT_POLICY]) for ps in by_method.values() if PAPER_POLICY in ps and DEFAULT_POLICY in ps]
    if not pairs:
        return None

    def best(pair: tuple[Line, Line]) -> float:
        return max((line.mean("overall", "speedup") or 0) if line.ranked else 0 for line in pair)

    out = ["**Paper settings beside cost-aware (tuned)**: each method as its paper sets it up, and with the draft "
           "length tuned to this hardware's measured costs.", "",
           "| Method | Paper: speedup | Paper: accepted | Cost-aware: speedup | Cost-aware: accepted |",
           "|---|---:|---:|---:|---:|"]
    for paper, tuned in sorted(pairs, key=lambda pair: (-best(pair), pair[0].method_id)):
        cells = [_method_cell(paper.method, link, names), *paper.speedup_and_accepted("overall"), *tuned.speedup_and_accepted("overall")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _lossless_cell(line: Line) -> str:
    checks = [e.summary["lossless"] for e in line.ok]
    statuses = {c["status"] for c in checks}
    identical, compared = sum(c.get("identical", 0) for c in checks), sum(c.get("compared", 0) for c in checks)
    if statuses == {"pass"}:
        return f"✓ {identical}/{compared}"
    if "fail" in statuses:  # only lossy-by-design methods get here: failures are not ranked
        return f"lossy by design: {identical}/{compared} identical"
    return md("n/a (" + "; ".join(dict.fromkeys(c["reason"] for c in checks if "reason" in c)) + ")")


def _engines_table(lines: list[Line], categories: list[str], names: dict[str, str]) -> str:
    """Another engine's rows, each against that engine's own greedy decoding in the same run: its
    kernels and weights file are not ours, so only its own plain decoding is a fair yardstick."""
    out = ["**Other engines, each against its own greedy decoding** (same machine, model, prompts and threads; "
           "not ranked with the rows above, whose speedups are over our baseline):", "",
           "| Method | Speedup over its own greedy | Tokens/s | "
           + " | ".join(md(SUBTASKS.get(c, c)) for c in categories) + " | Accepted (tokens/forward) | Same tokens as | Runs |",
           "|---|---:|---:|" + "---:|" * len(categories) + "---:|---|---:|"]
    for line in sorted(lines, key=lambda line: (references(line.method)[0] != line.method_id, line.method_id)):
        faster_than, same_as = references(line.method)
        checks = [e.summary["lossless"] for e in line.ok]
        identical, compared = sum(c.get("identical", 0) for c in checks), sum(c.get("compared", 0) for c in checks)
        same = f"{md(row_name(same_as))}: {identical}/{compared}" if compared else "n/a (sampled)"
        cells = [md(names[line.method_id]), f"**{line.cell('overall', 'speedup')}** over {md(faster_than)}",
                 fmt(line.tokens_per_second, ""), *(fmt(line.mean(c, "speedup")) for c in categories),
                 line.cell("overall", "mean_accepted", ""), same, str(len(line.ok))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _time_table(lines: list[Line], names: dict[str, str]) -> str:
    out = ["Where the time goes (all questions, mean over runs) and how often each draft position was accepted:", "",
           "| Method | Policy | Drafted (tokens/step) | Drafting (s) | Verification (s) | Wall (s) | Target forward (ms/step) "
           "| Overhead (ms/step) | Overhead (% of a one-token forward) | Acceptance by draft position |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for line in lines:
        runs = [r for r in (e.summary["overall"]["acceptance_by_position"] for e in line.ok) if r]
        # per position, the mean over the runs that drafted there (None: a position none drafted at)
        by_position = [[r[k] for r in runs if len(r) > k and r[k] is not None] for k in range(max(map(len, runs), default=0))]
        positions = " · ".join(fmt(fmean(values) if values else None, "") for values in by_position) or "–"
        out.append(f"| {md(names[line.method_id])} | {md(line.policy)} | {fmt(line.drafted_per_step, '')} | "
                   f"{fmt(line.mean('overall', 'draft_seconds'), '')} | {fmt(line.mean('overall', 'verify_seconds'), '')} | "
                   f"{line.mean('overall', 'seconds'):.1f} | {milliseconds(line.per_step('forward'))} | "
                   f"{milliseconds(line.per_step('overhead'))} | {percent(line.per_step('overhead_share'))} | {positions} |")
    return "\n".join(out)


def reported_markdown(method_ids: list[str], root: Path, link: Linker | None = None,
                      papers: dict[str, Paper] | None = None) -> str:
    """Paper-reported results of the measured methods, and Spec-Bench's published leaderboard."""
    out = ["## Reported, not measured", "",
           "Numbers below are copied from the papers (their records' `reported_results`) and from "
           "Spec-Bench's published leaderboard. Hardware, models, prompts and settings differ from "
           "the measured tables above and between sources: they are context, not a ranking."]
    out += ["", _papers_table(method_ids, root, link or record_linker(root), papers)]
    out += ["", _spec_bench_tables(load_spec_bench(root))]
    return "\n".join(out)


def _papers_table(method_ids: list[str], root: Path, link: Linker, papers: dict[str, Paper] | None) -> str:
    if papers is None:
        if not (root / "papers").is_dir():
            return "No catalog beside the results: paper-reported numbers are not shown."
        _, records, _ = validate(root=root)
        papers = {r.paper.id: r.paper for r in records if r.paper}
    out = ["| Method | Metric | Value | Target | Drafter | Hardware | Benchmark | Temp. | Source |",
           "|---|---|---|---|---|---|---|---|---|"]
    for paper_id in method_ids:
        paper = papers.get(paper_id)
        for r in paper.reported_results if paper else []:
            url = link(paper.id)
            cells = [r.metric, f"{r.value:g}", r.target_model, r.drafter or "–", r.hardware or "–", r.benchmark,
                     "–" if r.temperature is None else f"{r.temperature:g}"]
            method = f"[{md(paper.id)}]({url})" if url else md(paper.id)
            out.append(f"| {method} | " + " | ".join(map(md, cells)) + f" | {md_link(source_text(r), public_url(paper))} |")
    if len(out) == 2:
        return "The measured methods' records report no numbers."
    return "### Reported by the papers of the measured methods\n\n" + _folded(f"{len(out) - 2} numbers the papers report", "\n".join(out))


def _spec_bench_tables(data: SpecBenchLeaderboard) -> str:
    columns = [*SUBTASKS.values(), "#Mean Accepted Tokens", "Overall"]
    out = ["### Spec-Bench's published leaderboard", "",
           f"Source: {md_link(data.source, data.url)} ({md(data.licence)}). Settings: {md(data.settings)}."]
    for device in dict.fromkeys(row["device"] for row in data.rows):
        out += ["", f"**{md(device)}**: {md(data.hardware.get(device, device))}", "",
                "| Method | Target | " + " | ".join(md(c) for c in columns) + " |", "|---" * (2 + len(columns)) + "|"]
        for row in (r for r in data.rows if r["device"] == device):
            values = ["–" if row.get(c) is None else md(f"{row[c]:g}") for c in columns]
            out.append(f"| {md(row['method'])} | {md(row['target_model'])} | " + " | ".join(values) + " |")
    return "\n".join(out)
