"""The leaderboard: measured result files, then what the papers and Spec-Bench report.

`render_markdown(results_dir)` is the site's leaderboard page body. Its first part,
`measured_markdown`, depends on the result files alone; `specatlas leaderboard` writes it to
results/LEADERBOARD.md (or checks that file), so the committed page is exactly what the committed
results say. The reported part reads the catalog beside results/ and the Spec-Bench data in
../shared when present, which change independently of the results.

Tables are per (hardware, model, dtype, prompt set): a speedup only means something on the
machine and model it was measured on, so nothing is ranked across them. Rows whose lossless check
failed, and methods that could not run, are listed as failed, never ranked; files that fail the
schema are listed as failed too.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from specatlas.bench import charts
from specatlas.bench.questions import SUBTASKS
from specatlas.bench.results import Run, load
from specatlas.site.text import md

PAGE_FILE = "LEADERBOARD.md"


@dataclass
class Row:
    run: Run
    file: str
    method: object  # results.Method
    summary: dict | None

    @property
    def failure(self) -> str | None:
        if self.method.error:
            return f"could not run: {self.method.error}"
        if self.summary is None:
            return "no measured samples"
        if self.summary["overall"]["speedup"] is None:
            return "no speedup: the baseline produced no tokens"
        check = self.summary["lossless"]
        if check["status"] == "fail" and self.method.lossless:
            first = check["first_divergence"]
            return (f"lossless check failed: {check['compared'] - check['identical']} of {check['compared']} outputs "
                    f"differ from the baseline's (first: question {first['question_id']}, turn {first['turn']}, "
                    f"token {first['position']})")
        return None


def render_markdown(results_dir: Path) -> str:
    runs, failed = load_all(Path(results_dir))
    measured_ids = sorted({m.id for run, _ in runs for m in run.methods})
    return _measured(runs, failed) + "\n\n" + reported_markdown(measured_ids, Path(results_dir).parent)


def load_all(results_dir: Path) -> tuple[list[tuple[Run, str]], list[tuple[str, str]]]:
    """(run, file name) for valid result files, (file name, why) for the others."""
    runs, failed = [], []
    for path in sorted(results_dir.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            runs.append((load(path), path.name))
        except ValueError as exc:
            failed.append((path.name, str(exc)))
    return runs, failed


def _group_key(run: Run) -> tuple[str, str, str, str]:
    from specatlas.bench.provenance import label

    model = run.config["model"]
    digest = (model["target_sha256"] or "unknown")[:12]
    prompts = run.config["prompt_set"]
    return (label(run.provenance["hardware"]), f"{model['target']} (sha256 {digest}…)", run.config["dtype"],
            f"{prompts['id']} (sha256 {prompts['sha256'][:12]}…)")


def measured_markdown(results_dir: Path) -> str:
    return _measured(*load_all(Path(results_dir)))


def _measured(runs: list[tuple[Run, str]], failed: list[tuple[str, str]]) -> str:
    out = [
        "Every number in this part was measured by `specatlas bench` and is recomputed from the raw "
        "per-question samples in the result files under `results/`, which also record how to repeat "
        "the run (commit, packages, hardware, weights and prompt digests, settings, seed).",
        "",
        "- **Speedup**: Spec-Bench's definition, the mean per-question throughput divided by the "
        "autoregressive baseline's, measured in the same session and interleaved with the methods. "
        "**Tokens/s ratio**: total tokens over total time, divided likewise.",
        "- **Accepted**: mean tokens committed per target forward (1.00 for plain decoding).",
        "- **Predicted**: the speedup the accepted tokens would give if drafting were free, using the "
        "target's measured cost of a forward over *w* tokens relative to a one-token step. The gap to "
        "the measured speedup is drafting and overhead.",
        "- **Lossless**: every greedy output compared token by token with the baseline's.",
        "",
        "Tables are per hardware, model, dtype and prompt set; never compare rows across tables.",
    ]
    groups: dict[tuple, list[tuple[Run, str]]] = {}
    for run, name in runs:
        groups.setdefault(_group_key(run), []).append((run, name))
    for key, members in sorted(groups.items()):
        out += ["", _group_markdown(key, members)]
    if not groups:
        out += ["", "No valid result files yet."]
    if failed:
        out += ["", "## Result files that failed checks", "", "| File | Problem |", "|---|---|"]
        out += [f"| {md(name)} | {md(why)} |" for name, why in failed]
    return "\n".join(out)


def _fmt(value: float | None, suffix: str = "×") -> str:
    return "–" if value is None else f"{value:.2f}{suffix}"


def _kernels(packed: int) -> str:
    return f"{packed} packed for oneDNN" if packed else "default kernels"


def _group_markdown(key: tuple, members: list[tuple[Run, str]]) -> str:
    hardware, model, dtype, prompts = key
    out = [f"## {md(hardware)} · {md(model)} · {md(dtype)} · {md(prompts)}", ""]
    for run, name in members:
        c, p = run.config, run.provenance
        commits = dict.fromkeys(f"{(s.git_commit or 'unknown')[:10]}{' (dirty)' if s.git_dirty else ''}" for s in run.sessions)
        git = ", ".join(commits)
        out.append(f"- {md(name)}: {md(p['started'])}, commit {md(git)}, torch {md(c['torch'])}, "
                   f"transformers {md(c['transformers'])}, device {md(c['device'])}, {len(c['question_ids'])} questions × "
                   f"{c['repeats']} repeat(s), max {c['max_new_tokens']} new tokens per turn, temperature "
                   f"{c['temperature']:g}, seed {c['seed']}, {len(run.sessions)} session(s)"
                   + (f", linears: {_kernels(c['packed_linears'])}" if "packed_linears" in c else ""))
    rows = [Row(run, name, method, run.summary.get(method.id)) for run, name in members for method in run.methods]
    ranked = sorted((r for r in rows if r.failure is None), key=lambda r: -r.summary["overall"]["speedup"])
    broken = [r for r in rows if r.failure is not None]
    categories = [c for c in SUBTASKS if any(c in r.summary for r in ranked)]
    categories += sorted({c for r in ranked for c in r.summary} - {*SUBTASKS, "overall", "lossless"})
    several = len(members) > 1
    out += ["", "| # | Method | Kind | " + " | ".join(md(SUBTASKS.get(c, c)) for c in categories)
            + " | Overall | Tokens/s ratio | Accepted | Predicted | Lossless |" + (" Run |" if several else ""),
            "|---" * (8 + len(categories) + several) + "|"]
    for rank, row in enumerate(ranked, 1):
        s = row.summary
        cells = [str(rank), _method_cell(row), row.method.kind,
                 *(_fmt(s[c]["speedup"]) if c in s else "–" for c in categories),
                 f"**{_fmt(s['overall']['speedup'])}**", _fmt(s["overall"]["speedup_total"]),
                 _fmt(s["overall"]["mean_accepted"], ""), _fmt(s["overall"]["predicted"]), _lossless_cell(row)]
        out.append("| " + " | ".join(cells) + " |" + (f" {md(row.file)} |" if several else ""))
    if ranked:
        label = (lambda r: f"{r.method.id} ({r.file[:10]})") if several else (lambda r: r.method.id)
        out += ["", charts.speedup_bars([(label(r), r.summary["overall"]["speedup"]) for r in ranked],
                                        f"Overall speedup over the baseline: {hardware}, {model}"),
                "", charts.accepted_vs_speedup(
                    [(label(r), r.summary["overall"]["mean_accepted"], r.summary["overall"]["speedup"])
                     for r in ranked if r.summary["overall"]["mean_accepted"]],
                    "Mean accepted tokens against measured speedup: the distance below the diagonal trend is drafting cost")]
        out += ["", _time_table(ranked, several)]
    if broken:
        out += ["", "**Failed (not ranked)**", "", "| Method | Why |" + (" Run |" if several else ""),
                "|---|---|" + ("---|" if several else "")]
        out += [f"| {_method_cell(r)} | {md(r.failure)} |" + (f" {md(r.file)} |" if several else "") for r in broken]
    return "\n".join(out)


def _method_cell(row: Row) -> str:
    return f"{md(row.method.name)} ({md(row.method.id)})"


def _lossless_cell(row: Row) -> str:
    check = row.summary["lossless"]
    if check["status"] == "pass":
        return f"✓ {check['identical']}/{check['compared']}"
    if check["status"] == "fail":  # only lossy-by-design methods get here: failures are not ranked
        return f"lossy by design: {check['identical']}/{check['compared']} identical"
    return md(f"n/a ({check['reason']})")


def _time_table(rows: list[Row], several: bool) -> str:
    out = ["Where the time goes (all questions) and how often each draft position was accepted:", "",
           "| Method | Drafting s | Verification s | Wall s | Acceptance by draft position |" + (" Run |" if several else ""),
           "|---|---|---|---|---|" + ("---|" if several else "")]
    for row in rows:
        s = row.summary["overall"]
        by_position = s["acceptance_by_position"]
        positions = " · ".join(f"{a:.2f}" for a in by_position) if by_position else "–"
        out.append(f"| {md(row.method.id)} | {_fmt(s['draft_seconds'], '')} | {_fmt(s['verify_seconds'], '')} | "
                   f"{s['seconds']:.1f} | {positions} |" + (f" {md(row.file)} |" if several else ""))
    return "\n".join(out)


# Reported numbers ------------------------------------------------------------------------------

def reported_markdown(method_ids: list[str], root: Path) -> str:
    """Paper-reported results of the measured methods, and Spec-Bench's published leaderboard."""
    out = ["## Reported, not measured", "",
           "Numbers below are copied from the papers (their records' `reported_results`) and from "
           "Spec-Bench's published leaderboard. Hardware, models, prompts and settings differ from "
           "the measured tables above and between sources: they are context, not a ranking."]
    out += ["", _papers_table(method_ids, root)]
    spec_bench = root.parent / "shared" / "data" / "spec_bench" / "reported_leaderboard.json"
    if spec_bench.is_file():
        out += ["", _spec_bench_tables(spec_bench)]
    return "\n".join(out)


def _papers_table(method_ids: list[str], root: Path) -> str:
    if not (root / "papers").is_dir():
        return "No catalog beside the results: paper-reported numbers are not shown."
    from specatlas.catalog.validate import validate

    _, records, _ = validate(root=root)
    papers = {r.paper.id: r.paper for r in records if r.paper}
    out = ["### Reported by the papers of the measured methods", "",
           "| Method | Metric | Value | Target | Drafter | Hardware | Benchmark | Temp. | Source |",
           "|---|---|---|---|---|---|---|---|---|"]
    for paper_id in method_ids:
        paper = papers.get(paper_id)
        for r in paper.reported_results if paper else []:
            cells = [f"[{md(paper.id)}](papers/{paper.id}.md)", r.metric, f"{r.value:g}", r.target_model,
                     r.drafter or "–", r.hardware or "–", r.benchmark,
                     "–" if r.temperature is None else f"{r.temperature:g}", r.source + (f" ({r.note})" if r.note else "")]
            out.append("| " + " | ".join(c if i == 0 else md(c) for i, c in enumerate(cells)) + " |")
    return "\n".join(out) if len(out) > 4 else "The measured methods' records report no numbers."


def _spec_bench_tables(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data["rows"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"Spec-Bench's published leaderboard could not be read ({md(type(exc).__name__)})."
    columns = [*SUBTASKS.values(), "#Mean Accepted Tokens", "Overall"]
    out = ["### Spec-Bench's published leaderboard", "",
           f"Source: {md(data.get('source', path.name))}. Settings: {md(data.get('settings', 'unknown'))}."]
    for device in dict.fromkeys(row.get("device") for row in rows):
        hardware = data.get("hardware", {}).get(device, device)
        out += ["", f"**{md(device)}**: {md(hardware)}", "",
                "| Method | Target | " + " | ".join(md(c) for c in columns) + " |", "|---" * (2 + len(columns)) + "|"]
        for row in (r for r in rows if r.get("device") == device):
            values = ["–" if row.get(c) is None else md(f"{row[c]:g}" if isinstance(row[c], (int, float)) else row[c])
                      for c in columns]
            out.append(f"| {md(row.get('method', '?'))} | {md(row.get('target_model', '?'))} | " + " | ".join(values) + " |")
    return "\n".join(out)


# Command ---------------------------------------------------------------------------------------

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=None, help="results folder (default: results/ in the repository)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true",
                        help=f"exit 1 if results/{PAGE_FILE} differs from what the result files say")
    action.add_argument("--print", action="store_true", help="print the full page (with reported numbers) instead")


def execute(args: argparse.Namespace) -> int:
    from specatlas.paths import repo_root

    results_dir = args.results or repo_root() / "results"
    if not results_dir.is_dir():
        print(f"specatlas leaderboard: no results folder at {results_dir}", file=sys.stderr)
        return 2
    if args.print:
        sys.stdout.write(render_markdown(results_dir) + "\n")
        return 0
    page, expected = results_dir / PAGE_FILE, measured_markdown(results_dir) + "\n"
    if args.check:
        if page.is_file() and page.read_text(encoding="utf-8") == expected:
            return 0
        print(f"specatlas leaderboard: {page} is out of date; run `specatlas leaderboard`", file=sys.stderr)
        return 1
    from specatlas.bench.results import write_atomic
    from specatlas.fsutil import WriteError

    try:
        write_atomic(page, expected)
    except WriteError as exc:
        print(f"specatlas leaderboard: {exc}", file=sys.stderr)
        return 1
    _, failed = load_all(results_dir)
    for name, why in failed:
        print(f"{results_dir / name}: {why}", file=sys.stderr)
    print(f"leaderboard written to {page}")
    return 0
