"""A real (tiny) run: killed after its first finished unit and mid-write, then resumed."""

import hashlib
import json
import subprocess
import sys
import time

import pytest

from specatlas.bench.result_files import load

QUESTIONS = [
    {"question_id": "chat", "category": "writing", "turns": ["Name a colour.", "Name another one."]},
    {"question_id": "fact", "category": "qa", "turns": ["What is the capital of France?"]},
    {"question_id": "too-long", "category": "qa", "turns": ["word " * 9000]},  # past the model's 8192 tokens
]


def units(checkpoint):
    return sum('"method"' in line for line in checkpoint.read_text().splitlines())


@pytest.mark.model
def test_small_bench_end_to_end_with_resume_after_kill(tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out = tmp_path / "results"
    argv = [sys.executable, "-m", "specatlas", "bench", "pld", "hf-generate", "--questions", str(questions),
            "--max-new-tokens", "4", "--out", str(out)]

    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (checkpoints := list(out.glob(".partial-*.jsonl"))) or units(checkpoints[0]) < 1:
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no unit finished in time"
        time.sleep(0.02)
    first.kill()
    first.wait()
    checkpoint = checkpoints[0]
    with checkpoint.open("a") as f:
        f.write('{"question_id": "fact", "category": "qa", "rep')  # as if killed mid-write
    done_before = units(checkpoint)
    assert done_before < 8

    second = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "bench:" in second.stderr  # the progress bar goes to stderr
    assert "specatlas bench: leaving out question too-long: its prompt: the prompt has " in second.stderr
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 1 and files[0].endswith(".json")  # no checkpoint or temp file left
    run = load(out / files[0])  # schema, config hash and summary all check out

    keys = [(s.question_id, s.repeat, s.method) for s in run.samples]
    rows = ("baseline", "saxena2023prompt", "saxena2023prompt@cost-aware", "hf-generate")  # both policies
    assert sorted(keys) == sorted((q, 0, m) for q in ("chat", "fact") for m in rows)
    assert {m.id: m.policy for m in run.methods} == {"baseline": None, "saxena2023prompt": "paper",
                                                      "saxena2023prompt@cost-aware": "cost-aware", "hf-generate": None}
    assert "paper settings: max_ngram_size = 3" in next(m.setup for m in run.methods if m.id == "saxena2023prompt")
    assert [s.units for s in run.sessions] == [done_before, 8 - done_before]
    assert run.sessions[0].finished is None and run.sessions[1].finished
    assert all(len(s.turns) == (2 if s.question_id == "chat" else 1) for s in run.samples)

    config, provenance = run.config, run.provenance
    assert config["question_ids"] == ["chat", "fact"]
    assert [note["question_id"] for note in provenance["left_out_questions"]] == ["too-long"]
    assert config["prompt_set"]["sha256"] == hashlib.sha256(questions.read_bytes()).hexdigest()
    assert len(config["model"]["target_sha256"]) == 64
    assert config["device"] == "cpu" and config["dtype"] == "float32" and config["temperature"] == 0
    assert provenance["packages"]["torch"] and provenance["packages"]["transformers"]
    assert provenance["hardware"]["cores"] >= 1 and provenance["hardware"]["torch_threads"] >= 1
    assert len(run.sessions[0].git_commit) == 40 and run.sessions[0].git_dirty is not None
    assert 1 in run.cost_curve and 64 in run.cost_curve
    first, second = (s.cost_curve for s in run.sessions)  # each session timed its own
    assert first and second and run.cost_curve == {w: min(first[w], second[w]) for w in first}
    for method in ("saxena2023prompt", "saxena2023prompt@cost-aware", "hf-generate"):
        assert run.summary[method]["lossless"]["status"] == "pass", run.summary[method]["lossless"]
        assert run.summary[method]["overall"]["speedup"] > 0
    # our rows time their target forwards inside their verification; a peer's steps are not timed
    for sample in run.samples:
        for turn in sample.turns:
            if sample.method == "hf-generate":
                assert turn.forward_seconds is None and turn.verify_seconds is None
            else:
                assert 0 < turn.forward_seconds <= turn.verify_seconds
