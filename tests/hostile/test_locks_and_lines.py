"""The pieces the commands share against hostile input: one job per output (a lock the kernel
releases however the holder ends), text files split at newlines only and decoded strictly, and
text from files or models shown to a terminal with its control characters escaped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from specatlas.cli import disk_error, printable
from specatlas.fsutil import ReadError, WriteError, exclusive, text_lines


def test_a_second_job_is_refused_in_one_line_and_may_start_once_the_first_ends(tmp_path):
    lock = tmp_path / "job.lock"
    with exclusive(lock, "another job on x"):
        with pytest.raises(WriteError, match=r"another job on x is already running \(it holds .*job.lock\)"):
            with exclusive(lock, "another job on x"):
                pass
    with exclusive(lock, "another job on x"):
        pass
    assert lock.exists()  # never deleted: deleting it would let a third job lock a new file beside a holder


def test_a_killed_holder_releases_the_lock(tmp_path):
    lock = tmp_path / "job.lock"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from specatlas.fsutil import exclusive
with exclusive({str(lock)!r}, "x"):
    print("held", flush=True)
    time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(WriteError, match="already running"):
            with exclusive(lock, "x"):
                pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    with exclusive(lock, "x"):
        pass


def test_lines_split_at_newlines_only():
    data = "\ufeffone\u2028still one\u0085and\x0cone\r\ntwo\n\nthree".encode()
    assert text_lines(data) == ["one\u2028still one\u0085and\x0cone", "two", "", "three"]


def test_a_byte_that_is_not_utf8_is_named_with_offset_and_line():
    with pytest.raises(ReadError, match=r"byte 0xe9 at offset 9 is not UTF-8") as caught:
        text_lines("first\ncaf\u00e9\n".encode("latin-1"))
    assert caught.value.line == 2


def test_control_characters_are_shown_escaped():
    hostile = "ok\n\tgo \x1b]52;c;cHduZWQ=\x07 \x1b[2J \x9b31m \u202eevil \x00"
    shown = printable(hostile)
    assert shown == "ok\n\tgo \\x1b]52;c;cHduZWQ=\\x07 \\x1b[2J \\x9b31m \\u202eevil \\x00"
    assert printable("caf\u00e9 \U0001f600 \u4e2d") == "caf\u00e9 \U0001f600 \u4e2d"


def test_a_full_disk_is_one_line_naming_the_file():
    import errno

    line = disk_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/answers-00003.npz"))
    assert line.startswith("/data/answers-00003.npz: No space left on device;") and "\n" not in line
