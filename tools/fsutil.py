"""Crash-safe file writes, shared by every command that writes records, results, checkpoints,
caches or the site.

A write goes to a temp file in the same folder, is fsynced, then renamed over the target
(`os.replace` is atomic on POSIX), so a kill at any point leaves either the old file or the new
one, never a truncated mix. `create_exclusive` does the same but refuses to replace anything.

Where a command may write at all is decided here too, once for every command (see "Where a
command may write" below): `output_dir`, `output_file` and `output_place`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path


class WriteError(Exception):
    """A file or folder cannot be written; the message is one line naming the path."""


def _temp_beside(path: Path) -> tuple[int, Path]:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    return fd, Path(name)


def _write_temp(path: Path, data: bytes) -> Path:
    try:
        fd, tmp = _temp_beside(path)
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a record or result is a normal file
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    return tmp


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data` (text is written as UTF-8) atomically."""
    path = Path(path)
    tmp = _write_temp(path, data.encode("utf-8") if isinstance(data, str) else data)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from None
    _sync_dir(path.parent)


def create_exclusive(path: Path, data: str | bytes) -> bool:
    """Write `path` atomically only if it does not exist yet; False (and nothing written) if it does.

    The complete temp file is hard-linked to the target name: link() fails when the name is taken,
    so two writers racing for one name cannot both win, and no one ever sees a partial file.
    """
    path = Path(path)
    tmp = _write_temp(path, data.encode("utf-8") if isinstance(data, str) else data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    _sync_dir(path.parent)
    return True


def create_unique(path: Path, data: str | bytes) -> Path:
    """Write to `path`, or to `stem-2.suffix`, `stem-3.suffix`... if taken; never replaces a file."""
    path = Path(path)
    candidate, n = path, 1
    while not create_exclusive(candidate, data):
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


def append_line(path: Path, line: str) -> None:
    """Append the complete line `line` to `path`, fsynced, as one write under an exclusive lock:
    processes appending to one file at once never interleave or lose each other's lines, and a
    reader holding the lock (`locked_file`) never sees another writer's line half written."""
    data = (line if line.endswith("\n") else line + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:  # a regular file takes it in one write; a short write (disk full) continues
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def locked_file(path: Path):
    """`path` opened to read and write with an exclusive lock held (the lock `append_line` takes)."""
    with open(path, "r+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        yield f


@contextmanager
def exclusive(path: Path, what: str):
    """Run the block as the only holder of the lock file `path` (created if missing, never
    deleted): a second job asking for it meanwhile is refused at once with a one-line WriteError
    saying `what` holds it, instead of writing the same output beside the first. The lock is the
    kernel's (flock), so it is released when the process ends, however it ends (SIGKILL too)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise WriteError(f"cannot lock {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WriteError(f"{what} is already running (it holds {path}); wait for it to finish") from None
        yield
    finally:
        os.close(fd)


def update_json(path: Path, change: Callable[[object], object]) -> object:
    """Read-modify-write of the JSON file `path` under a lock on its sidecar `.<name>.lock`:
    `change` gets the current document (None when missing or unreadable) and returns the new one,
    written atomically. Two processes adding entries at once both keep theirs (a plain read, then
    atomic_write, would keep only the later writer's). Returns what was written."""
    path = Path(path)
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            current = read_json(path, CACHE_BYTES)
        except ReadError:
            current = None
        new = change(current)
        atomic_write(path, json.dumps(new, indent=1) + "\n")
    return new


def writable_dir(folder: Path, what: str = "folder") -> Path:
    """Create `folder` if needed and prove it takes a file; raise WriteError saying why not.

    Called before anything expensive (loading a model, building the site), so that an unwritable
    output is reported in a second, not after an hour of measurement.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not folder.is_dir():
            raise WriteError(f"cannot write to {what} {folder}: it is not a folder")
        fd, name = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except FileExistsError:
        raise WriteError(f"cannot write to {what} {folder}: it exists and is not a folder") from None
    except OSError as exc:
        raise WriteError(f"cannot write to {what} {folder}: {exc.strerror or exc}") from None
    return folder


def replace_dir(staging: Path, target: Path) -> None:
    """Move a completely built folder `staging` to `target`, replacing what was there.

    Two renames (old out of the way, new in): a kill between them leaves the old folder beside
    the target under a hidden name, never a half-written target.
    """
    staging, target = Path(staging), Path(target)
    old = None
    if target.exists() or target.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


CACHE_BYTES = 16 << 20  # a cache's JSON file (kernel choices, digests, searches) is kilobytes


class ReadError(Exception):
    """A file cannot be read as data; the message says why, without the path (callers add it)."""


def read_limited(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path`, refusing anything else before reading it.

    A symlink to /dev/zero or a FIFO would otherwise hang the reader or fill memory; opening with
    O_NONBLOCK keeps even the open() of a FIFO from blocking.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ReadError(f"cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a pipe" if stat.S_ISFIFO(info.st_mode) else "a device or socket"
            raise ReadError(f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise ReadError(f"is {info.st_size:,} bytes; at most {limit:,} are accepted")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ReadError(f"is over {limit:,} bytes; at most {limit:,} are accepted")
        return b"".join(chunks)
    except OSError as exc:
        raise ReadError(f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)

class NotUTF8(ReadError):
    """A text file's bytes are not UTF-8; `line` is where (callers say file:line)."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


def text_lines(data: bytes) -> list[str]:
    """The lines of a UTF-8 text file's bytes (a leading BOM dropped), split at "\n" only (with a
    "\r" before it): U+2028, U+0085 or a form feed inside a line, valid in a JSON string, do not end
    it. NotUTF8 names the first byte that is not UTF-8 with its offset, and has its line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUTF8(f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8; save the file as UTF-8",
                      data.count(b"\n", 0, exc.start) + 1) from None
    return [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]


def read_json(path: Path, limit: int, **hooks):
    """The JSON document in `path` (at most `limit` bytes; `hooks`: json.loads's parse_* arguments),
    or a ReadError saying in one line why it is not one: too large, not UTF-8, malformed, nested
    too deeply, or refused by a hook (a ValueError)."""
    return parse_json(read_limited(path, limit), **hooks)


def parse_json(data: str | bytes, **hooks):
    """`data` as JSON (one document: a file's bytes, or one line of a JSONL file), or a ReadError
    saying in one line why it is not one (read_json's reasons, the size aside)."""
    try:
        return json.loads(data, **hooks)
    except RecursionError:
        raise ReadError("not valid JSON: nested too deeply") from None
    except UnicodeDecodeError:
        raise ReadError("not valid JSON: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ReadError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # a hook's refusal (a NaN, an infinity...)
        raise ReadError(f"not valid JSON: {exc}") from None


# Where a command may write ---------------------------------------------------------------------
#
# The one rule every command's output goes through. A path given on the command line is relative
# to the working folder (never to the checkout or to mkdocs.yml). A command never writes into the
# catalog's own folders (records, taxonomy, results, site sources, code, tests) except the one
# place it owns there (`allowed`: results/ for bench, the shipped heads for train), never onto the
# checkout itself or a folder that contains it, and never replaces what it did not write: a
# folder must be new, empty or carry the command's marker file from an earlier build; a file must
# be new or look like the command's own earlier output.

DATA_FOLDERS = ("papers", "taxonomy", "results", "docs", "reference_impls", "tools", "tests")



def _absolute(path: Path) -> Path:
    """`path` as an absolute path, relative to the working folder, symlinks resolved (a link into
    papers/ is papers/)."""
    return Path(path).expanduser().resolve()


def _checkouts() -> set[Path]:
    """The catalog in use (SPECATLAS_ROOT or the checkout found from here) and this code's checkout."""
    from specatlas.paths import repo_root, source_checkout

    roots = {root for root in (source_checkout(),) if root}
    try:
        roots.add(repo_root())
    except SystemExit:  # no catalog found: only this code's checkout is guarded
        pass
    return roots


def _place_problem(target: Path, allowed: Path | None = None) -> str | None:
    """Why the absolute path `target` is no place for a command's output, or None."""
    allowed = _absolute(allowed) if allowed is not None else None
    for root in sorted(_checkouts()):
        if target == root:
            return "it is the checkout itself"
        if root.is_relative_to(target):
            return f"it contains the checkout {root}"
        for name in DATA_FOLDERS:
            if target.is_relative_to(root / name) and not (allowed and target.is_relative_to(allowed)):
                return f"it is {'' if target == root / name else 'inside '}the catalog's {name}/ folder"
    return None


def _refusal(path: Path, what: str, why: str) -> WriteError:
    return WriteError(f"refusing to write {what} to {path}: {why}")


def output_place(path: Path, what: str, allowed: Path | None = None) -> Path:
    """`path` made absolute, refused (WriteError) when it lies in the catalog or on the checkout."""
    target = _absolute(path)
    problem = _place_problem(target, allowed)
    if problem:
        raise _refusal(path, what, problem)
    return target


def output_dir(path: Path, what: str, marker: str, allowed: Path | None = None,
               legacy: Callable[[Path], bool] | None = None) -> Path:
    """The folder `path` (absolute) if the command may fill or replace it: it does not exist, is
    empty, holds `marker` (written by the command's earlier build), or passes `legacy` (an output of
    a version that wrote no marker). Anything else is refused with a one-line WriteError."""
    target = output_place(path, what, allowed)
    _check_owned(path, target, what, marker, legacy)
    return target


def _check_owned(path: Path, target: Path, what: str, marker: str, legacy: Callable[[Path], bool] | None) -> None:
    """Refuse (WriteError) the folder `target` unless it is new, empty, holds `marker` or passes `legacy`."""
    if target.exists() and not target.is_dir():
        raise _refusal(path, what, "it exists and is not a folder")
    if target.is_dir() and not (target / marker).is_file() and not (legacy and legacy(target)):
        try:
            empty = next(target.iterdir(), None) is None
        except OSError as exc:
            raise WriteError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
        if not empty:
            raise _refusal(path, what, f"the folder holds files this command did not write (no {marker} in it); "
                                       "choose a new or empty folder")


def install_dir(staging: Path, target: Path, marker: str, what: str, replaces: Callable[[str], bool] | None = None) -> None:
    """Mark the completely built folder `staging` and swap it in for `target` (replace_dir). A
    target without the marker (an older build, accepted by output_dir's `legacy`) is replaced only
    when the new build writes every name it holds or names it as one it `replaces` (an earlier
    layout of the command's own files), so nothing else in it can be lost."""
    (staging / marker).write_text(f"written by specatlas; {what} may replace this folder\n", encoding="utf-8")
    if target.is_dir() and not (target / marker).is_file():
        foreign = sorted({p.name for p in target.iterdir() if not (replaces and replaces(p.name))}
                         - {p.name for p in staging.iterdir()})
        if foreign:
            raise _refusal(target, what, f"it holds {', '.join(foreign[:3])}, which a build does not write")
    replace_dir(staging, target)


def build_dir(path: Path, fill: Callable[[Path], None], marker: str, what: str,
              legacy: Callable[[Path], bool] | None = None, keep: Callable[[str], bool] | None = None) -> Path:
    """Make the folder `path` whole at once: `fill` writes every file into a fresh sibling folder,
    which is then swapped in (install_dir), so a kill leaves the old folder or the new one, and two
    processes building the same folder end with one of theirs whole, never a mix. The old folder is
    replaced only under output_dir's rule, checked again here (the command's first check may be
    hours old) under a lock on the parent folder held until the swap; its files that `keep` names
    and `fill` did not write are carried into the new folder (another command's files beside ours).
    Returns the folder's absolute path."""
    target = _absolute(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(target.parent, os.O_RDONLY)
    except OSError as exc:
        raise WriteError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by close
        _check_owned(path, target, what, marker, legacy)
        try:
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-new-", dir=target.parent))
        except OSError as exc:
            raise WriteError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
        try:
            os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700; the folder is a normal one
            fill(staging)
            if keep is not None and target.is_dir():
                for old in target.iterdir():
                    new = staging / old.name
                    if not keep(old.name) or new.exists() or new.is_symlink():
                        continue
                    if old.is_symlink():
                        new.symlink_to(os.readlink(old))
                    elif old.is_dir():
                        shutil.copytree(old, new, symlinks=True)
                    else:
                        shutil.copy2(old, new)
            # What `keep` does not carry over is the caller's own: a save may drop it even from a legacy folder.
            install_dir(staging, target, marker, what, None if keep is None else lambda name: not keep(name))
        except OSError as exc:
            raise WriteError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        os.close(lock)
    return target


def starts_with(prefix: str) -> Callable[[Path], bool]:
    """An `is_own` test for `output_file`: the file begins with `prefix`, as the command's output does."""
    head = prefix.encode()

    def is_own(path: Path) -> bool:
        with path.open("rb") as f:
            return f.read(len(head)) == head

    return is_own


def output_file(path: Path, what: str, is_own: Callable[[Path], bool], allowed: Path | None = None) -> Path:
    """The file `path` (absolute) if the command may write it: it does not exist, or `is_own`
    recognises it as the command's earlier output. A device or pipe is refused: the atomic rename
    would replace it (a command that streams into /dev/stdout handles that before asking)."""
    target = output_place(path, what, allowed)
    if target.is_dir():
        raise WriteError(f"cannot write {what} to {path}: it is a folder; name a file")
    if target.exists() and not target.is_file():
        raise WriteError(f"cannot write {what} to {path}: it is not a regular file")
    if target.is_file():
        try:
            own = is_own(target)
        except (OSError, ValueError):
            own = False
        if not own:
            raise _refusal(path, what, "the file exists and is not an earlier output of this command; "
                                       "delete it or choose another name")
    return target
