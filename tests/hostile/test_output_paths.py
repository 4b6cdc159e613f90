"""No command destroys what it did not write (issue 30): `site build --out`, `bib -o`,
`datastore build --output`, `leaderboard --results`, `results backfill-weights --results`,
`bench --out` and `train --output` aimed at the checkout, its record folder, a record or a user's
own folder are refused in one line with a non-zero exit, and every file there is still byte for
byte what it was. Relative paths are relative to the working folder."""

import hashlib
from pathlib import Path

import pytest
from corpus import make_root, preload, run_cli

from specatlas import fsutil
from specatlas.site.build import SITE_MARKER


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".std")}


@pytest.fixture
def checkout(tmp_path):
    """A catalog that is also a checkout (.git, README.md, docs/), and a user's folder beside it."""
    preload()
    root = make_root(tmp_path)
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "README.md").write_text("# my checkout\n")
    (root / "docs").mkdir()
    (root / "docs" / "style.css").write_text("body {}\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes\n")
    (mine / "LEADERBOARD.md").write_text("my own page\n")
    (mine / "refs.bib").write_text("@misc{mine, title={Mine}}\n")
    (tmp_path / "corpus.txt").write_text("a small corpus\n")
    (tmp_path / "run").mkdir()  # the CLI's captured output
    return root


COMMANDS = {
    "site": lambda out: ["site", "build", "--out", out],
    "bib": lambda out: ["bib", "-o", out],
    "datastore": lambda out: ["datastore", "build", "{tmp}/corpus.txt", "--output", out],
    "leaderboard": lambda out: ["leaderboard", "--results", out],
    "backfill-weights": lambda out: ["results", "backfill-weights", "--results", out],
    "bench": lambda out: ["bench", "baseline", "--out", out],
    "gpu-check": lambda out: ["gpu-check", "--device", "cpu", "--methods", "pld", "--bench-methods", "pld", "--out", out],
    "train": lambda out: ["train", "medusa", "--output", out],
}
FOLDERS = {"checkout": "{root}", "parent": "{tmp}", "papers": "{root}/papers", "taxonomy": "{root}/taxonomy",
           "user-folder": "{tmp}/mine", "relative-papers": "papers"}
FILES = {"record": "{root}/papers/alpha2023drafting.yaml", "readme": "{root}/README.md",
         "user-file": "{tmp}/mine/notes.txt", "user-bib": "{tmp}/mine/refs.bib",
         "new-file-in-papers": "{root}/papers/new.bib", "docs-file": "{root}/docs/style.css"}
# bench (and gpu-check, through it) only adds uniquely named files to a folder, never replaces one,
# and backfill-weights one file of its own name (over its own only): a user's folder is theirs to use.
CASES = [(command, name, path) for command in COMMANDS for name, path in FOLDERS.items()
         if not (command in ("bench", "gpu-check", "backfill-weights") and name == "user-folder")]
CASES += [(command, name, path) for command in ("bib", "datastore") for name, path in FILES.items()]


@pytest.mark.parametrize("command, name, path", CASES, ids=[f"{c}-{n}" for c, n, _ in CASES])
def test_an_output_that_is_not_the_commands_own_is_refused_and_nothing_changes(checkout, command, name, path):
    tmp = checkout.parent
    before = snapshot(tmp)
    argv = [a.replace("{root}", str(checkout)).replace("{tmp}", str(tmp)) for a in COMMANDS[command](path)]
    code, out, err = run_cli(argv, checkout, tmp / "run", 60)
    assert snapshot(tmp) == before
    assert code not in (0, None), out + err
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if "refusing" in line or "cannot write" in line]
    assert len(lines) == 1, err


def test_the_site_goes_where_a_relative_out_says_and_rebuilds_only_its_own_folder(checkout):
    tmp = checkout.parent
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    code, out, err = run_cli(["site", "build", "--out", "built"], checkout, tmp / "run", 120, cwd=elsewhere)
    assert code == 0, err
    site = elsewhere / "built"
    assert (site / "index.html").is_file() and (site / SITE_MARKER).is_file()
    # Nothing was staged beside the catalog or beside mkdocs.yml (where MkDocs resolved a relative --out).
    assert not any(p.name.startswith(".built") for p in (*checkout.iterdir(), *Path(fsutil.__file__).parents[1].iterdir()))
    code, out, err = run_cli(["site", "build", "--out", "built"], checkout, tmp / "run", 120, cwd=elsewhere)
    assert code == 0, err  # its own earlier build: replaced
    assert sorted(p.name for p in elsewhere.iterdir()) == ["built"]


def test_the_default_site_is_created_marked_and_an_older_unmarked_build_is_replaced(checkout):
    tmp = checkout.parent
    code, out, err = run_cli(["site", "build"], checkout, tmp / "run", 120)
    assert code == 0, err
    site = checkout / "site"
    (site / SITE_MARKER).unlink()  # as a build from before the marker left it
    code, out, err = run_cli(["site", "build"], checkout, tmp / "run", 120)
    assert code == 0, err
    assert (site / SITE_MARKER).is_file()
    (site / SITE_MARKER).unlink()
    (site / "my-notes.txt").write_text("mine\n")  # an unmarked folder with something a build does not write
    before = snapshot(site)
    code, out, err = run_cli(["site", "build"], checkout, tmp / "run", 120)
    assert code == 1 and "my-notes.txt" in err and snapshot(site) == before


def test_bib_and_leaderboard_rewrite_their_own_earlier_output(checkout):
    tmp = checkout.parent
    for _ in range(2):
        code, out, err = run_cli(["bib", "-o", "{}/out.bib".format(tmp)], checkout, tmp / "run", 30)
        assert code == 0, err
        code, out, err = run_cli(["leaderboard"], checkout, tmp / "run", 30)
        assert code == 0, err


def test_the_rule_is_one_function_for_folders_and_one_for_files(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a").write_text("a")
    with pytest.raises(fsutil.WriteError, match="refusing to write the thing to .*: the folder holds files"):
        fsutil.output_dir(tmp_path / "x", "the thing", ".marker")
    (tmp_path / "x" / ".marker").write_text("")
    assert fsutil.output_dir(tmp_path / "x", "the thing", ".marker") == (tmp_path / "x").resolve()
    with pytest.raises(fsutil.WriteError, match="the file exists and is not an earlier output"):
        fsutil.output_file(tmp_path / "x" / "a", "the thing", lambda path: False)
    assert fsutil.output_file(tmp_path / "x" / "a", "the thing", lambda path: True).name == "a"
    with pytest.raises(fsutil.WriteError, match="it contains the checkout"):
        fsutil.output_dir(Path("/"), "the thing", ".marker")
