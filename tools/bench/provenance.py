"""What a measurement depends on besides the code under test: the checkout, the packages, the
machine, and the exact weights. Everything here goes into the result file."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from specatlas.fsutil import CACHE_BYTES, ReadError, WriteError, read_json, update_json
from specatlas.impls.engine.head_folders import SHIPPED_IN_REPOSITORY, weight_file
from specatlas.paths import repo_root

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _git(*args: str, root: Path | None = None) -> bytes | None:
    """The output of git on the checkout (`root`, else the catalog's); None where git, the checkout
    or what is asked for is missing."""
    try:
        done = subprocess.run(["git", *args], cwd=root or repo_root(), capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(root: Path | None = None, excluding: tuple[str, ...] = ()) -> dict:
    """Commit and dirty flag of the checkout at `root` (else the catalog's; None where git cannot
    tell); changes under the folders `excluding` (relative to the checkout's top) do not count."""
    commit = _git("rev-parse", "HEAD", root=root)
    leave_out = ("--", ":(top)", *(f":(top,exclude){p}" for p in excluding)) if excluding else ()
    status = _git("status", "--porcelain", "--untracked-files=no", *leave_out, root=root)
    return {"commit": None if commit is None else commit.decode().strip(),
            "dirty": None if status is None else bool(status.strip())}



def checkout_state() -> dict:
    """The commit of the checkout this code runs from and whether its files differ from it, as a
    model card records them (None where it is no checkout: an installed wheel); the shipped heads
    and results/, which the training commands themselves rewrite (a later family or size still
    trains after an earlier one is written), do not count as a difference."""
    from specatlas.paths import source_checkout

    root = source_checkout()
    return git_state(root, excluding=(SHIPPED_IN_REPOSITORY, "results")) if root else {"commit": None, "dirty": None}

class GitError(Exception):
    """git cannot tell what a commit held: no git, no repository, or not that commit (a shallow
    clone). The message is one line."""


@lru_cache(maxsize=None)
def shipped_weights(commit: str, name: str) -> str | None:
    """sha256 of the weight file the shipped head `name` (its folder) held at `commit`: the file
    the checkpoint loader reads (`head_folders.weight_file`), from git. The content's sha256, not
    git's blob id, so that it equals what a run records (`results.Method.weights`). None where the
    head is not in that commit or the commit is not 40 hex digits (a result file's text never
    reaches git as an option); GitError where git cannot read the commit."""
    if not COMMIT.match(commit):
        return None
    if _git("cat-file", "-e", f"{commit}^{{commit}}") is None:
        if _git("rev-parse", "--git-dir") is None:
            raise GitError(f"git cannot read a repository at {repo_root()}: is git installed, and is this a git checkout?")
        raise GitError(f"commit {commit} is not in the repository's history (a shallow clone? `git fetch --unshallow`)")
    listing = _git("ls-tree", "-z", commit, "--", f"{SHIPPED_IN_REPOSITORY}/{name}/")
    blobs = {}  # file name -> blob id, from entries "<mode> <type> <id>\t<path>"
    for entry in (listing or b"").decode(errors="replace").split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) == 3 and fields[1] == "blob":
            blobs[path.rsplit("/", 1)[-1]] = fields[2]
    chosen = weight_file(blobs.__contains__)
    return None if chosen is None else _blob_sha256(blobs[chosen])


@lru_cache(maxsize=None)
def _blob_sha256(blob: str) -> str | None:
    content = _git("cat-file", "blob", blob)
    return None if content is None else hashlib.sha256(content).hexdigest()


def packages() -> dict:
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "specatlas"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def hardware(device) -> dict:
    import torch

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {
        "cpu": cpu_model(),
        "gpu": gpu,
        "cores": usable,
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
    }


def label(hw: dict) -> str:
    """How a machine is named on the leaderboard: the accelerator if any, else the CPU and its cores."""
    return hw["gpu"] or f"{hw['cpu']} ({hw['cores']} cores, {hw['torch_threads']} torch threads)"


def weights_sha256(model) -> str | None:
    """sha256 of the model's safetensors file(s); None when they cannot be found."""
    folder = _weights_folder(getattr(model, "name_or_path", "") or "")
    files = sorted(folder.glob("*.safetensors")) if folder else []
    if not files:
        return None
    digests = file_digests(files)
    # One file: its plain sha256, checkable with sha256sum. Several: the hash of their hashes.
    return digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()


def loaded_weights(loaded: dict[str, Path]) -> dict[str, str]:
    """The sha256 of each trained file a build loaded (`SpeculativeDecoder.weights`), by its name."""
    names = sorted(loaded)
    return dict(zip(names, file_digests([loaded[name] for name in names]))) if names else {}


def file_digests(files: list[Path]) -> list[str]:
    """sha256 of each weights file. Hashing 0.5 GB takes seconds, so digests are cached by (path,
    inode, size, mtime, ctime: an edit that restores the mtime still moves the ctime). A file this
    process verified against its cache manifest (the embedded model) is known by that digest, which
    no cached one overrides. A damaged cache file is named and its digests computed again."""
    from specatlas.impls.engine.models import cache_root, file_sha256, verified_sha256

    cache_file = cache_root() / "weights-sha256.json"
    try:
        cache = read_json(cache_file, CACHE_BYTES) if cache_file.exists() else {}
    except ReadError as exc:
        print(f"specatlas: ignoring the damaged digest cache {cache_file} ({exc}); hashing again", file=sys.stderr)
        cache = {}
    cache = {k: v for k, v in cache.items() if isinstance(v, str)} if isinstance(cache, dict) else {}
    digests = []
    for file in files:
        stat = file.stat()
        key = f"{file.resolve()}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"
        cache[key] = verified_sha256(file) or (cache[key] if key in cache else file_sha256(file))
        digests.append(cache[key])
    try:  # merged under a lock: another process's digests written meanwhile are kept
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        update_json(cache_file, lambda saved: (saved if isinstance(saved, dict) else {}) | cache)
    except (OSError, WriteError):
        pass  # a read-only cache only costs a re-hash next time
    return digests


def _weights_folder(name_or_path: str) -> Path | None:
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    try:  # a hub id: its snapshot in the local Hugging Face cache
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name_or_path, local_files_only=True))
    except Exception:  # not cached, not a repo id, or huggingface_hub missing: no digest
        return None
