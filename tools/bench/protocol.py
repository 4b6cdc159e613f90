"""The bench's measurement (`specatlas bench`, and the slice `specatlas gpu-check` runs), once its
arguments are checked.

Protocol: load once, measure the target's forward cost curve, warm every method up, then for
each question and repeat run the baseline and then every other method in an order that rotates
from unit to unit, so slow drift of the machine (thermal, background load) hits all alike.
Greedy outputs are compared token by token with the baseline's (see results.summarize).

A resumed run is a new session on a machine that may be busier or quieter than the first: each
session times its own cost curve at its start, and the result prices forwards with the per-width
fastest of them (`results.combine_curves`), warning where they disagree.
"""

from __future__ import annotations

import hashlib
import sys
import zlib
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from specatlas.bench import provenance
from specatlas.bench.result_files import Checkpoint, dumps
from specatlas.bench.results import (BASELINE, SCHEMA_VERSION, Run, config_hash, curve_fields, curve_warning,
                                     references, summarize)
from specatlas.data_shards import chosen_datastore
from specatlas.fsutil import create_unique, exclusive
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.chat import render_chat
from specatlas.impls.registry import METHODS
from specatlas.paths import repo_root


class BenchError(Exception):
    """Bad input or setup; the message is for the user."""


def llamacpp_ids(peer_ids: list[str], model: str | None, named: list[str]) -> list[str]:
    """`peer_ids` without the llama.cpp peers when they cannot run (another --model, llama-cpp-python
    missing): a BenchError when one was named, else a line on stderr saying why they are left out."""
    from specatlas.bench.contenders import LLAMACPP, llamacpp_problem

    chosen = [p for p in peer_ids if p in LLAMACPP]
    problem = llamacpp_problem(model) if chosen else None
    if problem is None:
        return peer_ids
    if {n.strip().lower() for n in named} & set(chosen):
        raise BenchError(problem)
    print(f"specatlas bench: leaving out {', '.join(chosen)}: {problem}", file=sys.stderr)
    return [p for p in peer_ids if p not in LLAMACPP]


def encode_conversation(tokenizer, turns: list[str], answers: list[str]) -> list[int]:
    """The user turns so far, with the model's own answers between them, through the chat template."""
    messages = []
    for i, turn in enumerate(turns):
        messages.append({"role": "user", "content": turn})
        if i < len(answers):
            messages.append({"role": "assistant", "content": answers[i]})
    if getattr(tokenizer, "chat_template", None):  # sandboxed and bounded: a ModelLoadError when it fails
        return tokenizer(render_chat(tokenizer, messages), add_special_tokens=False).input_ids
    return tokenizer("\n\n".join(m["content"] for m in messages)).input_ids


def fitting(questions: list, target, max_new_tokens: int) -> tuple[list, list[dict]]:
    """The questions whose whole conversation fits the target's context (every turn, each answer
    `max_new_tokens` long), and a note for each left out, also said on stderr; a BenchError when
    none fits. Checked before measuring: a prompt past the context would otherwise end a method's
    row at that question (the engine refuses it) or cut its answers short unseen."""
    from specatlas.impls.engine.decoding import ContextError, room_after

    kept, left_out = [], []
    for question in questions:
        turns = len(question.turns)
        conversation = encode_conversation(target.tokenizer, list(question.turns), [""] * (turns - 1))
        try:
            room_after(target.model, conversation, turns * max_new_tokens)
            kept.append(question)
        except ContextError as exc:
            where = f"its {turns} turns, each answer counted at --max-new-tokens" if turns > 1 else "its prompt"
            reason = f"{where}: {exc}"
            left_out.append({"question_id": question.id, "reason": reason})
            print(f"specatlas bench: leaving out question {question.id}: {reason}", file=sys.stderr)
    if not kept:
        raise BenchError(f"no chosen question fits {target.name}'s context with --max-new-tokens {max_new_tokens} "
                         f"(question {left_out[0]['question_id']}: {left_out[0]['reason']})")
    return kept, left_out


def chosen_store(choice, target):
    """The datastore `--datastore` names, loaded once for every retrieval row (None: each loads the
    shipped one)."""
    from specatlas.impls.methods.retrieval import datastore_for

    return datastore_for(target.model, chosen_datastore(choice, target.name)) if choice is not None else None


def check_datastore(choice, method_ids: list[str]) -> None:
    """A BenchError when --datastore is given and no chosen method reads a datastore."""
    if choice is not None and not any(METHODS[i].uses_datastore for i in method_ids):
        readers = ", ".join(spec.id for spec in METHODS.values() if spec.uses_datastore)
        raise BenchError(f"--datastore: no chosen method reads a datastore (these do: {readers})")


def unit_seed(seed: int, question_id: str, repeat: int, turn: int) -> int:
    """The same for every method on a unit, so sampled runs of different methods are comparable."""
    return zlib.crc32(f"{seed}/{question_id}/{repeat}/{turn}".encode())


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def measure(args, out: Path, prompt_set, chosen, chosen_policies, method_ids: list[str], peer_ids: list[str]) -> Path:
    """Measure the checked choice into `out`: the result file's path. One bench per results folder
    at a time: two would each resume the other's partial file."""
    from specatlas.impls.engine.models import cache_root

    lock = cache_root() / "locks" / f"bench-{hashlib.sha256(str(out).encode()).hexdigest()[:16]}.lock"
    with exclusive(lock, f"another specatlas bench writing to {out}"):
        return _measure(args, out, prompt_set, chosen, chosen_policies, method_ids, peer_ids)


def _measure(args, out: Path, prompt_set, chosen, chosen_policies, method_ids, peer_ids) -> Path:
    """`measure` from the model load on, under its lock."""
    from transformers.utils import logging as hf_logging

    from specatlas.impls.engine.models import eos_ids

    hf_logging.set_verbosity_error()  # generate()'s deprecation notices would tear the progress bar
    loaded = _load(args)
    device, _, target, drafter = loaded
    chosen, left_out = fitting(chosen, target, args.max_new_tokens)
    datastore = chosen_store(args.datastore, target)
    versions, git = provenance.packages(), provenance.git_state()
    config = _config(args, method_ids + peer_ids, prompt_set, chosen, loaded, datastore, versions)
    digest = config_hash(config)
    checkpoint = _checkpoint(out / f".partial-{digest[:16]}.jsonl")
    if checkpoint.header is None:
        checkpoint.start(_header(args, digest, config, versions, device, prompt_set, left_out, peer_ids))
    checkpoint.append(_session(git, target))

    stop = eos_ids(target.model, target.tokenizer)
    contenders = _contenders(target, drafter.model if drafter else None, datastore, method_ids, chosen_policies, peer_ids, stop)
    if contenders[0].error:
        raise BenchError(f"the baseline cannot run: {contenders[0].error}")
    _measure_units(checkpoint, contenders, chosen, target, args, stop)

    run = _assemble(checkpoint, contenders)
    started = run.provenance["started"][:10]
    # A rerun of the same configuration on the same day gets its own file (-2, -3...): an earlier
    # result is someone's hours of measurement and is never replaced.
    path = create_unique(out / f"{started}-{_slug(target.name)}-{device.type}-{digest[:8]}.json", dumps(run))
    checkpoint.path.unlink()
    _print_summary(run)
    return path


def _load(args) -> tuple:
    """(device, dtype, target, drafter or None) as the arguments ask, on this machine's kernels."""
    from specatlas.impls.engine.models import load_model, machine_kernels, pick_device, pick_dtype

    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    kernels = machine_kernels()  # measured on this machine: the run records the choice (`kernel_choice`)
    target = load_model(args.model, device, dtype, args.trust_remote_code, kernels)
    drafter = load_model(args.draft_model, device, dtype, args.trust_remote_code, kernels) if args.draft_model else None
    return device, dtype, target, drafter


def _config(args, ids: list[str], prompt_set, chosen, loaded: tuple, datastore, versions: dict) -> dict:
    """What the run measures, hashed to name its partial file: a rerun with the same config resumes
    it. The commit is not part of it: a resumed run records each session's commit instead."""
    import torch

    from specatlas.impls.engine.cpu_kernels import describe as describe_kernels, packed_layers

    device, dtype, target, drafter = loaded
    return {
        "methods": ids,
        "prompt_set": {"id": prompt_set.id, "sha256": prompt_set.sha256},
        "question_ids": [q.id for q in chosen],
        "model": {"target": target.name, "target_sha256": provenance.weights_sha256(target.model),
                  "drafter": drafter.name if drafter else None,
                  "drafter_sha256": provenance.weights_sha256(drafter.model) if drafter else None},
        "device": str(device), "dtype": str(dtype).removeprefix("torch."),
        "max_new_tokens": args.max_new_tokens, "repeats": args.repeats, "temperature": args.temperature,
        "seed": args.seed, "draft_length": args.draft_length, "torch_threads": torch.get_num_threads(),
        "packed_linears": packed_layers(target.model), "kernel_choice": describe_kernels(target.model),
        "torch": versions["torch"], "transformers": versions["transformers"],
        **({"datastore": {"file": datastore.path.name, "sha256": provenance.file_digests([datastore.path])[0],
                          "tokens": len(datastore)}} if datastore is not None else {}),
    }


def _checkpoint(path: Path) -> Checkpoint:
    """The partial file at `path`, saying on stderr which of its lines were unreadable."""
    checkpoint = Checkpoint(path)
    if checkpoint.skipped:
        print(f"specatlas bench: {checkpoint.path}: skipped unreadable line(s) {', '.join(map(str, checkpoint.skipped[:10]))}"
              f"{' ...' if len(checkpoint.skipped) > 10 else ''}; their units are measured again, the other lines are kept",
              file=sys.stderr)
    return checkpoint


def _header(args, digest: str, config: dict, versions: dict, device, prompt_set, left_out: list[dict],
            peer_ids: list[str]) -> dict:
    """The first line of a new partial file: the config and where the run started."""
    from specatlas.bench import contenders as cs

    return {
        "config_hash": digest, "config": config,
        "provenance": {"started": now(), "packages": versions, "hardware": provenance.hardware(device),
                       "prompt_set_file": _shown(prompt_set.path), "arguments": _arguments(args),
                       **({"left_out_questions": left_out} if left_out else {}),
                       **({"llama_cpp": cs.llamacpp_build()} if set(peer_ids) & set(cs.LLAMACPP) else {})},
    }


def _session(git: dict, target) -> dict:
    """The line each session (the first run or a resumed one) starts with: its commit and cost curve."""
    from specatlas.bench import contenders as cs

    return {"session": {"started": now(), "git_commit": git["commit"], "git_dirty": git["dirty"],
                        "cost_curve": cs.cost_curve(target.model)}}


def _measure_units(checkpoint: Checkpoint, contenders: list, chosen: list, target, args, stop) -> None:
    """Every unit the partial file lacks, each appended to it as it finishes, after an untimed warmup."""
    from tqdm import tqdm

    from specatlas.bench import contenders as cs

    done = {(s["question_id"], s["repeat"], s["method"]) for s in checkpoint.items if "method" in s}
    plan = _plan(contenders, chosen, args.repeats, done)
    if plan:  # untimed: first-call allocations and lazy initialisation must not count
        warmup = encode_conversation(target.tokenizer, [cs.WARMUP_PROMPT], [])
        for contender in contenders:
            if not contender.error:
                cs.attempt(contender, lambda c=contender: c.generate(warmup, cs.WARMUP, args.temperature, args.seed, stop))
    with tqdm(total=len(done) + len(plan), initial=len(done), desc="bench", unit="gen", file=sys.stderr,
              dynamic_ncols=True) as bar:
        for question, repeat, contender in plan:
            bar.set_postfix_str(f"{question.id} {contender.id}", refresh=False)
            if not contender.error:
                sample = cs.attempt(contender, lambda: _unit(contender, question, repeat, target.tokenizer, args, stop))
                if sample:
                    checkpoint.append(sample)
            bar.update()


def _contenders(target, draft_model, datastore, method_ids: list[str], chosen_policies, peer_ids: list[str], stop) -> list:
    """Every row of the run, built (or holding why it could not be): the baseline first, each method
    under each policy, then the transformers and llama.cpp peers."""
    import torch

    from specatlas.bench import contenders as cs

    contenders = [cs.built(lambda s=METHODS[i], d=d: cs.specatlas_method(s, target.model, draft_model, d,
                                                                     datastore if s.uses_datastore else None),
                           cs.contender_id(i, d), METHODS[i].name, "specatlas", METHODS[i].lossless, cs.policy_of(i, d))
                  for i in method_ids for d in (chosen_policies if i != BASELINE else [DraftLengthPolicy.paper()])]
    pad = target.tokenizer.pad_token_id if target.tokenizer.pad_token_id is not None else min(stop)
    contenders += [cs.built(lambda p=p: cs.peer(p, target.model, draft_model, pad), p, cs.PEERS[p], "peer", True)
                   for p in peer_ids if p not in cs.LLAMACPP]
    contenders += [cs.built(lambda p=p: cs.llamacpp_peer(p, torch.get_num_threads()), p, cs.PEERS[p], "peer", False,
                            relative_to=cs.LLAMACPP_GREEDY)
                   for p in peer_ids if p in cs.LLAMACPP]
    return contenders


def _plan(contenders: list, chosen: list, repeats: int, done: set) -> list:
    """(question, repeat, contender) still to measure: per question and repeat the baseline first, then
    the others, rotated one place further each time so that no method always holds the same place."""
    others, plan = contenders[1:], []
    for index, (question, repeat) in enumerate((q, r) for q in chosen for r in range(repeats)):
        shift = index % len(others) if others else 0
        for contender in [contenders[0], *others[shift:], *others[:shift]]:
            if (question.id, repeat, contender.id) not in done:
                plan.append((question, repeat, contender))
    return plan


def _shown(path: Path) -> str:
    """A path as recorded in results: relative to the repository when inside it, so result
    files carry no machine-specific location."""
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return path.name


def _arguments(args) -> dict:
    """The command's arguments as recorded in results: paths as `_shown` records them."""
    return {k: _shown(v) if isinstance(v, Path) else v for k, v in sorted(vars(args).items()) if not k.startswith("_")}


def _unit(contender, question, repeat: int, tokenizer, args, stop) -> dict:
    """All turns of one question by one method; each later turn follows the method's own answers."""
    answers, turns = [], []
    for index in range(len(question.turns)):
        prompt = encode_conversation(tokenizer, list(question.turns[: index + 1]), answers)
        seed = unit_seed(args.seed, question.id, repeat, index)
        turn = contender.generate(prompt, args.max_new_tokens, args.temperature, seed, stop)
        answers.append(tokenizer.decode(turn.tokens, skip_special_tokens=True))
        turns.append({"seed": seed, **asdict(turn)})
    return {"question_id": question.id, "category": question.category, "repeat": repeat,
            "method": contender.id, "turns": turns}


def _assemble(checkpoint: Checkpoint, contenders) -> Run:
    header = checkpoint.header
    sessions, samples = [], []
    for item in checkpoint.items:
        if "session" in item:
            sessions.append({**item["session"], "finished": None, "units": 0})
        else:
            if not sessions:  # its session line was lost to corruption: the unit still counts
                sessions.append({"started": checkpoint.header["provenance"]["started"], "git_commit": None,
                                 "git_dirty": None, "finished": None, "units": 0})
            samples.append(item)
            sessions[-1]["units"] += 1
    sessions[-1]["finished"] = now()  # earlier sessions were interrupted: their end is unknown
    if "cost_curve" in header and not sessions[0].get("cost_curve"):
        sessions[0]["cost_curve"] = header["cost_curve"]  # a schema-1 checkpoint: its earliest session timed it
    ids = {c.id for c in contenders}
    run = Run(
        schema_version=SCHEMA_VERSION, config_hash=header["config_hash"], config=header["config"],
        provenance=header["provenance"], sessions=sessions, **curve_fields(sessions),
        methods=[c.record for c in contenders],
        samples=[s for s in samples if s["method"] in ids], summary={},
    )
    run.summary = summarize(run)
    return run


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in Path(name).name.lower()).strip("-") or "model"


def _print_summary(run: Run) -> None:
    if curve_warning(run):
        print(f"warning: {curve_warning(run)}")
    print(f"{'method':26} {'speedup':>8} {'tokens/s ratio':>14} {'accepted':>9}  lossless")
    for method in run.methods:
        summary = run.summary.get(method.id)
        if summary is None:
            print(f"{method.id:26} did not run: {method.error}")
            continue
        overall = summary["overall"]
        faster_than, same_as = references(method)
        print(f"{method.id:26} {overall['speedup']:>7.2f}x {overall['speedup_total']:>13.2f}x "
              f"{overall['mean_accepted'] or 0:>9.2f}  {summary['lossless']['status']}"
              + (f"  (speedup over {faster_than}, {overall['tokens'] / overall['seconds']:.1f} tokens/s; tokens "
                 f"compared with {same_as}'s)" if faster_than != BASELINE else ""))
