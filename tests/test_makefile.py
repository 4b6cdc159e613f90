"""The README's two commands install what they need and no more: `make demo` compiles nothing (the
llama.cpp peers, a source build of llama.cpp, are `make peers`), and `make test`, CI's command,
installs the peers so that their tests run. Read from `make -n` in a fresh copy of the Makefile,
so nothing is installed."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def recipe(target: str, tmp_path: Path) -> str:
    """What `make TARGET` would run on a fresh clone (no .venv yet)."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def extras(commands: str) -> set[str]:
    """The extras of the project that the pip commands install."""
    return {extra.strip() for group in re.findall(r'pip install[^\n]*-e "?\.\[([^\]]*)\]', commands)
            for extra in group.split(",")}


def test_the_demo_installs_no_peers_and_compiles_nothing(tmp_path):
    commands = recipe("demo", tmp_path)
    assert {"engine", "site", "train"} <= extras(commands)
    assert "peers" not in extras(commands)
    for compiling in ("llama-cpp-python", "llama_cpp", "apt-get", "cmake", "build-essential"):
        assert compiling not in commands, compiling


@pytest.mark.parametrize("target", ["test", "test-full"])
def test_the_test_targets_install_the_peers(tmp_path, target):
    commands = recipe(target, tmp_path)
    assert "peers" in extras(commands) and {"engine", "test"} <= extras(commands)
    assert commands.index(".[peers]") < commands.index("pytest")


def test_ci_runs_the_readmes_test_command():
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")
    assert re.search(r"^make test\s", (ROOT / "README.md").read_text(), re.M)


def test_gpu_check_runs_the_command_on_the_device_it_is_given(tmp_path):
    commands = recipe("gpu-check", tmp_path)
    assert "peers" not in extras(commands)
    assert commands.rstrip().endswith("specatlas gpu-check --device cuda")
    done = subprocess.run(["make", "--no-print-directory", "-n", "gpu-check", "DEVICE=cuda:1", "QUESTIONS=q dir/question.jsonl"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.rstrip().endswith('specatlas gpu-check --device cuda:1 --questions "q dir/question.jsonl"')
