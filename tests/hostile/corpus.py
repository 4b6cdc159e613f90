"""The hostile-input corpus: what a new user, a careless contributor or a hostile pull request can
feed the `specatlas` command, and what must come back.

Each case prepares a throwaway catalog (the real taxonomy, two valid records and one valid result
file), writes its hostile input there, and runs the CLI in a forked child bounded in time and
memory. A case passes when the command gives the expected outcome with its message on one line,
prints no traceback, and leaves every record and result that was there before unchanged.

`python tests/hostile/corpus.py` runs the whole corpus and prints the tally (clean, traceback,
hang or memory blow-up, lost data, wrong answer) used in the issue's before/after table.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parent.parent.parent
BASE = REPO / "tests" / "fixtures" / "base"
GOOD = (BASE / "alpha2023drafting.yaml").read_text(encoding="utf-8")
TIMEOUT_S = 20
MEMORY_HEADROOM = 1 << 30  # the child may grow by 1 GiB of address space, no more
NEW = "papers/gamma2024case.yaml"


def record(**changes: str) -> str:
    """A valid record (gamma2024case) with top-level lines replaced: changes maps field -> raw YAML
    text after `field:`; a value of None drops the field."""
    lines = GOOD.replace("alpha2023drafting", "gamma2024case").replace("Drafting Tokens with a Small Model",
                                                                       "Gamma Study of Hostile Input")
    lines = lines.replace("'2302.00001'", "'2402.00003'").replace("2302.00001", "2402.00003")
    lines = lines.replace("aliases: [alpha]", "aliases: [gamma]").replace("year: 2023", "year: 2024")
    out, replacing = [], False
    for line in lines.splitlines():
        key = line.split(":", 1)[0]
        if replacing and line.startswith(" "):
            continue  # the replaced field's own block (list items, folded text)
        replacing = not line.startswith(" ") and key in changes
        if replacing:
            if changes[key] is not None:
                out.append(f"{key}: {changes.pop(key)}")
            else:
                changes.pop(key)
            continue
        out.append(line)
    out += [f"{k}: {v}" for k, v in changes.items() if v is not None]
    return "\n".join(out) + "\n"


@dataclass
class Case:
    name: str
    argv: list[str]  # "{root}" and "{tmp}" are filled in
    files: dict[str, str | bytes] = field(default_factory=dict)  # relative to the catalog root
    prepare: Callable[[Path, Path], None] | None = None  # (root, tmp) for links, FIFOs, modes
    fails: bool = True  # expected: a non-zero exit (True) or success (False)
    message: str = ""  # must appear within one line of the output
    check: Callable[[Path, Path, str], str | None] | None = None  # extra check -> problem or None
    timeout: float = TIMEOUT_S


@dataclass
class Outcome:
    status: str  # "clean", "traceback", "hang", "lost", "wrong"
    detail: str
    returncode: int | None
    output: str


# Catalog ---------------------------------------------------------------------------------------

def _result_file(folder: Path) -> None:
    """One valid result file, as `specatlas bench` writes it (no model needed)."""
    from specatlas.bench.result_files import dumps
    from specatlas.bench.results import SCHEMA_VERSION, Run, config_hash, curve_fields, summarize

    config = {"methods": ["baseline", "fast"], "prompt_set": {"id": "set", "sha256": "ab" * 32},
              "question_ids": ["1"], "model": {"target": "tiny", "target_sha256": "cd" * 32, "drafter": None,
                                               "drafter_sha256": None},
              "device": "cpu", "dtype": "float32", "max_new_tokens": 4, "repeats": 1, "temperature": 0.0,
              "seed": 0, "draft_length": "auto", "torch_threads": 2, "torch": "2", "transformers": "5"}

    def turn(seconds):
        return {"seed": 1, "tokens": [1, 2, 3, 4], "wall_seconds": seconds, "steps": 4, "widths": {1: 4},
                "draft_seconds": 0.1, "verify_seconds": 0.1, "drafted_at": None, "accepted_at": None}

    sessions = [{"started": "2026-01-01T00:00:00+00:00", "finished": None, "git_commit": "0" * 40, "git_dirty": False,
                 "units": 2, "cost_curve": {1: 0.01, 2: 0.012}}]
    packages = {"python": "3.11.7", "torch": "2", "transformers": "5", "specatlas": "0.1.0"}
    run = Run(schema_version=SCHEMA_VERSION, config_hash=config_hash(config), config=config,
              provenance={"started": "2026-01-01T00:00:00+00:00", "packages": packages,
                          "hardware": {"cpu": "Test CPU", "gpu": None, "cores": 2, "torch_threads": 2, "platform": "t"},
                          "prompt_set_file": "t.jsonl", "arguments": {}},
              sessions=sessions, **curve_fields(sessions),
              methods=[{"id": m, "name": m, "kind": "specatlas", "lossless": True, "setup": "", "error": None}
                       for m in ("baseline", "fast")],
              samples=[{"question_id": "1", "category": "qa", "repeat": 0, "method": m, "turns": [turn(s)]}
                       for m, s in (("baseline", 1.0), ("fast", 0.5))], summary={})
    run.summary = summarize(run)
    (folder / "2026-01-01-tiny-cpu-00000000.json").write_text(dumps(run), encoding="utf-8")


def make_root(tmp: Path) -> Path:
    root = tmp / "catalog"
    (root / "papers").mkdir(parents=True)
    shutil.copytree(REPO / "results" / "published", root / "results" / "published")
    shutil.copytree(REPO / "taxonomy", root / "taxonomy")
    for path in BASE.glob("*.yaml"):
        shutil.copy(path, root / "papers" / path.name)
    _result_file(root / "results")
    return root


def protected(root: Path) -> dict[str, str]:
    """Digest of every record and result: none may change or vanish. A file over 16 MB (a planted
    sparse giant) is known by its inode, size and modification time instead: hashing it costs
    seconds, and no command changes a file without changing those."""
    out = {}
    for folder in ("papers", "results"):
        for path in sorted((root / folder).iterdir()) if (root / folder).is_dir() else []:
            if path.is_file() and not path.is_symlink() and path.name != "LEADERBOARD.md":
                info = path.stat()
                out[str(path.relative_to(root))] = (f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
                                                    if info.st_size > 16 << 20 else
                                                    hashlib.sha256(path.read_bytes()).hexdigest())
    return out


# Running ---------------------------------------------------------------------------------------

def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def run_cli(argv: list[str], root: Path, tmp: Path, timeout: float, cwd: Path | None = None,
            stdin: Path | None = None) -> tuple[int | None, str, str]:
    """`specatlas argv` in a forked child with root as its catalog, run in `cwd` (default: root)
    with `stdin` as its standard input (default: /dev/null): (exit status or None on a hang /
    memory blow-up, stdout, stderr)."""
    out_path, err_path = tmp / ".stdout", tmp / ".stderr"
    pid = os.fork()
    if pid == 0:  # child: never returns
        code = 70
        try:
            limit = _address_space() + MEMORY_HEADROOM
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            out = open(out_path, "w", encoding="utf-8", errors="backslashreplace")
            err = open(err_path, "w", encoding="utf-8", errors="backslashreplace")
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            os.dup2(os.open(stdin or os.devnull, os.O_RDONLY), 0)
            sys.stdin, sys.stdout, sys.stderr = open(0, closefd=False), out, err
            os.environ.update(SPECATLAS_ROOT=str(root), SPECATLAS_CACHE=str(tmp / "cache"), HF_HUB_OFFLINE="1")
            os.chdir(cwd or root)
            import logging

            logging.root.handlers.clear()  # a fresh process has none (pytest installs its own)
            from specatlas.catalog import taxonomy
            from specatlas.paths import repo_root

            repo_root.cache_clear()
            taxonomy.cached_taxonomy.cache_clear()
            from specatlas.cli import main

            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else (print(exc.code, file=sys.stderr) or 1))
            except MemoryError:
                code = 137
            except BaseException:  # noqa: BLE001 - what Python would print at top level
                traceback.print_exc()
                code = 1
            out.flush()
            err.flush()
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = None
            break
        time.sleep(0.01)
    code = None if status is None or os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    if code == 137:
        code = None
    read = lambda p: p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""  # noqa: E731
    return code, read(out_path), read(err_path)


def preload() -> None:
    """Import every command's module once in this process, so each forked child starts warm
    (a cold `specatlas validate` spends most of its time importing pydantic and building schemas)."""
    import importlib

    from specatlas.cli import COMMANDS

    for module, _ in COMMANDS.values():
        importlib.import_module(module)
    for module in ("specatlas.site.plugin", "mkdocs.commands.build", "mkdocs.config", "bibtexparser"):
        try:
            importlib.import_module(module)
        except ImportError:  # without the site extra the site cases fail on their own
            pass


def run_case(case: Case, tmp: Path) -> Outcome:
    preload()
    root = make_root(tmp)
    for relative, content in case.files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    if case.prepare:
        case.prepare(root, tmp)
    before = protected(root)
    argv = [a.replace("{root}", str(root)).replace("{tmp}", str(tmp)) for a in case.argv]
    code, out, err = run_cli(argv, root, tmp, case.timeout)
    text = out + err
    after = protected(root)
    lost = [name for name, digest in before.items() if after.get(name) != digest]
    if lost:
        return Outcome("lost", f"changed or deleted: {', '.join(lost)}", code, text)
    if code is None:
        return Outcome("hang", f"no answer within {case.timeout:.0f} s and 1 GiB", code, text)
    if "Traceback" in text:
        return Outcome("traceback", text.strip().splitlines()[-1][:300], code, text)
    if case.fails != (code != 0):
        return Outcome("wrong", f"exit status {code}, expected {'failure' if case.fails else 'success'}", code, text)
    lines = text.splitlines()
    if case.message and not any(case.message in line for line in lines):
        return Outcome("wrong", f"no line says {case.message!r}", code, text)
    if any(len(line) > 1000 for line in err.splitlines()):  # stdout may be a page (SVG charts)
        return Outcome("wrong", "an output line is longer than 1000 characters", code, text)
    if case.check:
        problem = case.check(root, tmp, text)
        if problem:
            return Outcome("wrong", problem, code, text)
    return Outcome("clean", "", code, text)


# The cases -------------------------------------------------------------------------------------

def _fifo(relative: str):
    def prepare(root: Path, tmp: Path) -> None:
        os.mkfifo(root / relative)
    return prepare


def _symlink(relative: str, target: str):
    def prepare(root: Path, tmp: Path) -> None:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target.replace("{root}", str(root)).replace("{tmp}", str(tmp)), root / relative)
    return prepare


def _nothing_outside(root: Path, tmp: Path, text: str) -> str | None:
    stray = [p for p in tmp.rglob("*") if p.is_file() and "catalog/papers" not in str(p)
             and p.suffix == ".yaml" and "taxonomy" not in str(p)] + [p for p in (root / "papers").iterdir()
                                                                      if "\n" in p.name]
    return f"wrote {stray[0]}" if stray else None


def _no_new_record(root: Path, tmp: Path, text: str) -> str | None:
    extra = sorted(p.name for p in (root / "papers").iterdir()) 
    return None if extra == ["alpha2023drafting.yaml", "beta2024verifying.yaml"] else f"papers/ now holds {extra}"


def _github_lines(root: Path, tmp: Path, text: str) -> str | None:
    lines = [line for line in text.splitlines() if line.strip()]
    stray = [line for line in lines if not line.startswith("::error ") and "problem(s) in" not in line]
    return f"a record's value made its own output line: {stray[0]!r}" if stray else None


def _bib_round_trips(root: Path, tmp: Path, text: str) -> str | None:
    import bibtexparser

    bib_text = (tmp / "out.bib").read_text(encoding="utf-8")
    library = bibtexparser.parse_string(bib_text)
    if library.failed_blocks or len(library.entries) != 3:
        return f"the written BibTeX does not parse back into 3 entries ({len(library.failed_blocks)} failed blocks)"
    fields = {f.key for e in library.entries for f in e.fields}
    return f"an injected field appeared: {sorted(fields)}" if "injected" in fields else None


def _old_site_intact(root: Path, tmp: Path, text: str) -> str | None:
    files = sorted(p.name for p in (tmp / "site").iterdir())
    if files != [".specatlas-site", "index.html"] or (tmp / "site" / "index.html").read_text() != "the old site":
        return f"the failed build changed the old site: {files[:5]}"
    leftovers = [p.name for p in tmp.iterdir() if p.name.startswith(".site")]
    return f"left {leftovers}" if leftovers else None


USER_FILES = {"../mine/notes.txt": "my notes\n", "../mine/LEADERBOARD.md": "my page\n", "README.md": "# mine\n",
              "docs/style.css": "body {}\n"}


def _user_files_intact(root: Path, tmp: Path, text: str) -> str | None:
    """The files of USER_FILES and the checkout's .git are still there, byte for byte."""
    changed = [name for name, content in USER_FILES.items() if not (root / name).is_file()
               or (root / name).read_text(encoding="utf-8") != content]
    return f"changed or deleted: {', '.join(changed)}" if changed or not (root / ".git" / "HEAD").is_file() else None


def _checkout(root: Path, tmp: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


def _auto_map_model(root: Path, tmp: Path) -> None:
    """A model folder whose config asks transformers to import its evil.py, which would write tmp/code-ran."""
    import json

    (tmp / "model").mkdir()
    (tmp / "model" / "config.json").write_text(json.dumps({"vocab_size": 16, "auto_map": {
        "AutoConfig": "evil.Config", "AutoModelForCausalLM": "evil.Model"}}))
    (tmp / "model" / "evil.py").write_text(f"open({str(tmp / 'code-ran')!r}, 'w').close()\n")


def _no_code_ran(root: Path, tmp: Path, text: str) -> str | None:
    return "the model folder's code ran" if (tmp / "code-ran").exists() else None


def _alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _deep(n: int) -> str:
    return "title: " + "[" * n + "]" * n + "\n"


def _result_with(mutate) -> Callable[[Path, Path], None]:
    """A second result file, derived from the valid one by `mutate(dict)` (summary recomputed
    where the mutation leaves it consistent is not the point: load must refuse or cope)."""
    def prepare(root: Path, tmp: Path) -> None:
        import json

        good = next((root / "results").glob("*.json"))
        data = json.loads(good.read_text(encoding="utf-8"))
        mutate(data)
        (root / "results" / "2026-01-02-hostile.json").write_text(json.dumps(data), encoding="utf-8")
    return prepare


def _rehash(data: dict) -> None:
    from specatlas.bench.results import config_hash

    data["config_hash"] = config_hash(data["config"])


def _drop_config(key: str):
    def mutate(data: dict) -> None:
        data["config"].pop(key)
        _rehash(data)
    return mutate


def _zero_tokens(data: dict) -> None:
    from specatlas.bench.results import Run, summarize

    for sample in data["samples"]:
        if sample["method"] == "baseline":
            sample["turns"][0]["tokens"] = []
            sample["turns"][0]["widths"] = {}
            sample["turns"][0]["steps"] = 0
    data["summary"] = {}
    try:
        data["summary"] = summarize(Run.model_validate(data))
    except Exception:  # noqa: BLE001 - the old code divides by zero here; load must then refuse it
        pass


def _category(name: str):
    def mutate(data: dict) -> None:
        for sample in data["samples"]:
            sample["category"] = name
    return mutate


def _curve(curve: dict):
    """The run's one session timed `curve`: the session's and the run's curve both set, consistently."""
    def mutate(data: dict) -> None:
        from specatlas.bench.results import curve_fields

        data["sessions"][0]["cost_curve"] = curve
        data.update(curve_fields(data["sessions"]))
    return mutate


def _width_zero(data: dict) -> None:
    data["cost_curve"] = {"0": 0.01}
    for sample in data["samples"]:
        sample["turns"][0]["widths"] = {"3": 4}


def _set(path: str, value):
    def mutate(data: dict) -> None:
        *parents, last = path.split(".")
        target = data
        for p in parents:
            target = target[p]
        target[last] = value
    return mutate


def _chmod(relative: str, mode: int):
    def prepare(root: Path, tmp: Path) -> None:
        (root / relative).mkdir(parents=True, exist_ok=True)
        os.chmod(root / relative, mode)
    return prepare


def _questions(text: str) -> dict[str, str]:
    return {"q.jsonl": text}


Q_OK = '{"question_id": 1, "category": "qa", "turns": ["a"]}\n'


def _reported(value: str) -> dict:
    """A record whose one reported result has this (YAML) value."""
    return {NEW: record(reported_results="\n  - metric: speedup\n    value: " + value + "\n    target_model: x\n"
                                         "    benchmark: y\n    source: z")}


def cases() -> list[Case]:
    v = ["validate"]
    rec = lambda **kw: {NEW: record(**kw)}  # noqa: E731
    out: list[Case] = [
        # -- impossible dates and YAML constructor errors: validate, bib, stats, site, leaderboard
        Case("date-in-title", v, rec(title="2024-02-30"), message="2024-02-30"),
        Case("date-in-year", v, rec(year="2099-13-45"), message="2099-13-45"),
        Case("date-in-month", v, rec(month="2024-00-10"), message="2024-00-10"),
        Case("timestamp-out-of-range", v, rec(title="2024-01-01T25:99:00Z"), message="title"),
        Case("date-in-summary-list", v, rec(builds_on="[2024-02-30]"), message="2024-02-30"),
        Case("date-in-nested-result", v, _reported("2024-13-01"),
             message="2024-13-01"),
        Case("date-bib", ["bib", "-o", "{tmp}/out.bib"], rec(title="2024-02-30"), message="2024-02-30"),
        Case("date-stats", ["stats"], rec(year="2099-13-45"), fails=False, message="1 validation problems"),
        Case("date-leaderboard-print", ["leaderboard", "--print"], rec(title="2024-02-30"), fails=False),
        Case("date-validate-json", ["validate", "--format", "json"], rec(title="2024-02-30"), message="2024-02-30"),
        # -- resource exhaustion
        Case("alias-bomb", v, {NEW: _alias_bomb()}, message="alias"),
        Case("alias-bomb-stats", ["stats"], {NEW: _alias_bomb()}, fails=False, message="validation problems"),
        Case("alias-simple", v, rec(authors="&who [Ada Alpha]", aliases="*who"), message="alias"),
        Case("merge-key", v, {NEW: record() + "base: &b {x: 1}\nextra:\n  <<: *b\n"}, message="merge keys"),
        Case("deep-nesting-flow", v, {NEW: _deep(20000)}, message="nest"),
        Case("deep-nesting-block", v, {NEW: "title:\n" + "".join(" " * i + "- \n" for i in range(1, 200))},
             message="nest"),
        Case("huge-title", v, rec(title="A" * 5_000_000), message="bytes", timeout=20),
        Case("long-title", v, rec(title="Speculative " * 4000), message="title"),
        Case("long-author", v, rec(authors="[" + "B" * 20000 + "]"), message="authors"),
        Case("many-long-lines", v, {NEW: record() + "# " + "x" * 600_000 + "\n"}, message="bytes"),
        Case("long-summary-line-title-in-message", v, rec(title="'" + "é" * 20_000 + "'"), message="title"),
        # -- files that are not files
        Case("symlink-loop", v, prepare=_symlink(NEW, "{root}/" + NEW), message="gamma2024case.yaml"),
        Case("symlink-dev-zero", v, prepare=_symlink(NEW, "/dev/zero"), message="regular file"),
        Case("symlink-dev-urandom", v, prepare=_symlink(NEW, "/dev/urandom"), message="regular file"),
        Case("fifo-record", v, prepare=_fifo(NEW), message="regular file"),
        Case("dangling-symlink", v, prepare=_symlink(NEW, "{tmp}/nowhere.yaml"), message="gamma2024case.yaml"),
        Case("directory-named-yaml", v, prepare=lambda r, t: (r / NEW).mkdir(), message="regular file"),
        Case("fifo-explicit-path", ["validate", "{tmp}/pipe.yaml"], prepare=lambda r, t: os.mkfifo(t / "pipe.yaml"),
             message="regular file"),
        Case("empty-folder", ["validate", "{tmp}/empty"], prepare=lambda r, t: (t / "empty").mkdir(),
             message="no records"),
        Case("yml-folder", ["validate", "{tmp}/yml"], {"../yml/gamma2024case.yml": record()}, message=".yml"),
        Case("yml-in-papers", v, {"papers/gamma2024case.yml": record()}, message=".yml"),
        Case("missing-path", ["validate", "{tmp}/no-such.yaml"], message="does not exist"),
        Case("stats-symlink-loop", ["stats"], prepare=_symlink(NEW, "{root}/" + NEW), fails=False),
        Case("bib-fifo-record", ["bib", "-o", "{tmp}/out.bib"], prepare=_fifo(NEW), message="regular file"),
        # -- values the schema must refuse
        Case("control-char-title", v, rec(title='"Gamma \\a Study of Bells"'), message="control character"),
        Case("newline-title", v, rec(title='"Gamma Study\\nof Lines"'), message="control character"),
        Case("bidi-override-title", v, rec(title='"Gamma \\u202e Study of Reversal"'), message="control character"),
        Case("nul-in-author", v, rec(authors='["Ada \\0 Alpha"]'), message="control character"),
        Case("implementation-shell", v, rec(implementation="'rm -rf /; echo pwned'"), message="implementation"),
        Case("implementation-other-id", v, rec(implementation="alpha2023drafting"), message="implementation"),
        Case("nan-reported-value", v, _reported(".nan"),
             message="value"),
        Case("inf-reported-value", v, _reported(".inf"),
             message="value"),
        Case("huge-year", v, rec(year="99999999999999999999999"), message="year"),
        Case("yaml11-boolean-on", v, rec(lossless="on"), message="lossless: 'on' is a boolean only in YAML 1.1"),
        Case("yaml11-boolean-quoted-yes", v, rec(lossless="'yes'"), message="lossless: Input should be a valid boolean"),
        Case("yaml11-hex-year", v, rec(year="0x7e8"), message="year: '0x7e8' is read as the number 2024"),
        Case("yaml11-base60-year", v, rec(year="33:44"), message="year: '33:44' is read as the number 2024"),
        Case("yaml11-octal-year", v, rec(year="03750"), message="year: '03750' is read as the number 2024"),
        Case("zero-speedup", v, _reported("0"), message="above 0"),
        Case("negative-speedup", v, _reported("-1.8"), message="above 0"),
        Case("python-tag", v, rec(title="!!python/object/apply:os.system ['echo pwned']"), message="title"),
        Case("binary-tag", v, rec(title="!!binary aGVsbG8gd29ybGQ="), message="title"),
        Case("set-as-authors", v, rec(authors="!!set {Ada Alpha: null}"), message="authors"),
        Case("nul-byte-file", v, {NEW: record().encode() + b"\x00\n"}, message="gamma2024case.yaml"),
        Case("utf16-file", v, {NEW: record().encode("utf-16")}, message="UTF-8"),
        Case("url-brace-injection", v, rec(url="'https://x.org/a},note={INJECTED'"), message="url"),
        Case("doi-brace-injection", v, rec(doi="'10.1000/x},note={INJECTED'"), message="doi"),
        Case("override-newline-at", v, {NEW: record(bibtex='{note: "x\\n@misc{evil, title={pwned}}"}')},
             message="bibtex.note"),
        Case("key-not-text", v, {NEW: record() + "? [a, b]\n: c\n"}, message="plain text"),
        # -- validator output
        Case("github-newline-injection", ["validate", "--format", "github"],
             rec(venue='"arXiv\\n::warning file=x::injected"'), message="::error", check=_github_lines),
        Case("github-percent", ["validate", "--format", "github"], rec(venue="'100%'"), message="%25",
             check=_github_lines),
        # -- BibTeX
        Case("bib-author-braces", ["bib", "-o", "{tmp}/out.bib"], rec(authors="['Ada {Alpha', 'Bo} Beta']"),
             message="unbalanced"),
        Case("bib-author-balanced-braces", ["bib", "-o", "{tmp}/out.bib"], rec(authors="['{Google} DeepMind']"),
             fails=False, check=_bib_round_trips),
        Case("bib-author-tex-specials", ["bib", "-o", "{tmp}/out.bib"], rec(authors="['Ada & Alpha 100%', 'Bo_Beta #1']"),
             fails=False, check=_bib_round_trips),
        Case("bib-override-pages", ["bib", "-o", "{tmp}/out.bib"],
             {NEW: record(bibtex="{pages: '1--2}, injected = {x'}")}, message="unbalanced"),
        Case("bib-override-balanced", ["bib", "-o", "{tmp}/out.bib"],
             {NEW: record(bibtex="{pages: '1--2 {x} \\\\injected', number: '%#&~^_$'}")}, fails=False,
             check=_bib_round_trips),
        Case("bib-override-volume-backslash", ["bib", "-o", "{tmp}/out.bib"],
             {NEW: record(bibtex="{volume: '\\\\end{document}'}")}, fails=False, check=_bib_round_trips),
        Case("bib-out-missing-dir", ["bib", "-o", "{tmp}/no/such/dir/out.bib"], message="cannot write"),
        Case("bib-out-is-dir", ["bib", "-o", "{tmp}"], message="cannot write"),
        Case("bib-out-dev-full", ["bib", "-o", "/dev/full"], message="cannot write"),
        Case("bib-out-unwritable", ["bib", "-o", "/proc/specatlas.bib"], message="cannot write"),
        # -- site
        Case("site-out-is-file", ["site", "build", "--out", "{tmp}/file"], {"../file": "x"}, message="site"),
        Case("site-out-unwritable", ["site", "build", "--out", "/proc/specatlas-site"], message="cannot write"),
        Case("site-failed-build-keeps-old-site", ["site", "build", "--out", "{tmp}/site"],
             {NEW: record(title="2024-02-30"), "../site/index.html": "the old site", "../site/.specatlas-site": ""},
             message="gamma2024case.yaml",
             check=_old_site_intact, timeout=120),  # a real (small) mkdocs build
        # -- outputs never replace what the command did not write (issue 30)
        *[Case(f"{name}-into-{where}", [*argv, target], USER_FILES, prepare=_checkout, check=_user_files_intact,
               message="it is a folder" if (name in ("datastore-output", "freshness-out") and where == "user-folder")
               or (name == "bib-out" and where not in ("record", "readme")) else "refusing",
               timeout=60)
          for name, argv in (("site-out", ["site", "build", "--out"]), ("bib-out", ["bib", "-o"]),
                             ("datastore-output", ["datastore", "build", "{root}/README.md", "--output"]),
                             ("leaderboard-results", ["leaderboard", "--results"]),
                             ("freshness-out", ["freshness", "--out"]))
          for where, target in (("checkout", "{root}"), ("papers", "papers"), ("user-folder", "{tmp}/mine"),
                                ("record", "{root}/papers/alpha2023drafting.yaml"), ("readme", "{root}/README.md"),
                                ("docs", "{root}/docs"), ("parent", "{tmp}"))
          if not (name == "leaderboard-results" and where in ("record", "readme"))],  # files: no results folder
        Case("datastore-output-device", ["datastore", "build", "{root}/papers/alpha2023drafting.yaml", "--output",
                                         "/dev/null"], message="not a regular file"),  # the rename would replace it
        Case("leaderboard-page-fifo", ["leaderboard"], prepare=_fifo("results/LEADERBOARD.md"),
             message="not a regular file"),
        Case("bench-out-into-papers", ["bench", "baseline", "--out", "papers"], message="refusing"),
        Case("bench-out-into-checkout", ["bench", "baseline", "--out", "{root}"], message="refusing"),
        Case("train-output-into-checkout", ["train", "medusa", "--output", "{root}"], USER_FILES, prepare=_checkout,
             message="refusing", check=_user_files_intact),
        Case("train-output-into-user-folder", ["train", "medusa", "--output", "{tmp}/mine"], USER_FILES,
             prepare=_checkout, message="refusing", check=_user_files_intact),
        # -- a model folder's own code never runs unasked, and nothing asks on standard input
        *[Case(f"{argv[0]}-model-auto-map", [*argv, "--model", "{tmp}/model"], prepare=_auto_map_model,
               message="--trust-remote-code", check=_no_code_ran, timeout=60)
          for argv in (["run", "pld", "--prompt", "hi"], ["bench", "baseline"], ["advise", "pld"], ["train", "medusa"],
                       ["datastore", "build", "{root}/papers/alpha2023drafting.yaml", "--output", "{tmp}/ds.npz"])],
        # -- corpora and training data: one line naming the file, before any model loads
        Case("datastore-corpus-not-utf8", ["datastore", "build", "{root}/corpus.txt", "--output", "{tmp}/ds.npz"],
             {"corpus.txt": b"fine text\n\n\xff\xfe not text"}, message="is not UTF-8 text"),
        Case("datastore-corpus-broken-jsonl-line", ["datastore", "build", "{root}/c.jsonl", "--output", "{tmp}/ds.npz"],
             {"c.jsonl": '{"text": "one"}\n{"text": "two"\n'}, message="line 2: not a JSON value"),
        Case("datastore-corpus-deep-jsonl", ["datastore", "build", "{root}/c.jsonl", "--output", "{tmp}/ds.npz"],
             {"c.jsonl": "[" * 200_000 + "\n"}, message="c.jsonl, line 1"),
        Case("train-data-zero-tokens", ["train-data", "--tokens", "0"], message="--tokens"),
        Case("train-data-status-damaged-manifest", ["train-data", "--status", "--output", "{root}/td"],
             {"td/manifest.json": "{not json"}, message="manifest.json: not valid JSON"),
        Case("train-data-status-foreign-manifest", ["train-data", "--status", "--output", "{root}/td"],
             {"td/manifest.json": '{"answers": 3}'}, message="not a train-data manifest"),
        Case("train-zero-tokens", ["train", "eagle3", "--tokens", "0"], message="--tokens"),
        Case("train-curve-not-a-head", ["train-curve", "pld"], message="not a head family"),
        Case("train-curve-bad-sizes", ["train-curve", "eagle3", "--tokens", "32000,lots"], message="comma-separated"),
        Case("train-curve-negative-size", ["train-curve", "eagle3", "--tokens", "-5"], message="must be positive"),
        Case("train-curve-zero-steps", ["train-curve", "eagle3", "--steps", "0"], message="--steps"),
        Case("train-epochs-and-steps", ["train", "eagle3", "--epochs", "2", "--steps", "5"],
             message="--epochs and --steps both set the schedule"),
        Case("train-curve-epochs-and-steps", ["train-curve", "eagle3", "--epochs", "2", "--steps", "5"],
             message="--epochs and --steps both set the schedule"),
        Case("train-fr-spec-epochs", ["train", "fr-spec", "--epochs", "2"], message="no schedule"),
        Case("train-data-manifest-entry-not-object", ["train-data", "--status", "--output", "{root}/td"],
             {"td/manifest.json": '{"magpie": [], "answers": [1]}'}, message="answers[0]: not an object"),
        Case("train-data-manifest-file-outside", ["train-data", "--status", "--output", "{root}/td"],
             {"td/manifest.json": '{"magpie": [], "answers": [{"file": "answers-00000.npz", "sha256": "0000000000000000000000000000000000000000000000000000000000000000", "conversations": 1, "answer_tokens": 5, "finished": 1, "file": "../../papers/x.npz"}]}'},
             message="'file' must name a answers-NNNNN.npz shard"),
        Case("train-data-manifest-boolean-count", ["train-data", "--status", "--output", "{root}/td"],
             {"td/manifest.json": '{"magpie": [], "answers": [{"file": "answers-00000.npz", "sha256": "0000000000000000000000000000000000000000000000000000000000000000", "conversations": 1, "answer_tokens": 5, "finished": 1, "conversations": true}]}'},
             message="'conversations' must be a whole number"),
        Case("train-data-manifest-negative-tokens", ["train-data", "--status", "--output", "{root}/td"],
             {"td/manifest.json": '{"magpie": [], "answers": [{"file": "answers-00000.npz", "sha256": "0000000000000000000000000000000000000000000000000000000000000000", "conversations": 1, "answer_tokens": 5, "finished": 1, "answer_tokens": -5}]}'},
             message="'answer_tokens' must be a whole number"),
        Case("train-data-manifest-short-hash", ["train-data", "--status", "--output", "{root}/td"],
             {"td/manifest.json": '{"magpie": [{"file": "answers-00000.npz", "sha256": "0000000000000000000000000000000000000000000000000000000000000000", "conversations": 1, "answer_tokens": 5, "finished": 1, "file": "magpie-00000.npz", "sha256": "abc"}], "answers": []}'},
             message="magpie[0]: 'sha256' must be 64 hex digits"),
        Case("train-data-negative-magpie", ["train-data", "--magpie", "-1"], message="--magpie"),
        Case("train-data-zero-rows", ["train-data", "--rows", "0"], message="--rows"),
        Case("train-curve-damaged-curve", ["train-curve", "eagle3"],
             {"results/training/smollm2-135m-instruct-eagle3-steps1500-seed0-acceptance-vs-data.json": "{oops"},
             message="not valid JSON"),
        Case("train-curve-another-familys-curve", ["train-curve", "eagle3"],
             {"results/training/smollm2-135m-instruct-eagle3-steps1500-seed0-acceptance-vs-data.json": '{"family": "medusa", "points": []}'},
             message="not this family's acceptance-vs-data curve"),
        Case("train-curve-point-without-size", ["train-curve", "eagle3"],
             {"results/training/smollm2-135m-instruct-eagle3-steps1500-seed0-acceptance-vs-data.json": '{"family": "eagle3", "points": [{"x": 1}]}'},
             message="points with requested_tokens"),
        Case("train-curve-zero-prompts", ["train-curve", "eagle3", "--prompts", "0"], message="--prompts"),
        Case("train-eval-not-a-head-method", ["train-eval", "pld"], message="runs no trained head or drafter"),
        Case("train-eval-unknown-method", ["train-eval", "nonesuch"], message="no method 'nonesuch'"),
        Case("train-eval-damaged-results", ["train-eval", "eagle2"],
             {"results/training/smollm2-135m-instruct-held-out-acceptance.json": "{oops"}, message="not valid JSON"),
        Case("train-eval-methods-not-an-object", ["train-eval", "eagle2"],
             {"results/training/smollm2-135m-instruct-held-out-acceptance.json": '{"methods": [1]}'},
             message="not a held-out acceptance file"),
        Case("train-eval-zero-prompts", ["train-eval", "--prompts", "0"], message="--prompts"),
        Case("train-eval-max-new-tokens-huge", ["train-eval", "--max-new-tokens", str(10 ** 12)], message="--max-new-tokens"),
        Case("datastore-corpus-is-a-folder", ["datastore", "build", "{root}/papers", "--output", "{tmp}/ds.npz"],
             message="no such file"),
        # -- specatlas new
        Case("new-id-traversal", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                  "--venue", "arXiv", "--id", "../../x"], message="--id", check=_nothing_outside),
        Case("new-id-absolute", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                 "--venue", "arXiv", "--id", "{tmp}/abs"], message="--id", check=_nothing_outside),
        Case("new-id-newline", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                "--venue", "arXiv", "--id", "alpha2024a\nb"], message="--id", check=_no_new_record),
        Case("new-id-trailing-newline", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                         "--venue", "arXiv", "--id", "alpha2024title\n"], message="--id",
             check=_no_new_record),
        Case("new-doi-trailing-newline", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year",
                                            "2024", "--venue", "arXiv", "--doi", "10.1000/x\n"], fails=False,
             message="wrote"),
        Case("new-id-uppercase", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                  "--venue", "arXiv", "--id", "Alpha2024Title"], message="--id", check=_no_new_record),
        Case("new-authors-comma", ["new", "--title", "A Title Here", "--authors", ",", "--year", "2024",
                                   "--venue", "arXiv"], message="--authors", check=_no_new_record),
        Case("new-authors-and", ["new", "--title", "A Title Here", "--authors", " and ", "--year", "2024",
                                 "--venue", "arXiv"], message="--authors", check=_no_new_record),
        Case("new-huge-title", ["new", "--title", "T" * 100_000, "--authors", "Ada Alpha", "--year", "2024",
                                "--venue", "arXiv"], message="--title", check=_no_new_record),
        Case("new-title-control", ["new", "--title", "A Title\x1b[31m Here", "--authors", "Ada Alpha", "--year",
                                   "2024", "--venue", "arXiv"], message="--title", check=_no_new_record),
        Case("new-url-injection", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                   "--venue", "arXiv", "--url", "https://x.org\nlossless: true"], message="--url",
             check=_no_new_record),
        Case("new-arxiv-injection", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                     "--venue", "arXiv", "--arxiv", "2401.00001'\nlossless: true\nx: '"],
             message="--arxiv", check=_no_new_record),
        Case("new-doi-injection", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                   "--venue", "arXiv", "--doi", "10.1/x\nlossless: true"], message="--doi",
             check=_no_new_record),
        Case("new-code-not-url", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                  "--venue", "arXiv", "--code", "javascript:alert(1)"], message="--code",
             check=_no_new_record),
        Case("new-year-huge", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "99999999999",
                               "--venue", "arXiv"], message="--year", check=_no_new_record),
        Case("new-year-negative", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "-5",
                                   "--venue", "arXiv"], message="--year", check=_no_new_record),
        Case("new-month-13", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                              "--month", "13", "--venue", "arXiv"], message="--month", check=_no_new_record),
        Case("new-existing-id", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2023",
                                 "--venue", "arXiv", "--id", "alpha2023drafting"], message="already exists"),
        Case("new-dir-is-file", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                 "--venue", "arXiv", "--dir", "{tmp}/file"], {"../file": "x"}, message="cannot write"),
        Case("new-dir-missing", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                                 "--venue", "arXiv", "--dir", "{tmp}/no/such"], message="cannot write"),
        Case("new-ok", ["new", "--title", "A Title Here", "--authors", "Ada Alpha", "--year", "2024",
                        "--venue", "arXiv", "--arxiv", "https://arxiv.org/abs/2401.00001v2"], fails=False,
             message="wrote"),
        # -- specatlas run: every number checked before a model loads
        Case("run-temperature-nan", ["run", "pld", "--prompt", "hi", "--temperature", "nan"], message="--temperature"),
        Case("run-temperature-inf", ["run", "pld", "--prompt", "hi", "--temperature", "inf"], message="--temperature"),
        Case("run-temperature-huge", ["run", "pld", "--prompt", "hi", "--temperature", "1e9"], message="--temperature"),
        Case("run-top-p-nan", ["run", "pld", "--prompt", "hi", "--top-p", "nan"], message="--top-p"),
        Case("run-max-new-tokens-huge", ["run", "pld", "--prompt", "hi", "--max-new-tokens", "10000000000000"],
             message="--max-new-tokens"),
        Case("run-seed-negative", ["run", "pld", "--prompt", "hi", "--seed", "-1"], message="--seed"),
        Case("run-seed-huge", ["run", "pld", "--prompt", "hi", "--seed", str(2 ** 70)], message="--seed"),
        Case("run-draft-length-superscript", ["run", "pld", "--prompt", "hi", "--draft-length", "\u00b2"],
             message="--draft-length"),
        Case("run-draft-length-huge", ["run", "pld", "--prompt", "hi", "--draft-length", "10" * 20],
             message="--draft-length"),
        Case("run-prompt-not-utf8", ["run", "pld", "--prompt", "caf\udce9"], message="UTF-8"),
        Case("run-prompt-file-missing", ["run", "pld", "--prompt-file", "{tmp}/none.txt"], message="--prompt-file"),
        Case("run-prompt-file-not-utf8", ["run", "pld", "--prompt-file", "{tmp}/p.txt"], {"../p.txt": b"caf\xe9\n"},
             message="UTF-8"),
        Case("run-prompt-file-dev-zero", ["run", "pld", "--prompt-file", "/dev/zero"], message="--prompt-file"),
        Case("run-prompt-file-fifo", ["run", "pld", "--prompt-file", "{tmp}/fifo"],
             prepare=lambda r, t: os.mkfifo(t / "fifo"), message="--prompt-file"),
        Case("run-prompt-file-dir", ["run", "pld", "--prompt-file", "{tmp}"], message="--prompt-file"),
        Case("run-unknown-method-newline", ["run", "pl\nd", "--prompt", "hi"], message="unknown method"),
        # -- specatlas bench: bad numbers, files and folders, all before a model loads
        Case("bench-temperature-nan", ["bench", "baseline", "--temperature", "nan"], message="--temperature"),
        Case("bench-temperature-inf", ["bench", "baseline", "--temperature", "inf"], message="--temperature"),
        Case("bench-seed-negative", ["bench", "baseline", "--seed", "-3"], message="--seed"),
        Case("bench-draft-length-superscript", ["bench", "baseline", "--draft-length", "\u00b3"],
             message="--draft-length"),
        Case("bench-out-is-file", ["bench", "baseline", "--out", "{tmp}/file"], {"../file": "x"}, message="cannot write"),
        Case("bench-out-unwritable", ["bench", "baseline", "--out", "/proc/specatlas-results"], message="cannot write"),
        Case("bench-results-folder-is-file", ["bench", "baseline"],
             prepare=lambda r, t: (shutil.rmtree(r / "results"), (r / "results").write_text("x")), message="cannot write"),
        Case("bench-questions-dev-zero", ["bench", "baseline", "--questions", "/dev/zero"], message="/dev/zero"),
        Case("bench-questions-fifo", ["bench", "baseline", "--questions", "{tmp}/fifo"],
             prepare=lambda r, t: os.mkfifo(t / "fifo"), message="fifo"),
        Case("bench-questions-overall", ["bench", "baseline", "--questions", "{root}/q.jsonl"],
             _questions('{"question_id": 1, "category": "overall", "turns": ["a"]}\n'), message="overall"),
        Case("bench-questions-lossless", ["bench", "baseline", "--questions", "{root}/q.jsonl"],
             _questions('{"question_id": 1, "category": "lossless", "turns": ["a"]}\n'), message="lossless"),
        Case("bench-questions-binary", ["bench", "baseline", "--questions", "{root}/q.jsonl"],
             {"q.jsonl": b"\xff\xfe\x00garbage\n"}, message="q.jsonl:1"),
        Case("bench-questions-nested-deep", ["bench", "baseline", "--questions", "{root}/q.jsonl"],
             _questions("[" * 100_000 + "]" * 100_000 + "\n"), message="q.jsonl:1"),
        # -- result files: the leaderboard lists bad ones as failed, never crashes or hangs
        Case("result-not-json", ["leaderboard"], {"results/2026-01-02-bad.json": "{not json"},
             fails=False, message="2026-01-02-bad.json"),
        Case("result-list", ["leaderboard"], {"results/2026-01-02-bad.json": "[]"}, fails=False,
             message="2026-01-02-bad.json"),
        Case("result-missing-model", ["leaderboard"], prepare=_result_with(_drop_config("model")),
             fails=False, message="2026-01-02-hostile.json"),
        Case("result-missing-dtype", ["leaderboard"], prepare=_result_with(_drop_config("dtype")),
             fails=False, message="2026-01-02-hostile.json"),
        Case("result-missing-hardware", ["leaderboard"],
             prepare=_result_with(lambda d: d["provenance"].pop("hardware")), fails=False,
             message="2026-01-02-hostile.json"),
        Case("result-zero-token-baseline", ["leaderboard"], prepare=_result_with(_zero_tokens), fails=False,
             check=lambda root, tmp, text: None if "the baseline produced no tokens" in
             (root / "results" / "LEADERBOARD.md").read_text(encoding="utf-8") else "the page does not say why"),
        Case("result-width-zero", ["leaderboard"], prepare=_result_with(_width_zero), fails=False,
             message="2026-01-02-hostile.json"),
        Case("result-category-overall", ["leaderboard"], prepare=_result_with(_category("overall")),
             fails=False, message="2026-01-02-hostile.json"),
        Case("result-category-lossless", ["leaderboard"], prepare=_result_with(_category("lossless")),
             fails=False, message="2026-01-02-hostile.json"),
        Case("result-nan-seconds", ["leaderboard"],
             {"results/2026-01-02-bad.json": '{"schema_version": 1, "wall_seconds": NaN}'}, fails=False,
             message="2026-01-02-bad.json"),
        Case("result-symlink-dev-zero", ["leaderboard"],
             prepare=_symlink("results/2026-01-02-zero.json", "/dev/zero"), fails=False, message="2026-01-02-zero.json"),
        Case("result-fifo", ["leaderboard"], prepare=_fifo("results/2026-01-02-fifo.json"), fails=False,
             message="2026-01-02-fifo.json"),
        Case("result-dir-named-json", ["leaderboard"],
             prepare=lambda r, t: (r / "results" / "2026-01-02-dir.json").mkdir(), fails=False,
             message="2026-01-02-dir.json"),
        Case("result-schema-version-3", ["leaderboard"], prepare=_result_with(_set("schema_version", 3)),
             fails=False, message="2026-01-02-hostile.json"),
        Case("result-model-not-dict", ["leaderboard"],
             prepare=_result_with(lambda d: (_set("config.model", "tiny")(d), _rehash(d))), fails=False,
             message="2026-01-02-hostile.json"),
        Case("leaderboard-missing-folder", ["leaderboard", "--results", "{tmp}/none"], message="no results folder"),
        Case("leaderboard-unwritable", ["leaderboard", "--results", "{tmp}/ro"],
             prepare=lambda r, t: (shutil.copytree(r / "results", t / "ro"), _ro_page(t / "ro")), message="cannot write"),
    ]
    from corpus_catalog import catalog_cases  # its own file: records, new, freshness, list-coverage

    return out + numbers_cases() + result_cases() + record_cases() + catalog_cases()


def _resummarized(*mutations):
    """A mutation of the valid result that keeps it self-consistent (hash and summary recomputed):
    only the mutated fact can make load refuse it or the page mis-render it."""
    def mutate(data: dict) -> None:
        from specatlas.bench.results import Run, summarize

        for mutation in mutations:
            mutation(data)
        _rehash(data)
        try:
            data["summary"] = summarize(Run.model_validate(data))
        except ValueError:  # the schema refuses the fact itself: load must say so
            pass
    return mutate


def _turns(**values):
    def mutate(data: dict) -> None:
        for sample in data["samples"]:
            sample["turns"][0].update(values)
    return mutate


def _method(**values):
    def mutate(data: dict) -> None:
        data["methods"][1].update(values)
    return mutate


def _page(present: str = "", absent: str = ""):
    """The written LEADERBOARD.md holds `present` and not `absent`."""
    def check(root: Path, tmp: Path, text: str) -> str | None:
        page = (root / "results" / "LEADERBOARD.md").read_text(encoding="utf-8")
        if present and present not in page:
            return f"the page does not say {present!r}"
        if absent and absent in page:
            return f"the page holds {absent!r}"
        return None
    return check


def _markdown_lacks(text: str):
    """The written page's Markdown (its lines outside the inline SVG charts) does not hold `text`."""
    def check(root: Path, tmp: Path, output: str) -> str | None:
        page = (root / "results" / "LEADERBOARD.md").read_text(encoding="utf-8")
        found = [line for line in page.splitlines() if text in line and not line.startswith("<figure")]
        return f"the page's Markdown holds {text!r}: {found[0][:200]!r}" if found else None
    return check


def _one_stderr_line_per_file(root: Path, tmp: Path, text: str) -> str | None:
    forged = [line for line in text.splitlines() if line.startswith("FORGED")]
    return f"a file name made its own output line: {forged[0]!r}" if forged else None


def _copy_result(name: str, link: bool = False):
    def prepare(root: Path, tmp: Path) -> None:
        good = next((root / "results").glob("2026-01-01-*.json"))
        if link:
            os.symlink(good.name, root / "results" / name)
        else:
            (root / "results" / name).write_text(good.read_text(encoding="utf-8").replace("\n", "\r\n"), encoding="utf-8")
    return prepare


def _sparse(relative: str, size: int):
    def prepare(root: Path, tmp: Path) -> None:
        with open(root / relative, "wb") as f:
            f.truncate(size)
    return prepare


HOSTILE = "2026-01-02-hostile.json"


def result_cases() -> list[Case]:
    """Result files a careless tool or a hostile pull request can add to results/: the leaderboard
    lists each bad one as failed (naming it), renders the good ones escaped, never crashes."""
    lb, failed = ["leaderboard"], dict(fails=False, message=HOSTILE)
    return [
        Case("result-cost-curve-without-width-1", lb, fails=False,
             prepare=_result_with(_resummarized(_curve({"2": 0.012, "4": 0.02}),
                                                _turns(widths={"2": 4}))), check=_page(absent=HOSTILE + " |")),
        Case("result-policy-as-list", lb, prepare=_result_with(_method(policy=["paper"])), **failed),
        Case("result-policy-as-object", lb, prepare=_result_with(_method(policy={"paper": True})), **failed),
        Case("result-policy-html", lb, fails=False,
             prepare=_result_with(_resummarized(_method(policy="<img src=x onerror=alert(1)>"))),
             check=_page(absent="<img")),
        Case("result-speedup-infinity", lb, fails=False, message=HOSTILE,
             files={"results/" + HOSTILE: '{"schema_version": 1, "summary": {"fast": {"overall": {"speedup": Infinity}}}}'}),
        Case("result-speedup-1e999", lb, fails=False, message=HOSTILE,
             files={"results/" + HOSTILE: '{"schema_version": 1, "summary": {"fast": {"overall": {"speedup": 1e999}}}}'}),
        Case("result-summary-speedup-edited", lb, prepare=_result_with(lambda d: d["summary"]["fast"]["overall"].update(speedup=50.0)),
             **failed),
        Case("result-negative-wall-seconds", lb, prepare=_result_with(_turns(wall_seconds=-1.0)), **failed),
        Case("result-zero-wall-seconds", lb, prepare=_result_with(_turns(wall_seconds=0)), **failed),
        Case("result-tiny-wall-seconds", lb, prepare=_result_with(_resummarized(_turns(wall_seconds=1e-300))), **failed),
        Case("result-negative-cost", lb, prepare=_result_with(_set("cost_curve", {"1": -0.01})), **failed),
        Case("result-cost-curve-empty", lb, prepare=_result_with(_set("cost_curve", {})), **failed),
        Case("result-cost-width-text", lb, prepare=_result_with(_set("cost_curve", {"one": 0.01})), **failed),
        Case("result-steps-above-tokens", lb, prepare=_result_with(_resummarized(_turns(steps=40))), **failed),
        Case("result-accepted-above-drafted", lb, prepare=_result_with(_turns(drafted_at=[1], accepted_at=[3])), **failed),
        Case("result-tokens-as-text", lb, prepare=_result_with(_turns(tokens="1234")), **failed),
        Case("result-schema-version-true", lb, prepare=_result_with(_set("schema_version", True)), **failed),
        Case("result-lossless-as-text", lb, prepare=_result_with(_method(lossless="yes")), **failed),
        Case("result-temperature-nan", lb, fails=False, message=HOSTILE,
             files={"results/" + HOSTILE: '{"schema_version": 1, "config": {"temperature": NaN}}'}),
        Case("result-config-hash-stale", lb, prepare=_result_with(_set("config.seed", 7)), **failed),
        Case("result-symlinked-duplicate", lb, prepare=_copy_result(HOSTILE, link=True), fails=False,
             message="a link, not a result file"),
        Case("result-copied-duplicate", lb, prepare=_copy_result(HOSTILE), fails=False, message="the same run as"),
        Case("result-deep-nesting", lb, {"results/" + HOSTILE: '{"a": ' * 100_000 + "1" + "}" * 100_000}, **failed),
        Case("result-huge-sparse-file", lb, prepare=_sparse("results/" + HOSTILE, 600 << 20), **failed),
        Case("result-bom", lb, prepare=lambda r, t: (r / "results" / HOSTILE).write_bytes(
            b"\xef\xbb\xbf" + next((r / "results").glob("2026-01-01-*.json")).read_bytes()), **failed),
        Case("result-method-name-html", lb, fails=False,
             prepare=_result_with(_resummarized(_method(name="<script>alert(1)</script>", id="fast"))),
             check=_page(absent="<script>alert")),
        Case("result-model-javascript-link", lb, fails=False,
             prepare=_result_with(_resummarized(_set("config.model.target", "[x](javascript:alert(1))"))),
             check=_markdown_lacks("](javascript:")),
        Case("result-cpu-newline-heading", lb, fails=False,
             prepare=_result_with(_resummarized(_set("provenance.hardware.cpu", "Fast CPU\n# Injected heading"))),
             check=_page(absent="\n# Injected")),
        Case("result-cpu-table-pipe", lb, fails=False,
             prepare=_result_with(_resummarized(_set("provenance.hardware.cpu", "a | b | c"))),
             check=_markdown_lacks("a | b | c")),
        Case("result-question-id-html", lb, fails=False,
             prepare=_result_with(_resummarized(lambda d: [s.update(question_id="<b>1</b>") for s in d["samples"]],
                                                _set("config.question_ids", ["<b>1</b>"]))),
             check=_page(absent="<b>1")),
        Case("result-file-name-newline", lb, fails=False, files={"results/2026-01-03-x\nFORGED: ok.json": "{}"},
             check=_one_stderr_line_per_file),
        Case("result-file-name-bidi", lb, fails=False, files={"results/2026-01-03-\u202enosj.json": "{}"},
             check=_page(absent="\u202e")),
        Case("results-check-good-and-bad", ["results", "check", "{root}/results/" + HOSTILE],
             prepare=_result_with(_turns(wall_seconds=-1.0)), message=HOSTILE),
        Case("results-check-directory", ["results", "check", "{root}/results"], message="results"),
        Case("results-check-dev-zero", ["results", "check", "/dev/zero"], message="/dev/zero"),
        Case("results-check-fifo", ["results", "check", "{root}/results/" + HOSTILE],
             prepare=_fifo("results/" + HOSTILE), message=HOSTILE),
        Case("results-check-missing", ["results", "check", "{root}/results/none.json"], message="none.json"),
    ]


def _bib_is_inert(root: Path, tmp: Path, text: str) -> str | None:
    r"""The written BibTeX holds no TeX primitive that reads, writes or redefines (\input,
    \write18, \def, \catcode...), not even spelled with ^^ escapes, and parses back."""
    import re

    bib_text = (tmp / "out.bib").read_text(encoding="utf-8")
    found = re.search(r"\\(input|include|write|immediate|openout|openin|read|def|edef|gdef|let|catcode|csname|"
                      r"usepackage|special|jobname)(?![A-Za-z])|\^\^", bib_text)
    return f"papers.bib holds {found.group()!r}" if found else _bib_round_trips(root, tmp, text)


def record_cases() -> list[Case]:
    """Records: strict types (YAML 1.1 spellings, quoted numbers), invisible characters where a
    value names something, impossible reported numbers, and TeX that must stay text in papers.bib."""
    v, bib = ["validate"], ["bib", "-o", "{tmp}/out.bib"]
    rec = lambda **kw: {NEW: record(**kw)}  # noqa: E731
    return [
        Case("yaml11-boolean-y", v, rec(lossless="Y"), message="lossless"),
        Case("yaml11-boolean-off", v, rec(lossless="Off"), message="lossless"),
        Case("lossless-one", v, rec(lossless="1"), message="lossless"),
        Case("lossless-quoted-true", v, rec(lossless="'true'"), message="lossless"),
        Case("lossless-null-is-not-a-decoding-method", v, rec(lossless="~"), fails=False),
        Case("year-float", v, rec(year="2024.0"), message="year"),
        Case("year-quoted", v, rec(year="'2024'"), message="year"),
        Case("year-underscore", v, rec(year="2_024"), message="year"),
        Case("year-plus-sign-is-yaml-1-2", v, rec(year="+2024"), fails=False),
        Case("year-exponent", v, rec(year="2.024e3"), message="year"),
        Case("month-octal", v, rec(month="0o7"), message="month"),
        Case("month-boolean", v, rec(month="true"), message="month"),
        Case("zero-width-in-doi", v, rec(doi='"10.1000/ab\\u200bc"'), message="U+200B"),
        Case("bidi-override-in-url", v, rec(url='"https://example.org/\\u202egpj.exe"'), message="U+202E"),
        Case("word-joiner-in-author", v, rec(authors='["Ada\\u2060 Alpha"]'), message="U+2060"),
        Case("bom-in-arxiv-url", v, rec(url='"https://arxiv.org/abs/\\ufeff2402.00003"'), message="U+FEFF"),
        Case("zero-width-in-alias", v, rec(aliases='["gam\\u200dma"]'), message="aliases"),
        Case("rtl-mark-in-code-url", v, rec(code='["https://github.com/a/b\\u200f"]'), message="U+200F"),
        Case("mean-accepted-below-one", v, {NEW: record(reported_results="\n  - metric: mean-accepted-tokens\n"
                                                        "    value: 0.8\n    target_model: x\n    benchmark: y\n"
                                                        "    source: z")}, message="mean-accepted-tokens"),
        Case("acceptance-rate-above-one", v, {NEW: record(reported_results="\n  - metric: acceptance-rate\n"
                                                          "    value: 1.7\n    target_model: x\n    benchmark: y\n"
                                                          "    source: z")}, message="acceptance-rate"),
        Case("bib-title-math-input", bib, rec(title="'Gamma $\\input{/etc/passwd}$ Study'"), fails=False,
             check=_bib_is_inert),
        Case("bib-title-write18", bib, rec(title="'Gamma \\immediate\\write18{touch pwned} Study'"), fails=False,
             check=_bib_is_inert),
        Case("bib-title-math-write18", bib, rec(title="'Gamma $x \\write18{id}$ Study'"), fails=False,
             check=_bib_is_inert),
        Case("bib-title-caret-escape", bib, rec(title="'Gamma ^^5cinput{/etc/passwd} Study'"), fails=False,
             check=_bib_is_inert),
        Case("bib-title-math-caret", bib, rec(title="'Gamma $^^5cinput x$ Study'"), fails=False, check=_bib_is_inert),
        Case("bib-title-math-def", bib, rec(title="'Gamma $\\def\\x{y}$ Study'"), fails=False, check=_bib_is_inert),
        Case("bib-title-math-catcode", bib, rec(title="'Gamma $\\catcode`\\@=11$ Study'"), fails=False,
             check=_bib_is_inert),
        Case("bib-title-math-csname", bib, rec(title="'Gamma $\\csname input\\endcsname$ Study'"), fails=False,
             check=_bib_is_inert),
        Case("bib-title-safe-math-kept", bib, rec(title="'Gamma $\\alpha$-Study of $O(n^2)$ Drafts'"), fails=False,
             check=lambda r, t, x: None if "$\\alpha$" in (t / "out.bib").read_text(encoding="utf-8")
             else "the whitelisted math was not kept"),
        Case("bib-author-input", bib, rec(authors="['Ada \\input{x} Alpha']"), fails=False, check=_bib_is_inert),
        Case("bib-venue-override-write18", bib, {NEW: record(bibtex="{note: '\\write18{id}'}")}, fails=False,
             check=_bib_is_inert),
    ]


def numbers_cases() -> list[Case]:
    """Numeric arguments: nan, inf, negative and absurdly large values, refused in one line that
    names the flag before any model loads (issue 30)."""
    def flag(name: str, argv: list[str], option: str, value: str) -> Case:
        return Case(name, [*argv, option, value], message=option)
    return [
        flag("train-budget-nan", ["train", "medusa"], "--budget-minutes", "nan"),
        flag("train-budget-inf", ["train", "medusa"], "--budget-minutes", "inf"),
        flag("train-budget-negative", ["train", "medusa"], "--budget-minutes", "-5"),
        flag("train-budget-zero", ["train", "medusa"], "--budget-minutes", "0"),
        flag("train-steps-negative", ["train", "medusa"], "--steps", "-1"),
        flag("train-steps-zero", ["train", "medusa"], "--steps", "0"),
        flag("train-epochs-zero", ["train", "medusa"], "--epochs", "0"),
        flag("train-epochs-nan", ["train", "medusa"], "--epochs", "nan"),
        flag("train-curve-epochs-negative", ["train-curve", "eagle3"], "--epochs", "-1"),
        flag("train-tokens-negative", ["train", "eagle3"], "--tokens", "-100"),
        flag("train-seed-huge", ["train", "medusa"], "--seed", str(2 ** 70)),
        flag("train-seed-negative", ["train", "medusa"], "--seed", "-1"),
        flag("train-curve-budget-nan", ["train-curve", "eagle3"], "--budget-minutes", "nan"),
        flag("train-curve-budget-negative", ["train-curve", "eagle3"], "--budget-minutes", "-1"),
        flag("train-curve-seed-huge", ["train-curve", "eagle3"], "--seed", str(2 ** 70)),
        flag("train-curve-max-new-tokens-huge", ["train-curve", "eagle3"], "--max-new-tokens", str(10 ** 12)),
        Case("train-curve-tokens-huge", ["train-curve", "eagle3", "--tokens", "1" + "0" * 30], message="--tokens"),
        flag("train-data-seed-huge", ["train-data"], "--seed", str(2 ** 70)),
        flag("train-data-threads-huge", ["train-data"], "--threads", str(10 ** 9)),
        flag("train-data-max-new-tokens-huge", ["train-data"], "--max-new-tokens", str(10 ** 12)),
        flag("train-data-rows-huge", ["train-data"], "--rows", str(10 ** 12)),
        flag("bench-repeats-huge", ["bench", "baseline"], "--repeats", str(10 ** 12)),
        flag("bench-repeats-negative", ["bench", "baseline"], "--repeats", "-2"),
        flag("bench-limit-zero", ["bench", "baseline"], "--limit-per-category", "0"),
        flag("bench-max-new-tokens-zero", ["bench", "baseline"], "--max-new-tokens", "0"),
        flag("bench-draft-length-negative", ["bench", "baseline"], "--draft-length", "-3"),
        flag("bench-draft-length-nan", ["bench", "baseline"], "--draft-length", "nan"),
        flag("run-top-k-negative", ["run", "pld", "--prompt", "hi"], "--top-k", "-1"),
        flag("run-top-p-zero", ["run", "pld", "--prompt", "hi"], "--top-p", "0"),
        flag("run-top-p-above-one", ["run", "pld", "--prompt", "hi"], "--top-p", "1.5"),
        flag("run-temperature-negative", ["run", "pld", "--prompt", "hi"], "--temperature", "-0.5"),
        flag("run-draft-length-zero", ["run", "pld", "--prompt", "hi"], "--draft-length", "0"),
        flag("datastore-max-new-tokens-zero", ["datastore", "build", "--self-generate", "--output", "{tmp}/d.npz"],
             "--max-new-tokens", "0"),
        flag("datastore-batch-size-negative", ["datastore", "build", "--self-generate", "--output", "{tmp}/d.npz"],
             "--batch-size", "-4"),
        flag("calibrate-max-width-huge", ["calibrate"], "--max-width", str(10 ** 9)),
        flag("calibrate-max-width-zero", ["calibrate"], "--max-width", "0"),
        flag("audit-count-negative", ["audit", "--seed", "1"], "--count", "-3"),
        flag("freshness-days-huge", ["freshness"], "--days", str(10 ** 10)),
        flag("freshness-days-negative", ["freshness"], "--days", "-5"),
        flag("freshness-max-per-query-zero", ["freshness"], "--max-per-query", "0"),
        flag("check-links-timeout-nan", ["check-links"], "--timeout", "nan"),
        flag("check-links-timeout-negative", ["check-links"], "--timeout", "-1"),
        flag("check-links-jobs-zero", ["check-links"], "--jobs", "0"),
    ]


def _ro_page(folder: Path) -> None:
    """LEADERBOARD.md as a folder: the page cannot be written even by root."""
    (folder / "LEADERBOARD.md").mkdir()


def run_all(chosen, runner=None) -> Iterator[tuple[Case, Outcome, float, Path]]:
    """Each case of `chosen` run (by `runner`, default `run_case`) in a scratch folder of its own:
    (case, outcome, seconds, the folder), the folder removed once the caller has read the outcome."""
    with tempfile.TemporaryDirectory() as scratch:
        for i, case in enumerate(chosen):
            tmp = Path(scratch) / f"{i:03d}"
            tmp.mkdir()
            start = time.monotonic()
            outcome = (runner or run_case)(case, tmp)
            yield case, outcome, time.monotonic() - start, tmp
            shutil.rmtree(tmp, ignore_errors=True)


def tally(chosen=None, runner=None) -> int:
    """Each case's outcome and time, then the counts by outcome (default: this file's cases)."""
    import collections

    counts = collections.Counter()
    rows = []
    for case, outcome, seconds, _ in run_all(cases() if chosen is None else chosen, runner):
        counts[outcome.status] += 1
        rows.append((case.name, outcome.status, seconds, outcome.detail))
    for name, status, seconds, detail in rows:
        print(f"{status:9} {seconds:5.1f}s {name:40} {detail[:150]}")
    total = sum(counts.values())
    print(f"\n{total} inputs: {counts['clean']} clean, {counts['traceback']} tracebacks, {counts['hang']} hangs or "
          f"memory blow-ups, {counts['lost']} lost data, {counts['wrong']} wrong or unclear answers")
    return 0


if __name__ == "__main__":
    raise SystemExit(tally())
