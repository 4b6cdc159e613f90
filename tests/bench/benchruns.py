"""Synthetic result files: the leaderboard and metrics are tested without running a model."""

from specatlas.bench.results import SCHEMA_VERSION, Run, config_hash, curve_fields, summarize

CURVE = {1: 0.01, 2: 0.012, 4: 0.016, 8: 0.024}

PACKAGES = {"python": "3.11.7", "torch": "2", "transformers": "5", "specatlas": "0.1.0"}
HARDWARE = {"cpu": "Test CPU", "gpu": None, "cores": 2, "torch_threads": 2, "platform": "test"}


def turn(tokens, seconds, steps=None, widths=None, drafted=None, accepted=None, timed=True, draft=0.1, verify=None,
         forward=None):
    """`forward`: the turn's timed target forwards (`Turn.forward_seconds`); None: left out, as result
    files before 2026-12-05 have it."""
    return {"seed": 1, "tokens": tokens, "wall_seconds": seconds, "steps": steps or len(tokens),
            "widths": widths or {1: len(tokens)}, "draft_seconds": draft if timed else None,
            "verify_seconds": (seconds / 2 if verify is None else verify) if timed else None,
            "drafted_at": drafted, "accepted_at": accepted} | ({} if forward is None else {"forward_seconds": forward})


def build_run(samples, methods=("baseline", "fast"), hardware=HARDWARE, temperature=0.0, errors=None, names=None,
              fields=None, curves=(CURVE,)):
    """`fields`: method id -> entries of its `methods` record to set (kind, lossless, relative_to...);
    `curves`: the cost curve each session timed (the samples count as the last session's)."""
    config = {"methods": list(methods), "prompt_set": {"id": "test-set", "sha256": "ab" * 32},
              "question_ids": sorted({s["question_id"] for s in samples}),
              "model": {"target": "tiny", "target_sha256": "cd" * 32, "drafter": None, "drafter_sha256": None},
              "device": "cpu", "dtype": "float32", "max_new_tokens": 4, "repeats": 1, "temperature": temperature,
              "seed": 0, "draft_length": "auto", "torch_threads": 2, "torch": "2", "transformers": "5"}
    errors, names = errors or {}, names or {}
    sessions = [{"started": f"2026-01-01T00:0{n}:00+00:00", "finished": f"2026-01-01T00:0{n + 1}:00+00:00",
                 "git_commit": "0" * 40, "git_dirty": False, "units": len(samples) if n == len(curves) - 1 else 0,
                 "cost_curve": curve} for n, curve in enumerate(curves)]
    run = Run(schema_version=SCHEMA_VERSION, config_hash=config_hash(config), config=config,
              provenance={"started": "2026-01-01T00:00:00+00:00", "packages": PACKAGES, "hardware": hardware,
                          "prompt_set_file": "test.jsonl", "arguments": {}},
              sessions=sessions, **curve_fields(sessions),
              methods=[{"id": m, "name": names.get(m, m), "kind": "specatlas", "lossless": True, "setup": "",
                        "error": errors.get(m), **(fields or {}).get(m, {})} for m in methods],
              samples=samples, summary={})
    run.summary = summarize(run)
    return run


def sample(method, qid, category, *turns, repeat=0):
    return {"question_id": qid, "category": category, "repeat": repeat, "method": method, "turns": list(turns)}
