"""Head-to-head speed of decoders on Spec-Bench questions, in one process, interleaved.

Reusable by a full benchmark harness: `compare(runners, questions, ...)` takes any named
`Runner` (ours or transformers' `generate` with any options) and returns one `Measurement` per
run; `summarize` turns them into tokens/s per category. Fairness: a warm-up run of every runner
first, then for each question every runner in turn (rotating the order), so machine load and
caches hit them alike.

    python -m specatlas.impls.measure --per-category 2 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

# (prompt token ids, max new tokens) -> new token ids
Runner = Callable[[list[int], int], list[int]]


@dataclass
class Question:
    id: str
    category: str
    prompt: str


@dataclass
class Measurement:
    runner: str
    question: str
    category: str
    new_tokens: int
    seconds: float
    tokens: list[int]


# Spec-Bench reports MT-bench's eight subcategories as one category, "mt_bench".
MT_BENCH = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}


def spec_bench_questions(path: Path, per_category: int) -> list[Question]:
    """The first `per_category` questions of each Spec-Bench category (first turn only)."""
    taken: dict[str, int] = defaultdict(int)
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        category = "mt_bench" if row["category"] in MT_BENCH else row["category"]
        if taken[category] < per_category:
            taken[category] += 1
            out.append(Question(str(row["question_id"]), category, row["turns"][0]))
    return out


def ours(decoder, stop: set[int]) -> Runner:
    return lambda prompt, max_new: decoder.generate(prompt, max_new, stop=stop).tokens


def transformers_generate(model, **options) -> Runner:
    def run(prompt: list[int], max_new: int) -> list[int]:
        ids = torch.tensor([prompt], device=model.device)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new, do_sample=False, **options)
        return out[0, len(prompt):].tolist()

    return run


def compare(runners: dict[str, Runner], questions: list[Question], encode, max_new_tokens: int,
            progress: Callable[[Measurement], None] | None = None) -> list[Measurement]:
    names = list(runners)
    warmup = encode(questions[0].prompt)
    for run in runners.values():
        run(warmup, 16)
    results = []
    for index, question in enumerate(questions):
        prompt = encode(question.prompt)
        for name in names[index % len(names):] + names[: index % len(names)]:
            start = time.perf_counter()
            tokens = runners[name](prompt, max_new_tokens)
            result = Measurement(name, question.id, question.category, len(tokens), time.perf_counter() - start, tokens)
            results.append(result)
            if progress:
                progress(result)
    return results


def summarize(results: list[Measurement]) -> dict[str, dict[str, float]]:
    """tokens/s by category (and "overall") for each runner: total tokens over total seconds."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for r in results:
        for category in (r.category, "overall"):
            totals[(r.runner, category)][0] += r.new_tokens
            totals[(r.runner, category)][1] += r.seconds
    table: dict[str, dict[str, float]] = defaultdict(dict)
    for (runner, category), (tokens, seconds) in totals.items():
        table[runner][category] = tokens / seconds
    return dict(table)


def main(argv: list[str] | None = None) -> int:
    from specatlas.impls.models import encode_chat, eos_ids, load_model, pick_device
    from specatlas.impls.registry import METHODS
    from specatlas.paths import shared_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, help="Spec-Bench question.jsonl (default: shared/data/spec_bench)")
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--lookup-tokens", type=int, default=10, help="transformers' prompt_lookup_num_tokens")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, help="write every measurement and the summary as JSON")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    path = args.questions or (shared_dir() or Path("shared")) / "data" / "spec_bench" / "question.jsonl"
    if not path.is_file():
        parser.error(f"no Spec-Bench questions at {path}; pass --questions")

    loaded = load_model(None, device=pick_device())
    model, tokenizer = loaded.model, loaded.tokenizer
    stop = eos_ids(model, tokenizer)
    runners = {
        "generate": transformers_generate(model),
        "baseline": ours(METHODS["baseline"].build(model), stop),
        "generate+lookup": transformers_generate(model, prompt_lookup_num_tokens=args.lookup_tokens),
        "pld": ours(METHODS["saxena2023prompt"].build(model), stop),
    }
    questions = spec_bench_questions(path, args.per_category)
    results = compare(runners, questions, lambda text: encode_chat(tokenizer, text), args.max_new_tokens,
                      progress=lambda r: print(f"  {r.category:16} {r.question:>4} {r.runner:16} "
                                               f"{r.new_tokens:4d} tokens {r.new_tokens / r.seconds:6.1f} tok/s", flush=True))
    table = summarize(results)
    categories = sorted({q.category for q in questions}) + ["overall"]
    print(f"\n{'category':16} {'generate':>9} {'baseline':>9} {'base/gen':>9} {'gen+look':>9} {'pld':>9} "
          f"{'pld/base':>9} {'pld/g+l':>9}")
    for category in categories:
        row = {name: table[name][category] for name in runners}
        print(f"{category:16} {row['generate']:9.1f} {row['baseline']:9.1f} {row['baseline'] / row['generate']:9.2f} "
              f"{row['generate+lookup']:9.1f} {row['pld']:9.1f} {row['pld'] / row['baseline']:9.2f} "
              f"{row['pld'] / row['generate+lookup']:9.2f}")
    same = sum(a.tokens == b.tokens for a in results if a.runner == "generate"
               for b in results if b.runner == "baseline" and b.question == a.question)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nbaseline output identical to generate on {same}/{len(questions)} questions; peak RSS {peak_mb:.0f} MB")
    if args.out:
        from specatlas.fsutil import atomic_write

        atomic_write(args.out, json.dumps({"summary": table, "peak_rss_mb": peak_mb,
                                           "runs": [asdict(r) for r in results]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
