"""Writes of records, results, checkpoints, caches and the site are atomic: a kill at any point
leaves either the old file or the new one, and exclusive creation never replaces a file."""

import json
import multiprocessing
import os
import random
import signal
import threading
import time

import pytest

from specatlas import fsutil

OLD, NEW = b"old record\n" * 50_000, b"new record\n" * 200_000


def test_a_kill_at_any_moment_leaves_the_old_or_the_new_file(tmp_path):
    target = tmp_path / "record.yaml"
    rng = random.Random(17)
    outcomes = set()
    for _ in range(40):
        target.write_bytes(OLD)
        pid = os.fork()
        if pid == 0:
            try:
                fsutil.atomic_write(target, NEW)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0, 0.004))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        content = target.read_bytes()
        assert content in (OLD, NEW), f"a torn file of {len(content)} bytes"
        outcomes.add(content == NEW)
    assert outcomes  # both outcomes are normal; a torn one never is


@pytest.mark.parametrize("fail_at", ["write", "fsync", "replace"])
def test_a_failure_at_each_step_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch, fail_at):
    target = tmp_path / "result.json"
    target.write_bytes(OLD)

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if fail_at == "write":
        monkeypatch.setattr(os, "fdopen", lambda fd, mode: _FailingFile(fd))
    else:
        monkeypatch.setattr(os, fail_at, boom)
    with pytest.raises(fsutil.WriteError, match="cannot write .*result.json: No space left on device"):
        fsutil.atomic_write(target, NEW)
    assert target.read_bytes() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


class _FailingFile:
    def __init__(self, fd):
        self.fd = fd

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)

    def write(self, data):
        raise OSError(28, "No space left on device")


def test_exclusive_create_has_exactly_one_winner(tmp_path):
    target = tmp_path / "gamma2024case.yaml"
    results, start = {}, threading.Barrier(8)

    def writer(i):
        start.wait()
        results[i] = fsutil.create_exclusive(target, f"writer {i}\n")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1
    assert target.read_text() == f"writer {winners[0]}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gamma2024case.yaml"]


def test_exclusive_create_never_replaces_an_existing_record(tmp_path):
    target = tmp_path / "alpha2023drafting.yaml"
    target.write_text("someone's record\n")
    assert fsutil.create_exclusive(target, "scaffold\n") is False
    assert target.read_text() == "someone's record\n"


def test_a_folder_is_swapped_in_whole(tmp_path):
    site, staging = tmp_path / "site", tmp_path / ".site-new"
    (site / "papers").mkdir(parents=True)
    (site / "index.html").write_text("old")
    (site / "papers" / "gone.html").write_text("old")
    staging.mkdir()
    (staging / "index.html").write_text("new")
    fsutil.replace_dir(staging, site)
    assert (site / "index.html").read_text() == "new" and not (site / "papers").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_writable_dir_reports_a_file_in_the_way(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(fsutil.WriteError, match="it exists and is not a folder|it is not a folder"):
        fsutil.writable_dir(tmp_path / "file", "results folder")
    with pytest.raises(fsutil.WriteError, match="cannot write to results folder"):
        fsutil.writable_dir(tmp_path / "file" / "sub", "results folder")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder", "too-big"])
def test_read_limited_refuses_what_is_not_a_small_regular_file(tmp_path, kind):
    path = tmp_path / "x"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"x" * 1001)
    start = time.monotonic()
    with pytest.raises(fsutil.ReadError):
        fsutil.read_limited(path, 1000)
    assert time.monotonic() - start < 1


# Two processes writing one path at once ---------------------------------------------------------

def _in_parallel(*jobs) -> None:
    """Run each job in its own forked process, all released together; fail on any failure."""
    start = multiprocessing.get_context("fork").Barrier(len(jobs))

    def run(job):
        start.wait()
        job()

    processes = [multiprocessing.get_context("fork").Process(target=run, args=(job,)) for job in jobs]
    for p in processes:
        p.start()
    for p in processes:
        p.join(30)
    assert [p.exitcode for p in processes] == [0] * len(jobs)


def test_two_runs_appending_to_one_bench_partial_file_keep_every_line(tmp_path):
    """Lines of 40 KB (several buffer sizes) from two writers, while a third process keeps
    reopening the file as a restarted run does (which drops a last line cut short)."""
    from specatlas.bench.result_files import Checkpoint

    path = tmp_path / ".partial-0123456789abcdef.jsonl"
    path.touch()

    def writer(name):
        return lambda: [fsutil.append_line(path, json.dumps({"w": name, "i": i, "pad": name * 40_000}))
                        for i in range(60)]

    def reopener():
        for _ in range(60):
            Checkpoint(path)

    _in_parallel(writer("a"), writer("b"), reopener)
    lines = [json.loads(line) for line in path.read_text().splitlines()]  # every line whole
    assert sorted((x["w"], x["i"]) for x in lines) == sorted((w, i) for w in "ab" for i in range(60))


def test_two_processes_adding_to_one_cache_file_keep_both_entries(tmp_path):
    path = tmp_path / "weights-sha256.json"

    def adder(name):
        return lambda: [fsutil.update_json(path, lambda saved, i=i: (saved or {}) | {f"{name}{i}": i})
                        for i in range(40)]

    _in_parallel(adder("a"), adder("b"))
    assert json.loads(path.read_text()) == {f"{w}{i}": i for w in "ab" for i in range(40)}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".weights-sha256.json.lock", "weights-sha256.json"]


def test_two_processes_replacing_one_result_or_checkpoint_leave_one_whole_file(tmp_path):
    path = tmp_path / "medusa.ckpt"
    contents = {name: name.encode() * 300_000 for name in ("a", "b")}

    def replacer(name):
        return lambda: [fsutil.atomic_write(path, contents[name]) for _ in range(15)]

    _in_parallel(replacer("a"), replacer("b"))
    assert path.read_bytes() in contents.values()
    assert [p.name for p in tmp_path.iterdir()] == ["medusa.ckpt"]  # no temp file left behind



# A saved head folder is replaced whole -----------------------------------------------------------

SEEDS = {"a": 1, "b": 2}  # each run saves a head of its own random weights, with its name in config.json


def _medusa(run: str):
    import torch

    from specatlas.impls.families.medusa import MedusaHeads

    head = MedusaHeads(8, num_heads=2)
    with torch.no_grad():
        for parameter in head.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=torch.Generator().manual_seed(SEEDS[run])))
    return head


def _save(folder, run: str, head=None) -> None:
    from types import SimpleNamespace

    from specatlas.impls.families import FAMILIES

    target = SimpleNamespace(config=SimpleNamespace(hidden_size=8, vocab_size=16))
    FAMILIES["medusa"].save(head or _medusa(run), folder, target, "tiny", {"run": run})


def _saved_run(folder) -> str:
    """The run whose config.json `folder` holds, after checking that its weights are that run's too."""
    import torch
    from safetensors.torch import load_file

    run = json.loads((folder / "config.json").read_text())["run"]
    want, got = _medusa(run).state_dict(), load_file(folder / "medusa_lm_head.safetensors")
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k].half()) for k in want), run
    return run


def test_two_processes_saving_heads_to_one_folder_leave_one_whole_head(tmp_path):
    folder = tmp_path / "medusa-head"
    heads = {run: _medusa(run) for run in SEEDS}  # made before the fork: the processes only save
    _in_parallel(*[lambda run=run: [_save(folder, run, heads[run]) for _ in range(6)] for run in SEEDS])
    assert sorted(p.name for p in folder.iterdir()) == [".specatlas-train", "config.json", "medusa_lm_head.safetensors"]
    assert _saved_run(folder) in SEEDS
    assert [p.name for p in tmp_path.iterdir()] == ["medusa-head"]  # no staging or old folder left behind


def test_a_head_is_not_saved_over_a_folder_of_someone_elses_files(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "config.json").write_text("mine\n")
    (folder / "todo.txt").write_text("mine too\n")
    with pytest.raises(fsutil.WriteError, match=r"refusing to write the medusa head to .*notes: the folder holds "
                                                r"files this command did not write \(no \.specatlas-train in it\)") as caught:
        _save(folder, "a")
    assert "\n" not in str(caught.value)
    assert {p.name: p.read_text() for p in folder.iterdir()} == {"config.json": "mine\n", "todo.txt": "mine too\n"}
    assert [p.name for p in tmp_path.iterdir()] == ["notes"]


def test_a_head_saved_again_keeps_the_files_beside_it_and_drops_the_old_heads(tmp_path):
    """FR-Spec's ranking beside the head stays; an earlier head's weights of another layout go."""
    folder = tmp_path / "head"
    _save(folder, "a")
    (folder / "freq_4.pt").write_bytes(b"ranking")
    (folder / "model.safetensors").write_bytes(b"an earlier head's weights")
    _save(folder, "b")
    assert sorted(p.name for p in folder.iterdir()) == [".specatlas-train", "config.json", "freq_4.pt",
                                                       "medusa_lm_head.safetensors"]
    assert _saved_run(folder) == "b" and (folder / "freq_4.pt").read_bytes() == b"ranking"


def test_a_head_saved_over_a_shipped_folder_of_an_earlier_layout_replaces_its_weights(tmp_path):
    """A clone's shipped head folders carry no marker (it is not committed): a save recognises one by
    its model card and may drop the earlier layout's weights (Hydra's pickled hydra_lm_head.pt), never
    the other files beside them."""
    folder = tmp_path / "head"
    folder.mkdir()
    for name, text in {"training.json": "{}", "README.md": "card", "hydra_lm_head.pt": "old weights",
                       "freq_4.pt": "ranking"}.items():
        (folder / name).write_text(text)
    _save(folder, "b")
    assert sorted(p.name for p in folder.iterdir()) == [".specatlas-train", "config.json", "freq_4.pt",
                                                       "medusa_lm_head.safetensors"]
    assert _saved_run(folder) == "b" and (folder / "freq_4.pt").read_text() == "ranking"
