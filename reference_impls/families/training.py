"""What training every draft-head family shares (`specatlas train`); each family's own loss,
batches and evaluation are its `fit` in `families/`. Heads learn from the target's own outputs
(self-distillation), as Medusa and EAGLE do; Kangaroo's adapter from the stored exit states and
DistillSpec's drafter (the target's first layers) on-policy.

Data, built once per (target, prompt corpus, answer length) and cached under the user cache dir,
one file per conversation (so an interrupted build resumes, and several processes can share it):
the target answers each prompt greedily (batched `generate`), and the same pass keeps, in
float16, the hidden states every head family reads (the final normed state for Medusa and EAGLE,
three inner layers for EAGLE-3) plus the target's greedy next token at every position. Labels
are those greedy tokens, so every position teaches what the target would decode there. (The
batch is left-padded: its states equal an unpadded forward's up to float32 rounding.)

Training runs in float32 (on CPU bf16 matmuls are far slower) on a schedule in steps; a run is a
function of its config (`Family.train`, `train_loop`): a time budget only stops it early, it
checkpoints every few minutes under a key of the whole config, and a rerun resumes it exactly. The 49k-token LM head dominates a
training step (~4x the cost of an EAGLE layer), so the cross-entropy terms score only the
`LOSS_VOCAB` tokens the target uses most in the training data plus every label of the batch: the
label's logit is exact, only the rarest negatives are left out (a sampled softmax with a fixed,
frequency-ranked sample, FR-Spec's observation applied to training). Held-out conversations give the
acceptance numbers in each model card: how often a top-1 draft chain matches the target's greedy
tokens at each draft position, given the earlier ones matched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.nn import functional as F

from specatlas.fsutil import atomic_write
from specatlas.impls.engine.errors import unpickle_failure
from specatlas.impls.families.blocks import eagle3_layers
from specatlas.impls.engine.models import cache_root, encode_chat, eos_ids


def data_dir(model_name: str, prompts: list[str], max_new_tokens: int) -> Path:
    key = hashlib.sha256(json.dumps([prompts, max_new_tokens]).encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_name)
    return cache_root() / "train" / safe / key


def stored_layers(model) -> tuple[int, ...]:
    """Hidden states kept for every family: EAGLE-3's three and the final normed state."""
    layers = model.config.num_hidden_layers
    return tuple(sorted({*eagle3_layers(layers), layers}))


@torch.inference_mode()
def generate(loaded, prompts: list[str], folder: Path, max_new_tokens: int, batch_size: int, progress=None,
             worker: tuple[int, int] = (0, 1), ids: list[int] | None = None) -> None:
    """Answer the prompts `ids` (default all; of those, the ones with id % workers == index for
    `worker`) and store, per conversation, {prompt, response, hidden: {layer: [T, H] float16},
    greedy: [T]} as <id>.pt. The last answer token is dropped from `response`: no forward ever
    reads it, so it has no state."""
    model, tokenizer = loaded.model, loaded.tokenizer
    folder.mkdir(parents=True, exist_ok=True)
    index, workers = worker
    mine = [i for i in (range(len(prompts)) if ids is None else ids) if i % workers == index]
    todo = sorted((i for i in mine if not (folder / f"{i:05d}.pt").exists()), key=lambda i: len(prompts[i]))
    layers, stop = stored_layers(model), eos_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    bar = progress(total=len(mine), initial=len(mine) - len(todo), desc="answers", unit="prompt") if progress else None
    for first in range(0, len(todo), batch_size):
        ids = todo[first : first + batch_size]
        encoded = [encode_chat(tokenizer, prompts[i]) for i in ids]
        width = max(map(len, encoded))
        # Left padding, so every answer starts at the same column.
        batch = torch.tensor([[pad] * (width - len(p)) + p for p in encoded], device=model.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in encoded], device=model.device)
        out = model.generate(input_ids=batch, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=pad, output_hidden_states=True, return_dict_in_generate=True)
        # out.hidden_states[s][layer]: step 0 covers the prompt columns, step s >= 1 the column width + s - 1.
        states = {layer: torch.cat([step[layer] for step in out.hidden_states], 1) for layer in layers}
        for row, (i, prompt) in enumerate(zip(ids, encoded)):
            answer = out.sequences[row, width:].tolist()
            end = next((j + 1 for j, token in enumerate(answer) if token in stop), len(answer))
            kept = len(prompt) + end - 1  # positions with a hidden state
            columns = slice(width - len(prompt), width - len(prompt) + kept)
            hidden = {layer: states[layer][row, columns].to(torch.float16).cpu() for layer in layers}
            greedy = torch.tensor(answer[:end])  # after position t >= len(prompt) - 1: the next answer token
            head = F.linear(states[layers[-1]][row, columns][: len(prompt) - 1], model.lm_head.weight).argmax(-1).cpu()
            record = {"prompt": prompt, "response": answer[: end - 1], "hidden": hidden,
                      "greedy": torch.cat([head, greedy]).long()}
            atomic_save(record, folder / f"{i:05d}.pt")  # complete files only, whoever else writes the cache
        if bar:
            bar.update(len(ids))
    if bar:
        bar.close()


@dataclass
class Features:
    """Every conversation's tokens, hidden states and the target's greedy next tokens."""

    tokens: list[torch.Tensor]  # [T] int64 per conversation
    prompt_lengths: list[int]
    hidden: dict[int, list[torch.Tensor]]  # layer -> [T, H] float16 per conversation
    greedy: list[torch.Tensor]  # [T]: the target's argmax after each position


def shortest(prompts: list[str], count: int | None) -> list[int]:
    """Ids of the `count` shortest prompts (all when None): a smaller corpus for a smaller budget."""
    order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
    return sorted(order[:count] if count else order)


class DataError(Exception):
    """The cached training data cannot be used; the message is one line naming the file."""


def read_data(folder: Path, ids: list[int], layers: tuple[int, ...]) -> Features:
    missing = [i for i in ids if not (folder / f"{i:05d}.pt").exists()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} of {len(ids)} conversations are not generated yet in {folder}")
    features = Features([], [], {layer: [] for layer in layers}, [])
    for i in ids:
        record = read_conversation(folder / f"{i:05d}.pt", layers)
        features.tokens.append(torch.tensor(record["prompt"] + record["response"]))
        features.prompt_lengths.append(len(record["prompt"]))
        for layer in features.hidden:  # once each, though a small target's EAGLE-3 layers may repeat
            features.hidden[layer].append(record["hidden"][layer])
        features.greedy.append(record["greedy"])
    return features


def read_conversation(path: Path, layers: tuple[int, ...]) -> dict:
    """One conversation as generate() stored it, read without running anything (weights_only)."""
    try:
        record = torch.load(path, map_location="cpu", weights_only=True)
        if not (isinstance(record["prompt"], list) and isinstance(record["response"], list)
                and all(isinstance(record["hidden"][layer], torch.Tensor) for layer in layers)
                and isinstance(record["greedy"], torch.Tensor)):
            raise ValueError("not a conversation generate() wrote")
    except Exception as exc:  # noqa: BLE001 - unpickling refused, truncated, wrong layout...
        raise DataError(f"cached training data {path} cannot be used ({unpickle_failure(exc)}); delete it and run again "
                        "to generate it anew") from None
    return record


def frequency_ranked(features: Features, conversations: list[int], vocab_size: int) -> torch.Tensor:
    """Target token ids by how often the target's greedy choice is that token in these
    conversations' answers, most frequent first (ties by id); tokens never chosen are left out."""
    answers = torch.cat([features.greedy[c][features.prompt_lengths[c] - 1 :] for c in conversations])
    counts = torch.bincount(answers, minlength=vocab_size)
    return torch.argsort(-counts, stable=True)[: int((counts > 0).sum())]


# Tokens every cross-entropy term scores (besides the batch's labels): see the module doc.
LOSS_VOCAB = 8192


class LossVocabulary:
    """Cross-entropy over the target's LM head restricted to `frequent` token ids plus the labels."""

    def __init__(self, frequent: torch.Tensor, lm_weight: torch.Tensor):
        self.frequent, self.lm_weight = frequent, lm_weight
        self.member = torch.zeros(lm_weight.shape[0], dtype=torch.bool)
        self.member[frequent] = True

    def cross_entropy(self, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of features [N, H] against labels [N] (-100: ignored)."""
        valid = labels != -100
        features, labels = features[valid], labels[valid]
        extra = labels[~self.member[labels]].unique()
        ids = torch.cat([self.frequent, extra])
        local = torch.empty(self.lm_weight.shape[0], dtype=torch.long)
        local[ids] = torch.arange(len(ids))
        return F.cross_entropy(F.linear(features, self.lm_weight[ids]), local[labels])


def loss_vocabulary(features: Features, conversations: list[int], lm_weight: torch.Tensor) -> LossVocabulary:
    return LossVocabulary(frequency_ranked(features, conversations, lm_weight.shape[0])[:LOSS_VOCAB], lm_weight)


def split(count: int, held_out: float = 0.1, seed: int = 0) -> tuple[list[int], list[int]]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    cut = max(1, int(count * held_out))
    return sorted(order[cut:]), sorted(order[:cut])


def shared_prompt_prefix(features: Features) -> int:
    """Length of the prefix every prompt shares (the chat template's system turn): not worth training on."""
    sequences = [tokens[:length].tolist() for tokens, length in zip(features.tokens, features.prompt_lengths)]
    first, length = sequences[0], len(sequences[0])
    for other in sequences[1:]:
        length = next((i for i, (a, b) in enumerate(zip(first[:length], other)) if a != b), min(length, len(other)))
    return length


# --------------------------------------------------------------------------------------------
# Training loop shared by the head families


@dataclass
class Progress:
    step: int = 0
    planned: int = 0  # the schedule's length in steps
    stopped_by: str = ""  # "steps" (the schedule ran out) or "budget" (the time budget stopped it first)
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)  # mean loss per logged interval
    running: list[float] = field(default_factory=list)  # losses of the interval in progress


def resume(checkpoint: Path, module, optimizer) -> Progress:
    """The progress saved in `checkpoint` with the module's and optimizer's states restored; a fresh
    start when there is none or it cannot be used (said in one line, and replaced at the next save)."""
    if not checkpoint.exists():
        return Progress()
    try:
        saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
        progress = Progress(**saved["progress"])
        module.load_state_dict(saved["module"])
        optimizer.load_state_dict(saved["optimizer"])
        return progress
    except Exception as exc:  # noqa: BLE001 - unpickling refused, truncated, another version's layout...
        print(f"specatlas train: ignoring the training checkpoint {checkpoint} ({unpickle_failure(exc)}); "
              "training from the start", file=sys.stderr)
        return Progress()


def atomic_save(obj, path: Path) -> None:
    """torch.save to `path` through fsutil.atomic_write: a kill never leaves a torn checkpoint."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write(path, buffer.getvalue())


def step_seed(seed: int, step: int) -> int:
    """The seed of step `step`'s randomness: a function of (run seed, step) only, so a resumed run
    draws exactly what an uninterrupted one would, with no generator state to save."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{step}".encode()).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class Run:
    """One training run: its seed, schedule length, resume checkpoint and the whole resolved config."""

    family: str
    seed: int
    steps: int
    checkpoint: Path
    config: dict


clock = time.monotonic  # what the budget is measured with (a test stops a run at a chosen step)


def train_loop(module, optimizer, batches, loss_fn, run: Run, budget_minutes: float, progress=None,
               warmup: int = 30, log_every: int = 20) -> Progress:
    """Minimise `loss_fn(batches(step, generator))` for `run.steps` steps: the learning rate warms
    up over `warmup` steps, then follows a cosine to zero at the last step. Everything random in a
    step comes from `generator` (and torch's global RNG, for code that draws from it) seeded by
    (seed, step), so the run is a function of its config. The time budget only stops the run early
    (`stopped_by`); (module, optimizer, progress) are saved to `run.checkpoint` every few minutes
    and at the end, and a later call resumes from them as if never stopped."""
    checkpoint, max_steps, seed = run.checkpoint, run.steps, run.seed
    state = resume(checkpoint, module, optimizer)
    state.planned = max_steps
    budget = budget_minutes * 60
    peak = [group.setdefault("initial_lr", group["lr"]) for group in optimizer.param_groups]
    bar = progress(total=max_steps, initial=state.step, desc="training", unit="step") if progress else None
    started, last_save = clock() - state.seconds, clock()

    def save():
        state.seconds = clock() - started
        # Tensors, numbers and strings only (Progress as a dict), so that resume() can read it
        # with weights_only=True: the cache is a file anyone may have placed, never code to run.
        atomic_save({"module": module.state_dict(), "optimizer": optimizer.state_dict(),
                     "progress": dataclasses.asdict(state)}, checkpoint)

    module.train()
    while state.step < max_steps and clock() - started < budget:
        factor = min(1.0, (state.step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * state.step / max_steps))
        for group, lr in zip(optimizer.param_groups, peak):
            group["lr"] = lr * factor
        torch.manual_seed(step_seed(seed, state.step))
        loss = loss_fn(batches(state.step, torch.Generator().manual_seed(step_seed(seed, state.step))))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 0.5)
        optimizer.step()
        state.step += 1
        state.running.append(loss.item())
        if len(state.running) == log_every or state.step == max_steps:
            state.losses.append(sum(state.running) / len(state.running))
            state.running = []
            if bar:
                bar.set_postfix(loss=f"{state.losses[-1]:.3f}")
        if bar:
            bar.update(1)
        if clock() - last_save > 180:
            save()
            last_save = clock()
    state.stopped_by = "steps" if state.step >= max_steps else "budget"
    if bar:
        bar.close()
    module.eval()
    save()
    return state


# --------------------------------------------------------------------------------------------
# Helpers of the families' `fit` and `evaluate`


def acceptance_summary(accepted: list[int], depth: int) -> dict:
    """From the accepted draft length at each position: acceptance by draft position (given the
    earlier ones were accepted, as the decoding stats report it) and mean accepted tokens per step
    of a top-1 chain of `depth` drafts (the target's own token included)."""
    counts = torch.tensor(accepted)
    by_position = [float((counts > k).sum() / max(1, int((counts >= k).sum()))) for k in range(depth)]
    return {"acceptance_by_position": [round(x, 4) for x in by_position],
            "mean_accepted_tokens_chain": round(1 + float(counts.float().mean()), 3), "positions": len(accepted)}


def finish(family, run: Run, module, loaded, features, train_ids, test_ids, state, accuracy, output, command, extra,
           notes: dict | None = None) -> str:
    """Save `module` as `family` (a `families.Family`) with its model card; `notes` adds to the card
    (what it was trained on)."""
    tokens = sum(len(features.tokens[c]) for c in train_ids)
    answer_tokens = sum(len(features.tokens[c]) - features.prompt_lengths[c] for c in train_ids)
    card = {"family": family.name, "base_model": loaded.name, "train_conversations": len(train_ids),
            "train_tokens": tokens, "train_answer_tokens": answer_tokens, "held_out_conversations": len(test_ids),
            "steps": state.step, "planned_steps": state.planned, "stopped_by": state.stopped_by, "config": run.config,
            "train_seconds": round(state.seconds), "final_loss": round(state.losses[-1], 4) if state.losses else None, "loss_curve": [round(x, 4) for x in state.losses[:: max(1, len(state.losses) // 20)]],
            "held_out": accuracy, "command": command, "torch": torch.__version__} | (notes or {})
    family.save(module, output, loaded.model, loaded.name, extra, card)
    return f"{state.step} steps in {state.seconds / 60:.1f} min, loss {card['final_loss']}, " \
           f"held-out mean accepted tokens (top-1 chain) {accuracy['mean_accepted_tokens_chain']}"


def run_lengths(hits: torch.Tensor, first: int, depth: int) -> list[int]:
    """`hits[t]`: the drafter's top-1 after position t is the target's greedy token there, with
    the greedy text as context. On the target's greedy answer that is exactly what a top-1 chain
    sees while its drafts are accepted, so the chain started at t keeps the run of hits from t.
    Per start t >= `first` with `depth` positions after it: how many drafts are accepted."""
    if len(hits) < depth:
        return []
    return hits.unfold(0, depth, 1)[first:].int().cumprod(1).sum(1).tolist()


def padded(rows: list[torch.Tensor], value=0) -> torch.Tensor:
    """Right-padded [B, max length, ...] batch of per-conversation tensors."""
    out = rows[0].new_full((len(rows), max(map(len, rows)), *rows[0].shape[1:]), value)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
