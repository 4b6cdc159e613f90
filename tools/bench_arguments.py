"""`specatlas bench`'s arguments and their checks, and the measurement they start: the command's
body, which `specatlas gpu-check` also runs on its bench slice (`specatlas.bench.protocol` measures)."""

from __future__ import annotations

import argparse
from pathlib import Path

from specatlas.bench import questions as qs
from specatlas.bench.protocol import BenchError, check_datastore, llamacpp_ids, measure
from specatlas.cli import (add_datastore_option, add_trust_remote_code, chosen_methods, draft_length_policies, number,
                           number_problem, results_folder)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`specatlas bench`'s arguments."""
    parser.add_argument("methods", nargs="*", metavar="ID",
                        help="method ids or aliases from the registry, or peer ids (hf-generate, hf-prompt-lookup, "
                             "hf-assisted, llamacpp-greedy, llamacpp-prompt-lookup); the baseline is always measured")
    parser.add_argument("--all", action="store_true", help="every method in the registry, plus the peers")
    parser.add_argument("--no-peers", action="store_true", help="with --all: leave out the transformers and llama.cpp peers")
    parser.add_argument("--list", action="store_true", help="list the method and peer ids and exit")
    parser.add_argument("--questions", type=Path, default=None,
                        help="Spec-Bench style JSONL (question_id, category, turns); default: the built-in set")
    parser.add_argument("--categories", type=lambda s: [c.strip() for c in s.split(",") if c.strip()], default=None,
                        help="comma-separated subtasks (mt_bench, translation, summarization, qa, math_reasoning, rag)")
    parser.add_argument("--limit-per-category", type=number(int, 1, 10**6), default=None, metavar="N", help="at most N questions per subtask")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="per turn (default: 128)")
    parser.add_argument("--repeats", type=number(int, 1, 10_000), default=1, help="measurements of every question (default: 1)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    parser.add_argument("--seed", type=int, default=0, help="base seed; each question, repeat and turn derives its own")
    parser.add_argument("--draft-length", default="both",
                        help="'both' (default: every method twice, with the paper's settings and with the cost-aware "
                             "policy), 'paper', 'cost-aware' (or 'auto') or a fixed number of draft tokens")
    parser.add_argument("--model", default=None, help="target: a hub id or local folder (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--draft-model", default=None,
                        help="drafter for draft-model methods and hf-assisted (default: the distilled drafter shipped for the embedded model, else a shallow slice of the target)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, mps or auto (default)")
    parser.add_argument("--dtype", default="auto", help="float32, float16, bfloat16 or auto (default)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: results/ in the repository)")
    add_datastore_option(parser)
    add_trust_remote_code(parser)


def check_numbers(args) -> None:
    problem = number_problem(max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed)
    if problem:
        raise BenchError(problem)


def bench(args: argparse.Namespace) -> Path:
    """`specatlas bench` of the parsed `args`: the result file it writes."""
    # The cheap checks first: bad input is answered in a second, before torch is even imported.
    check_numbers(args)
    chosen_policies = draft_length_policies(args.draft_length)
    prompt_set = qs.load(args.questions)
    chosen = qs.select(prompt_set.questions, args.categories, args.limit_per_category)
    out = results_folder(args.out)
    method_ids, peer_ids = chosen_methods(args.methods, args.all, not args.no_peers)
    peer_ids = llamacpp_ids(peer_ids, args.model, args.methods)
    check_datastore(args.datastore, method_ids)
    return measure(args, out, prompt_set, chosen, chosen_policies, method_ids, peer_ids)
