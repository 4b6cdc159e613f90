"""What training every draft-head family shares (`specatlas train`); each family's own loss,
batches and evaluation are its `fit` in `families/`. Heads learn from the target's own outputs
(self-distillation), as Medusa and EAGLE do; Kangaroo's adapter from the stored exit states and
DistillSpec's drafter (the target's first layers) on-policy.

Data: the target's own greedy answers to the prompt pool, kept as token ids in shards
(`specatlas train-data`, `answers`); `features` runs the target once over each conversation and
caches, per shard, in float16, the hidden states a family reads (the final normed state for Medusa
and EAGLE, three inner layers for EAGLE-3) plus the target's greedy next token at every position.
Labels are those greedy tokens, so every position teaches what the target would decode there.

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

import contextlib
import dataclasses
import hashlib
import io
import itertools
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.nn import functional as F

from specatlas.fsutil import atomic_write, exclusive
from specatlas.impls.engine.head_folders import keep_better
from specatlas.impls.engine.errors import unpickle_failure
from specatlas.impls.engine.models import cache_root
from specatlas.impls.engine.weight_storage import stored


@dataclass
class Features:
    """Every conversation's tokens, hidden states and the target's greedy next tokens."""

    tokens: list[torch.Tensor]  # [T] int64 per conversation
    prompt_lengths: list[int]
    hidden: dict[int, list[torch.Tensor]]  # layer -> [T, H] float16 per conversation
    greedy: list[torch.Tensor]  # [T]: the target's argmax after each position
    source: str = ""  # what the conversations are, for the model card
    held_out: list[int] | None = None  # conversations never trained on, evaluated on (else `split` draws them)


class DataError(Exception):
    """The training data cannot be used; the message is one line naming the file."""


def features_folder(model_name: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_name)
    # "-v2": states captured by `states_of`; the folders before it may hold states of the wrong
    # layer, and checkpoints trained on them (keyed by config and data, not by how states were taken).
    return cache_root() / "train-features" / f"{safe}-v2"


def training_lock(model_name: str):
    """The lock a training job on `model_name` holds (fsutil.exclusive): the target's cached states
    and the training checkpoints in `features_folder` are one job's at a time."""
    folder = features_folder(model_name)
    return exclusive(folder.with_name(folder.name + ".lock"), f"another specatlas training job on {model_name}")


@torch.no_grad()  # not inference_mode: these tensors are training inputs
def features(loaded, shards: list[tuple[str, list]], layers: tuple[int, ...] | None, folder: Path, progress=None,
             batch_tokens: int = 4096) -> Features:
    """The target's states at `layers` and greedy tokens for the conversations of `shards`
    ((content hash, [answers.Conversation]) pairs, prompts filled in), computed by one forward
    over each conversation's tokens and cached in `folder` per shard and layer (with the greedy
    tokens in each file): a kill loses at most the shard in progress, and a family reading another
    layer than the ones cached computes only that layer, through the first layers alone when the
    greedy tokens are cached already (Kangaroo's exit after layer 2: a tenth of a full forward), and
    one reading no layer (FR-Spec) takes the greedy tokens from any layer's file without a forward.
    Each conversation's last answer token is dropped: no position after it is trained on."""
    from safetensors.torch import save

    folder.mkdir(parents=True, exist_ok=True)  # the training checkpoints' folder too
    if layers is None:
        return _data_only(shards)
    model, layers = loaded.model, tuple(sorted(set(layers)))
    out = Features([], [], {layer: [] for layer in layers}, [])
    bar = progress(total=len(shards), desc="target states", unit="shard") if progress else None
    for key, conversations in shards:
        tokens = [torch.tensor(c.prompt + c.answer[:-1]) for c in conversations]
        paths = {layer: folder / f"{key[:16]}-{layer}.safetensors" for layer in layers or ("greedy",)}
        stored, count = {}, sum(map(len, tokens))
        for layer, path in paths.items():
            stored |= _cached(path, count, () if layer == "greedy" else (layer,), model.config) or {}
        if not layers:  # FR-Spec reads no layer: any layer's file holds the greedy tokens too
            for path in sorted(set(folder.glob(f"{key[:16]}-*.safetensors")) - set(paths.values())):
                if "greedy" in stored:
                    break
                stored |= _cached(path, count, (), model.config) or {}
        missing = tuple(layer for layer in layers if f"hidden.{layer}" not in stored)
        if missing or "greedy" not in stored:
            stored |= _forward_states(model, tokens, missing, batch_tokens, stored.get("greedy"))
            for layer in missing or ("greedy",):
                cache_write(paths[layer], save({name: stored[name] for name in ("greedy", f"hidden.{layer}") if name in stored}))
        bounds = [0, *itertools.accumulate(map(len, tokens))]
        for i, (c, row) in enumerate(zip(conversations, tokens)):
            span = slice(bounds[i], bounds[i + 1])
            out.tokens.append(row)
            out.prompt_lengths.append(len(c.prompt))
            out.greedy.append(stored["greedy"][span])
            for layer in layers:
                out.hidden[layer].append(stored[f"hidden.{layer}"][span])
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return out


def _data_only(shards: list[tuple[str, list]]) -> Features:
    """`features` of a family that reads no target state (`Family.layers` None: PARD's drafter is
    target-independent): no forward. Its `greedy` is each position's next token in the data, which
    on the answers is the target's greedy choice: the data is the target's greedy answers."""
    out = Features([], [], {}, [])
    for _, conversations in shards:
        for c in conversations:
            text = torch.tensor(c.prompt + c.answer)
            out.tokens.append(text[:-1])
            out.prompt_lengths.append(len(c.prompt))
            out.greedy.append(text[1:])
    return out


def _cached(path: Path, count: int, layers: tuple[int, ...], config) -> dict | None:
    """The greedy tokens and the states at `layers` cached in `path` (only those are read) when they
    are what `_forward_states` writes for this shard and target; None (and a line saying why, when
    the file is there) otherwise."""
    from safetensors import safe_open

    try:
        if path.exists() and not path.is_file():  # a folder or a pipe: never opened, replaced
            raise ValueError("it is not a regular file")
        stored = None
        if path.exists():
            with safe_open(path, "pt") as f:
                stored = {name: f.get_tensor(name) for name in ("greedy", *(f"hidden.{layer}" for layer in layers))
                          if name in f.keys()}
        problem = stored and _states_problem(stored, count, layers, config)
        if problem:
            raise ValueError(problem)
        return stored
    except Exception as exc:  # noqa: BLE001 - truncated, foreign or stale file: computed again
        print(f"specatlas train: recomputing {path} ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def _states_problem(stored: dict, count: int, layers: tuple[int, ...], config) -> str | None:
    """Why a cached shard's states are not what `_forward_states` writes for this target (greedy
    ids inside its vocabulary, finite float16 states of its width, one row per token), or None."""
    greedy = stored.get("greedy")
    if greedy is None or greedy.dtype != torch.int64 or greedy.shape != (count,):
        return "its greedy tokens do not match its shard"
    if count and not (0 <= int(greedy.min()) and int(greedy.max()) < config.vocab_size):
        return "its greedy tokens lie outside the target's vocabulary"
    for layer in layers:
        hidden = stored.get(f"hidden.{layer}")
        if hidden is None or hidden.dtype != torch.float16 or hidden.shape != (count, config.hidden_size):
            return f"its hidden.{layer} states do not match its shard and the target"
        if not torch.isfinite(hidden).all():
            return f"its hidden.{layer} states hold NaN or infinite values"
    return None


@contextlib.contextmanager
def states_of(model, layers: tuple[int, ...]):
    """{hidden-state index: [B, T, H]} filled by the forwards run inside, through the target's
    modules: index h is the output of decoder layer h - 1 (0: the embeddings; num_hidden_layers:
    the final norm's output), the numbering of transformers' `hidden_states`. Not
    `output_hidden_states` itself: transformers 5 installs its capturing hooks on the decoder layers
    once per model object, and a slice shares the target's layers, so after a second object has
    captured, every layer reports twice and each index past 1 names an earlier layer's state."""
    inner, states = model.model, {}

    def module(layer: int):
        return inner.embed_tokens if layer == 0 else inner.norm if layer == model.config.num_hidden_layers \
            else inner.layers[layer - 1]

    handles = [module(layer).register_forward_hook(lambda _, args, output, layer=layer: states.__setitem__(layer, output))
               for layer in layers]
    try:
        yield states
    finally:
        for handle in handles:
            handle.remove()


def _forward_states(model, tokens: list[torch.Tensor], layers: tuple[int, ...], batch_tokens: int,
                    greedy: torch.Tensor | None = None) -> dict:
    """{hidden.<layer>: [N, H] float16, greedy: [N]} over the concatenated conversations, from
    right-padded batches of similar lengths (a causal mask makes right padding invisible). With the
    `greedy` tokens known and every layer below the last, only the layers up to the deepest one run."""
    from specatlas.impls.engine.models import shallow_slice

    shallow = greedy is not None and bool(layers) and max(layers) + 1 < model.config.num_hidden_layers
    # hidden_states[h] of a slice of h + 1 layers is the state after h layers, before the final norm
    forward = shallow_slice(model, max(layers) + 1).model if shallow else model
    order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
    hidden = {layer: [None] * len(tokens) for layer in layers}
    computed = [None] * len(tokens)
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (end - start + 1) * len(tokens[order[end]]) <= batch_tokens:
            end += 1
        batch = [order[i] for i in range(start, end)]
        width = max(len(tokens[i]) for i in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for row, i in enumerate(batch):
            ids[row, : len(tokens[i])], mask[row, : len(tokens[i])] = tokens[i], 1
        with states_of(model, layers) as states:
            result = forward(input_ids=ids.to(model.device), attention_mask=mask.to(model.device))
        for row, i in enumerate(batch):
            length = len(tokens[i])
            if not shallow:
                computed[i] = result.logits[row, :length].argmax(-1).cpu()
            for layer in layers:
                hidden[layer][i] = states[layer][row, :length].to(torch.float16).cpu()
        start = end
    return {"greedy": greedy if shallow else torch.cat(computed)} | \
        {f"hidden.{layer}": torch.cat(hidden[layer]) for layer in layers}


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


def draft_tokens(features: Features, conversations: list[int], vocab_size: int, size: int):
    """A draft vocabulary (EAGLE-3's, ReDrafter's): the `size` target tokens the answers of
    `conversations` choose most, in id order, and the map from target id to draft id (-100: not draftable)."""
    used = frequency_ranked(features, conversations, vocab_size)[:size].sort().values
    draft_id = torch.full((vocab_size,), -100, dtype=torch.long)
    draft_id[used] = torch.arange(len(used))
    return used, draft_id


def coverage(features: Features, conversations: list[int], ids) -> float:
    """The share of the answer tokens of `conversations` (the target's greedy choices) among `ids`."""
    held = torch.cat([features.greedy[c][features.prompt_lengths[c] - 1 :] for c in conversations])
    return float(torch.isin(held, torch.as_tensor(ids)).float().mean())


def loss_vocabulary(features: Features, conversations: list[int], lm_weight: torch.Tensor) -> LossVocabulary:
    return LossVocabulary(frequency_ranked(features, conversations, lm_weight.shape[0])[:LOSS_VOCAB], lm_weight)


def split(features: Features, seed: int = 0, held_out: float = 0.1) -> tuple[list[int], list[int]]:
    """(train, held-out) conversation indices: the conversations the data holds out when it names
    them (`features.held_out`: the same ones whatever the training data's size, so runs on more
    data are compared on the same text), else a seeded `held_out` fraction."""
    count = len(features.tokens)
    if features.held_out is not None:
        test = set(features.held_out)
        return [i for i in range(count) if i not in test], sorted(test)
    order = list(range(count))
    random.Random(seed).shuffle(order)
    cut = max(1, int(count * held_out))
    return sorted(order[cut:]), sorted(order[:cut])


def positions_after(features: Features, conversations: list[int], start: int) -> int:
    """How many positions of `conversations` lie at or after `start`: the rows a row-batched head
    (Medusa, Hydra, ReDrafter) draws its batches from."""
    return sum(max(0, len(features.tokens[c]) - start) for c in conversations)


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
    stopped_by: str = ""  # "steps" (the schedule ran out), "budget" (the time budget stopped it first) or "stop" (`Run.stop`)
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)  # mean loss per logged interval
    running: list[float] = field(default_factory=list)  # losses of the interval in progress


def resume(checkpoint: Path, module, optimizer, planned: int | None = None) -> Progress:
    """The progress saved in `checkpoint` with the module's and optimizer's states restored; a fresh
    start when there is none or it cannot be used (said in one line, and replaced at the next save).
    `planned`: the run's schedule, which a saved step count may not exceed."""
    if not checkpoint.exists() and not checkpoint.is_symlink():
        return Progress()
    try:
        if not checkpoint.is_file():  # a folder, a pipe, a dangling link: never opened
            raise ValueError("not a regular file")
        saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
        progress = _progress(saved["progress"], planned)
        state = saved["module"]
        expected = module.state_dict()
        bad = next((key for key, value in state.items() if key in expected and not (
            isinstance(value, torch.Tensor) and value.dtype == expected[key].dtype
            and (not value.is_floating_point() or torch.isfinite(value).all()))), None)
        if bad:
            raise ValueError(f"{bad} is not finite {expected[bad].dtype}")
        module.load_state_dict(state)
        optimizer.load_state_dict(saved["optimizer"])
        return progress
    except Exception as exc:  # noqa: BLE001 - unpickling refused, truncated, another version's layout...
        print(f"specatlas train: ignoring the training checkpoint {checkpoint} ({unpickle_failure(exc)}); "
              "training from the start", file=sys.stderr)
        return Progress()


def _progress(saved: object, planned: int | None) -> Progress:
    """Progress from a checkpoint's plain data, every field of the type and range a run writes."""
    progress = Progress(**saved)  # TypeError on a missing or foreign field
    whole = lambda v: type(v) is int and v >= 0  # noqa: E731
    finite = lambda v: type(v) is float and math.isfinite(v) and v >= 0  # noqa: E731
    if not (whole(progress.step) and whole(progress.planned) and progress.step <= (planned or progress.step)
            and progress.stopped_by in ("", "steps", "budget", "stop") and finite(progress.seconds)
            and all(type(x) is float and math.isfinite(x) for x in [*progress.losses, *progress.running])):
        raise ValueError(f"its progress is not a run's ({str(saved)[:80]})")
    return progress


def atomic_save(obj, path: Path) -> None:
    """torch.save to `path` through `cache_write`: a kill never leaves a torn checkpoint."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    cache_write(path, buffer.getvalue())


def cache_write(path: Path, data: bytes) -> None:
    """fsutil.atomic_write into the cache; a folder found where the file goes is set aside
    (renamed, never deleted: it is not the cache's to delete), so the entry heals instead of
    failing every later run."""
    if path.is_dir() and not path.is_symlink():
        path.rename(path.with_name(f".{path.name}-damaged-{time.time_ns()}"))
    atomic_write(path, data)


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
    # (draft model, what it is) for a family that trains on a draft model's states (SpecDec++):
    # given by the caller, since the default draft model is itself a family's head.
    draft_model: tuple | None = None
    # End at this step of the schedule (`--stop-at`): what a budget-stopped run reached, so its
    # weights are made again exactly (the cosine schedule is the planned one's). Not in `config`:
    # the stopped run is a prefix of the whole one and shares its resume checkpoint.
    stop: int | None = None
    # The checkout the run's code came from, {"commit", "dirty"} (`bench.provenance.git_state`, taken
    # by the caller when the command started), for the model card. Not in `config`: a commit that
    # leaves the training code's files (`base._training_code`) unchanged resumes, and the card names
    # the commit of the command that finished the run.
    code: dict | None = None
    # Write over a shipped head even when its card's held-out acceptance is as good (`--replace-anyway`).
    replace_anyway: bool = False


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
    end = min(run.stop or max_steps, max_steps)
    state = resume(checkpoint, module, optimizer, end)  # a checkpoint past the stop is not this run's
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
    while state.step < end and clock() - started < budget:
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
    state.stopped_by = "steps" if state.step >= max_steps else "stop" if state.step >= end else "budget"
    if bar:
        bar.close()
    module.eval()
    save()  # full precision: a longer schedule resumes from it
    stored(module)  # what is evaluated next is what ships
    return state


# --------------------------------------------------------------------------------------------
# Shared by the families' `fit` and `evaluate`


def acceptance_summary(accepted: list[int], depth: int) -> dict:
    """From the accepted draft length at each position: acceptance by draft position (given the
    earlier ones were accepted, as the decoding stats report it) and mean accepted tokens per step
    of a top-1 chain of `depth` drafts (the target's own token included)."""
    counts = torch.tensor(accepted)
    by_position = [float((counts > k).sum() / max(1, int((counts >= k).sum()))) for k in range(depth)]
    return {"acceptance_by_position": [round(x, 4) for x in by_position],
            "mean_accepted_tokens_chain": round(1 + float(counts.float().mean()), 3), "positions": len(accepted)}


def outside_share(drafts: list[torch.Tensor], vocabulary: LossVocabulary) -> dict:
    """For heads that draft by argmax over the whole vocabulary but learn on `vocabulary` (Medusa,
    Hydra): the share of their top-1 drafts ([positions, heads] per conversation) that fall outside
    it, by draft position: tokens the loss never scored, so nothing taught the head against them."""
    rows = torch.cat(drafts) if drafts else torch.zeros(0, 0, dtype=torch.long)
    outside = (~vocabulary.member[rows]).float().mean(0) if len(rows) else None  # no held-out row: nothing to say
    return {"drafts_outside_loss_vocabulary_by_position": None if outside is None else [round(float(x), 4) for x in outside]}


def top1_chain(drafted, depth: int, vocabulary: LossVocabulary) -> dict:
    """`acceptance_summary` and `outside_share` of heads that draft `depth` tokens at once (Medusa,
    Hydra): `drafted` yields, per held-out conversation, their top-1 drafts and the target's tokens
    ([positions, depth] each, labels -100 past the answer); only positions with every label count."""
    accepted, drafts = [], []
    for top, labels in drafted:
        full = (labels != -100).all(1)
        accepted += (top == labels)[full].int().cumprod(1).sum(1).tolist()
        drafts.append(top[full])
    return acceptance_summary(accepted, depth) | outside_share(drafts, vocabulary)


def finish(family, run: Run, module, loaded, features, train_ids, test_ids, state, accuracy, output, command, extra,
           notes: dict | None = None) -> str:
    """Save `module` as `family` (a `families.Family`) with its model card; `notes` adds to the card
    (what it was trained on)."""
    tokens = sum(len(features.tokens[c]) for c in train_ids)
    answer_tokens = sum(len(features.tokens[c]) - features.prompt_lengths[c] for c in train_ids)
    card = {"family": family.name, "base_model": loaded.name, "train_conversations": len(train_ids),
            "train_tokens": tokens, "train_answer_tokens": answer_tokens, "held_out_conversations": len(test_ids),
            "steps": state.step, "planned_steps": state.planned, "stopped_by": state.stopped_by, "config": run.config,
            "epochs_seen": epochs_seen(family, features, train_ids, state.step),
            "train_seconds": round(state.seconds), "final_loss": round(state.losses[-1], 4) if state.losses else None, "loss_curve": [round(x, 4) for x in state.losses[:: max(1, len(state.losses) // 20)]],
            "held_out": accuracy, "command": reproducing(command, state, run.config.get("epochs")), "torch": torch.__version__,
            "data_source": features.source} | ({"code": run.code} if run.code else {}) | (notes or {})
    if not run.replace_anyway:
        keep_better(family.name, Path(output), accuracy)
    family.save(module, output, loaded.model, loaded.name, extra, card)
    return f"{state.step} steps in {state.seconds / 60:.1f} min, loss {card['final_loss']}, " \
           f"held-out mean accepted tokens (top-1 chain) {accuracy['mean_accepted_tokens_chain']}"


def epochs_seen(family, features: Features, train_ids: list[int], steps: int) -> dict:
    """How much of its data a run of `steps` steps drew (`Family.epoch`): each step draws its
    examples at random, so an epoch is as many draws as the data holds, not a pass over each once."""
    examples, per_step, unit = family.epoch(features, train_ids)
    return {"epochs": round(steps * per_step / max(1, examples), 3), "unit": unit, "per_epoch": examples,
            "per_step": per_step}


def reproducing(command: str, state: Progress, epochs: float | None = None) -> str:
    """The command that makes these weights again: `command` (`specatlas train` with its data, seed
    and model, no schedule or budget) plus the schedule as it was given, `--epochs` (which the same
    data resolves to the same steps) or `--steps` planned, and `--stop-at` the step reached when the
    run ended early. A budget stop depends on the machine; the stop step does not, and `--steps`
    alone would anneal the cosine to zero at another step."""
    stop = f" --stop-at {state.step}" if state.step < state.planned else ""
    schedule = f"--epochs {epochs}" if epochs is not None else f"--steps {state.planned}"
    return f"{command} {schedule}{stop}"


def teacher_forced(features: Features, conversations: list[int], start: int, layer: int, depth: int):
    """The rows of a head that drafts `depth` tokens, each after the ones before it (Hydra,
    ReDrafter): per position t >= start, the target's state at `layer`, the tokens t+1 .. t+depth
    (draft k reads the first k + 1, teacher-forced from the conversation) and draft k's label, the
    target's greedy token after t + k + 1 (-100 past the end)."""
    rows, inputs, labels = [], [], []
    for c in conversations:
        tokens, greedy, length = features.tokens[c], features.greedy[c], len(features.tokens[c])
        rows.append(features.hidden[layer][c][start:])
        ahead = torch.arange(start, length)[:, None] + torch.arange(1, depth + 1)  # [rows, depth]: t + k + 1
        inside = ahead < length
        inputs.append(torch.where(inside, tokens[ahead.clamp(max=length - 1)], 0))
        labels.append(torch.where(inside, greedy[ahead.clamp(max=length - 1)], -100))
    return torch.cat(rows), torch.cat(inputs), torch.cat(labels)


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
