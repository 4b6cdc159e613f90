"""Training draft heads on the target's own outputs (self-distillation), as Medusa and EAGLE do; also
Kangaroo's adapter (on the stored exit states) and DistillSpec's drafter (the target's first layers,
distilled on-policy: `DistillFamily`).

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
from specatlas.impls import checkpoints
from specatlas.impls.distilled import DraftLayers
from specatlas.impls.errors import unpickle_failure
from specatlas.impls.heads import (Eagle3Head, EagleHead, HeadCache, HydraHeads, KangarooAdapter, LayerConfig, MedusaHeads,
                                   StepCache, VocabularyHead, eagle3_layers)
from specatlas.impls.methods_heads import FR_SPEC_FRACTION
from specatlas.impls.models import EMBEDDED, cache_root, encode_chat, eos_ids


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
            torch.save(record, folder / f".{i:05d}.tmp")
            (folder / f".{i:05d}.tmp").rename(folder / f"{i:05d}.pt")  # complete files only
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
# Head families


class Family:
    name = ""
    folder = ""  # the shipped folder's family when it is another's (FR-Spec writes beside the EAGLE head)
    default_steps = 0

    def layers(self, model) -> tuple[int, ...]:
        """Indices into the target's `hidden_states` the head reads (N: the final normed state)."""
        return (model.config.num_hidden_layers,)

    def train(self, loaded, features, folder, output, budget_minutes, steps, seed, command, progress) -> str:
        """Train on `features` (cached in `folder`) and save to `output`. The run is a function of
        its config: the seed fixes the initial weights here and every step's draws in `train_loop`,
        and its resume checkpoint is keyed by the whole config, so a changed seed, schedule, setting
        or data never resumes another run."""
        data = hashlib.sha256()
        for tokens in features.tokens:
            data.update(tokens.numpy().astype("int64").tobytes() + b"|")
        steps = steps or self.default_steps
        config = {"family": self.name, "settings": self.settings(), "steps": steps, "seed": seed,
                  "data": {"conversations": len(features.tokens), "sha256": data.hexdigest()}}
        key = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
        torch.manual_seed(seed)
        run = Run(self.name, seed, steps, folder / f"{self.name}-{key}.ckpt", config)
        return self.fit(loaded, features, run, output, budget_minutes, command, progress)

    def fit(self, loaded, features, run: Run, output, budget_minutes, command, progress) -> str:
        raise NotImplementedError

    def settings(self) -> dict:
        """The family's hyperparameters (learning rate, batch, heads...), as its attributes say."""
        return {name: value for name in dir(self) if not name.startswith("_")
                and isinstance(value := getattr(self, name), (bool, int, float, str, tuple))}


class MedusaFamily(Family):
    """Medusa-2-style heads (ResBlocks reusing the target's LM head; the backbone stays frozen, so
    this is the paper's Medusa-1 training of Medusa v2-layout heads). Loss: sum over heads of
    0.8^k x cross-entropy against the target's greedy token k+2 positions ahead (the paper's
    decaying weights), AdamW at 1e-3 with a cosine schedule."""

    name, num_heads, batch, lr, default_steps = "medusa", 4, 256, 1e-3, 2000

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final = model.config.num_hidden_layers
        hidden, lm_weight = model.config.hidden_size, model.lm_head.weight.detach()
        heads = MedusaHeads(hidden, self.num_heads)
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        start = shared_prompt_prefix(features)
        rows, labels = self._table(features, train_ids, start, final)
        optimizer = torch.optim.AdamW(heads.parameters(), lr=self.lr, weight_decay=0.0)

        def batches(step, generator):
            pick = torch.randint(len(rows), (self.batch,), generator=generator)
            return rows[pick].float(), labels[pick]

        vocabulary = loss_vocabulary(features, train_ids, lm_weight)

        def loss_fn(batch):
            x, y = batch
            outputs = heads.features(x)  # [heads, B, H]
            return sum(0.8**k * vocabulary.cross_entropy(outputs[k], y[:, k]) for k in range(self.num_heads))

        state = train_loop(heads, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(heads, features, test_ids, lm_weight, final)
        return finish(run, heads, loaded, features, train_ids, test_ids, state, accuracy, output, command,
                      {"medusa_num_heads": self.num_heads, "medusa_num_layers": 1, "version": "2"})

    def _table(self, features, conversations, start, final):
        rows, labels = [], []
        for c in conversations:
            greedy, length = features.greedy[c], len(features.tokens[c])
            rows.append(features.hidden[final][c][start:])
            label = torch.full((length - start, self.num_heads), -100, dtype=torch.long)
            for k in range(self.num_heads):
                # Head k at position t drafts the token after t + k + 1: the target's greedy choice there.
                label[: max(0, length - start - k - 1), k] = greedy[start + k + 1 :]
            labels.append(label)
        return torch.cat(rows), torch.cat(labels)

    @torch.no_grad()
    def evaluate(self, heads, features, conversations, lm_weight, final) -> dict:
        """Top-1 chain acceptance on held-out answers: at each answer position, how many heads in a
        row draft the target's greedy tokens."""
        accepted = []
        for c in conversations:
            rows, labels = self._table(features, [c], features.prompt_lengths[c] - 1, final)
            hits = (F.linear(heads.features(rows.float()), lm_weight).argmax(-1).T == labels)  # [rows, heads]
            full = (labels != -100).all(1)
            accepted += hits[full].int().cumprod(1).sum(1).tolist()
        return acceptance_summary(accepted, self.num_heads)


def acceptance_summary(accepted: list[int], depth: int) -> dict:
    """From the accepted draft length at each position: acceptance by draft position (given the
    earlier ones were accepted, as the decoding stats report it) and mean accepted tokens per step
    of a top-1 chain of `depth` drafts (the target's own token included)."""
    counts = torch.tensor(accepted)
    by_position = [float((counts > k).sum() / max(1, int((counts >= k).sum()))) for k in range(depth)]
    return {"acceptance_by_position": [round(x, 4) for x in by_position],
            "mean_accepted_tokens_chain": round(1 + float(counts.float().mean()), 3), "positions": len(accepted)}


def finish(run: Run, module, loaded, features, train_ids, test_ids, state, accuracy, output, command, extra,
           notes: dict | None = None) -> str:
    """Save `module` with its model card; `notes` adds to the card (what it was trained on)."""
    name = run.family
    tokens = sum(len(features.tokens[c]) for c in train_ids)
    answer_tokens = sum(len(features.tokens[c]) - features.prompt_lengths[c] for c in train_ids)
    card = {"family": name, "base_model": loaded.name, "train_conversations": len(train_ids),
            "train_tokens": tokens, "train_answer_tokens": answer_tokens, "held_out_conversations": len(test_ids),
            "steps": state.step, "planned_steps": state.planned, "stopped_by": state.stopped_by, "config": run.config,
            "train_seconds": round(state.seconds), "final_loss": round(state.losses[-1], 4) if state.losses else None, "loss_curve": [round(x, 4) for x in state.losses[:: max(1, len(state.losses) // 20)]],
            "held_out": accuracy, "command": command, "torch": torch.__version__} | (notes or {})
    checkpoints.save(module, name, output, loaded.model, base_model=loaded.name, extra=extra, card=card)
    return f"{state.step} steps in {state.seconds / 60:.1f} min, loss {card['final_loss']}, " \
           f"held-out mean accepted tokens (top-1 chain) {accuracy['mean_accepted_tokens_chain']}"


class EagleFamily(Family):
    """The EAGLE-1/2 head: at position t it reads (embedding of token t+1, target feature t) and
    regresses feature t+1 (smooth L1) plus 0.1 x cross-entropy of the target's LM head on its
    prediction against the target's greedy token (EAGLE's loss), with U(-0.1, 0.1) noise on the
    input features (EAGLE's data augmentation). Features are the final normed states, which is
    what the target's LM head reads. Random initialisation, as EAGLE's (a copy of the target's
    last layer is no warm start: it was tuned for the residual stream, whose scale is far larger
    than the normed features')."""

    name, conversations, lr, default_steps, steps_evaluated = "eagle", 4, 5e-4, 1500, 5

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final = model.config.num_hidden_layers
        head = EagleHead(LayerConfig.from_dict(model.config.to_dict()))
        embed, lm_weight = model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach()
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        start = shared_prompt_prefix(features)
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=0.0, betas=(0.9, 0.95))
        vocabulary = loss_vocabulary(features, train_ids, lm_weight)

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            width = max(len(features.tokens[c]) for c in picked) - 1
            tokens = torch.zeros(len(picked), width, dtype=torch.long)
            feats = torch.zeros(len(picked), width + 1, embed.shape[1])
            labels = torch.full((len(picked), width), -100, dtype=torch.long)
            for row, c in enumerate(picked):
                length = len(features.tokens[c]) - 1
                tokens[row, :length] = features.tokens[c][1:]
                feats[row, : length + 1] = features.hidden[final][c].float()
                labels[row, start:length] = features.greedy[c][start + 1 :]
            noise = (torch.rand(feats[:, :-1].shape, generator=generator) - 0.5) * 0.2
            return tokens, feats[:, :-1] + noise, feats[:, 1:], labels

        def loss_fn(batch):
            tokens, inputs, wanted, labels = batch
            positions = torch.arange(tokens.shape[1])[None].expand_as(tokens)
            predicted = head(F.embedding(tokens, embed), inputs, positions)
            valid = labels != -100
            regression = F.smooth_l1_loss(predicted[valid], wanted[valid])
            return regression + 0.1 * vocabulary.cross_entropy(predicted[valid], labels[valid])

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(head, features, test_ids, embed, lm_weight, final)
        return finish(run, head, loaded, features, train_ids, test_ids, state, accuracy, output, command,
                      {"bias": True})

    @torch.no_grad()
    def evaluate(self, head, features, conversations, embed, lm_weight, final) -> dict:
        return chain_acceptance(features, conversations, embed, self.steps_evaluated,
                                lambda c: features.hidden[final][c].float(), head,
                                lambda predicted: F.linear(predicted, lm_weight).argmax(-1))


def ttt_mask(rows: int, step: int) -> torch.Tensor:
    """What draft step `step` (0: the rows fed the target's features) sees, as `Attention` takes it:
    row t attends causally to the step-0 rows up to t, then to its own row of each later step
    (its ancestors in a drafted chain, and itself). EAGLE-3's training-time test uses this mask,
    and drafting builds the same one per tree node."""
    return torch.cat([torch.ones(rows, rows, dtype=torch.bool).tril()] + [torch.eye(rows, dtype=torch.bool)] * step, 1)


@torch.no_grad()
def chain_acceptance(features, conversations, embed, depth, target_features, advance, draft) -> dict:
    """Chain drafting simulated at every held-out answer position at once, as the drafter runs:
    step 1 reads the target's features, later steps the head's own predictions and drafted
    tokens (`advance(embeds, features, positions, cache, mask)` -> next features, `draft(features)`
    -> target ids), attending as `ttt_mask` says."""
    accepted = []
    for c in conversations:
        tokens, greedy = features.tokens[c], features.greedy[c]
        rows = len(tokens) - 1
        positions, cache = torch.arange(rows)[None], HeadCache()
        predicted = advance(F.embedding(tokens[1:], embed)[None], target_features(c)[None, :-1], positions, cache, None)
        hits = torch.zeros(rows, depth, dtype=torch.bool)
        valid = torch.zeros(rows, depth, dtype=torch.bool)
        for step in range(depth):
            drafted = draft(predicted[0])  # row t: the draft for token t + step + 2
            ahead = torch.arange(rows) + step + 1
            valid[:, step] = ahead < rows + 1
            hits[:, step] = drafted == greedy[ahead.clamp(max=rows)]
            if step + 1 < depth:
                predicted = advance(F.embedding(drafted, embed)[None], predicted, positions + step + 1, cache,
                                    ttt_mask(rows, step + 1))
        full = (torch.arange(rows) >= features.prompt_lengths[c] - 1) & valid.all(1)
        accepted += hits[full].int().cumprod(1).sum(1).tolist()
    return acceptance_summary(accepted, depth)


class HydraFamily(Family):
    """Hydra's grounded MLP heads (one HydraBlock each; the base Hydra of the paper, not Hydra++'s
    prefix-attention layer or 4-block heads). Head k at position t reads (final state t, embeddings
    of tokens t+1 .. t+k+1, teacher-forced from the target's own answer) and is trained with
    cross-entropy against the target's greedy token at t+k+2, all heads weighted equally (Hydra's
    train.py; with greedy self-distilled data its teacher objective has the same argmax). AdamW
    at 1e-3, cosine schedule, 256 positions a step."""

    name, num_heads, batch, lr, default_steps = "hydra", 4, 256, 1e-3, 2000

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final = model.config.num_hidden_layers
        embed, lm_weight = model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach()
        heads = HydraHeads(model.config.hidden_size, self.num_heads)
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        start = shared_prompt_prefix(features)
        rows, inputs, labels = self._table(features, train_ids, start, final)
        optimizer = torch.optim.AdamW(heads.parameters(), lr=self.lr, weight_decay=0.0)
        vocabulary = loss_vocabulary(features, train_ids, lm_weight)

        def batches(step, generator):
            pick = torch.randint(len(rows), (self.batch,), generator=generator)
            return rows[pick].float(), F.embedding(inputs[pick], embed), labels[pick]

        def loss_fn(batch):
            hidden, embeds, y = batch
            return sum(vocabulary.cross_entropy(heads.features(k, hidden, embeds[:, : k + 1]), y[:, k])
                       for k in range(self.num_heads))

        state = train_loop(heads, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(heads, features, test_ids, embed, lm_weight, final)
        return finish(run, heads, loaded, features, train_ids, test_ids, state, accuracy, output, command, {})

    def _table(self, features, conversations, start, final):
        """Per position t >= start: the final state, tokens t+1 .. t+K (head k reads the first
        k + 1) and head k's label, the target's greedy token after t + k + 1 (-100 past the end)."""
        rows, inputs, labels = [], [], []
        for c in conversations:
            tokens, greedy, length = features.tokens[c], features.greedy[c], len(features.tokens[c])
            rows.append(features.hidden[final][c][start:])
            ahead = torch.arange(start, length)[:, None] + torch.arange(1, self.num_heads + 1)  # [rows, K]: t + k + 1
            inside = ahead < length
            inputs.append(torch.where(inside, tokens[ahead.clamp(max=length - 1)], 0))
            labels.append(torch.where(inside, greedy[ahead.clamp(max=length - 1)], -100))
        return torch.cat(rows), torch.cat(inputs), torch.cat(labels)

    @torch.no_grad()
    def evaluate(self, heads, features, conversations, embed, lm_weight, final) -> dict:
        """Top-1 chain acceptance on held-out answers. Teacher-forced inputs give the drafting
        chain's count exactly: head k's inputs differ from the drafted ones only after an earlier
        head missed, where the count has stopped anyway."""
        accepted = []
        for c in conversations:
            rows, inputs, labels = self._table(features, [c], features.prompt_lengths[c] - 1, final)
            embeds = F.embedding(inputs, embed)
            hits = torch.stack([heads.logits(k, heads.features(k, rows.float(), embeds[:, : k + 1]), lm_weight)
                                .argmax(-1) == labels[:, k] for k in range(self.num_heads)], 1)
            full = (labels != -100).all(1)
            accepted += hits[full].int().cumprod(1).sum(1).tolist()
        return acceptance_summary(accepted, self.num_heads)


# EAGLE-3 keeps the 32k most frequent of Llama-3's 128k tokens. SmolLM2's 49k vocabulary would allow a
# quarter, 12,288, but its training answers use fewer distinct tokens than that (~5k in 263 answers):
# the draft vocabulary is every token the target chose in the training answers, at most 8,192 (the
# tokens every other family's loss scores), so none it could learn to draft is left out.
DRAFT_VOCAB = 8192


class Eagle3Family(EagleFamily):
    """The EAGLE-3 head: `fc` fuses the target's low/mid/high states (`eagle3_layers`); the midlayer
    reads (embedding of token t+1, fused state t) and its own norm and LM head rank a draft
    vocabulary of the target's most frequent tokens (d2t/t2d, sorted by id as EAGLE-3's code
    does). Training-time test (SafeAILab/EAGLE traineagle3): the head is unrolled for 7 steps,
    step k reading its own step k-1 outputs and the answer's tokens shifted by k, at positions
    shifted by k, attending as `ttt_mask` says; the loss is sum 0.8^k x cross-entropy against the
    target's greedy token k+2 positions ahead, on positions whose label is in the draft
    vocabulary (EAGLE-3 masks the rest). Steps 1..6 continue 64 random rows of the conversation,
    not all (exact for those rows: a row's later steps read only step 0's rows and its own), so a
    step costs ~3x less for the same step-0 signal. No feature regression (EAGLE-3 drops it). EAGLE-3's
    code distils the target's distribution over the draft vocabulary; on greedy self-distilled
    data its argmax is the label used here. Random init, AdamW at 5e-4 as for EAGLE; one
    conversation a step (unrolled 7 times it costs as much as several of EAGLE's: on a CPU budget
    more, smaller steps learn faster)."""

    name, conversations, ttt_steps, deep_rows = "eagle3", 1, 7, 64

    def layers(self, model) -> tuple[int, ...]:
        return eagle3_layers(model.config.num_hidden_layers)

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        layers = self.layers(model)
        vocab, hidden = model.config.vocab_size, model.config.hidden_size
        embed = model.model.embed_tokens.weight.detach()
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        used = frequency_ranked(features, train_ids, vocab)[:DRAFT_VOCAB].sort().values
        head = Eagle3Head(LayerConfig.from_dict(model.config.to_dict()), hidden, vocab, len(used))
        head.d2t.copy_(used - torch.arange(len(used)))
        head.t2d.zero_()
        head.t2d[used] = True
        draft_id = torch.full((vocab,), -100, dtype=torch.long)  # target id -> draft id (-100: not draftable)
        draft_id[used] = torch.arange(len(used))
        start = shared_prompt_prefix(features)
        fused = lambda c: torch.cat([features.hidden[layer][c] for layer in layers], -1).float()  # noqa: E731
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=0.0, betas=(0.9, 0.95))

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            width = max(len(features.tokens[c]) for c in picked) - 1
            tokens = torch.zeros(len(picked), width + self.ttt_steps, dtype=torch.long)  # room for the shifts
            feats = torch.zeros(len(picked), width, 3 * hidden)
            labels = torch.full((len(picked), width + self.ttt_steps), -100, dtype=torch.long)
            for row, c in enumerate(picked):
                length = len(features.tokens[c]) - 1
                tokens[row, :length] = features.tokens[c][1:]
                feats[row, :length] = fused(c)[:-1]
                labels[row, start:length] = draft_id[features.greedy[c][start + 1 :]]
            trained = torch.arange(start, width)
            deep = trained[torch.randperm(len(trained), generator=generator)[: self.deep_rows]].sort().values
            return tokens, feats, labels, deep

        def loss_fn(batch):
            tokens, states, labels, deep = batch
            loss = 0.0
            for k, (rows, predicted) in enumerate(training_time_test(head, tokens, states, embed, self.ttt_steps, deep)):
                wanted = labels[:, rows + k]  # row t, step k: the target's greedy token t+k+2
                if (wanted != -100).any():
                    loss = loss + 0.8**k * F.cross_entropy(head.logits(predicted)[wanted != -100], wanted[wanted != -100])
            return loss

        state = train_loop(head, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = chain_acceptance(features, test_ids, embed, self.steps_evaluated, fused,
                                    lambda *args: head.hidden(*args),
                                    lambda predicted: head.to_target(head.logits(predicted).argmax(-1)))
        return finish(run, head, loaded, features, train_ids, test_ids, state, accuracy, output, command, {})


def training_time_test(head, tokens, states, embed, steps: int, deep: torch.Tensor | None = None):
    """EAGLE-3's training-time test: (row indices, the head's outputs [B, len(rows), H]) at each of
    `steps` draft steps. Row t of step k reads token t+k+1 (`tokens` [B, rows + steps - 1]) and
    its own step k-1 output (step 0: the target's fused states `states` [B, rows, 3H]) at position
    t+k, attending as `ttt_mask` says (`StepCache` computes that sparsely): exactly what drafting a
    chain from row t computes. Steps after the first continue only the rows `deep` (all if None)."""
    rows, cache = torch.arange(states.shape[1]), StepCache()
    for k in range(steps):
        if k == 1 and deep is not None:
            rows, states, cache.rows = deep, states[:, deep], deep
        states = head.hidden(F.embedding(tokens[:, rows + k], embed), states, rows[None] + k, cache)
        yield rows, states


class FrSpecFamily(Family):
    """FR-Spec's token ranking, not a head: the target's greedy answer tokens of the training
    conversations counted, the most frequent quarter of the vocabulary kept (FR-Spec's 32k of
    128k), end-of-sequence ids always in (thunlp/FR-Spec fr.py does the same), saved as FR-Spec's
    `freq_{V}.pt` (a list of token ids, most frequent first) beside the EAGLE head that FR-Spec
    drafts with. FR-Spec counts a large corpus; ours is a few hundred answers that use a few
    thousand distinct tokens, so the tokens they never chose fill the quarter in id order: a BPE
    vocabulary's ids follow its merge order, which tracks corpus frequency."""

    name, folder = "fr-spec", "eagle"

    def layers(self, model) -> tuple[int, ...]:
        return ()

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        vocab = loaded.model.config.vocab_size
        size = vocab // FR_SPEC_FRACTION
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        ranked = frequency_ranked(features, train_ids, vocab)[:size].tolist()
        seen = set(ranked)
        ranked += [token for token in range(vocab) if token not in seen][: size - len(ranked)]
        missing = sorted(eos_ids(loaded.model, loaded.tokenizer) - set(ranked))
        ranked = ranked[: size - len(missing)] + missing
        output = Path(output)
        output.mkdir(parents=True, exist_ok=True)
        torch.save(ranked, output / f"freq_{size}.pt")
        held = torch.cat([features.greedy[c][features.prompt_lengths[c] - 1 :] for c in test_ids])
        covered = float(torch.isin(held, torch.tensor(ranked)).float().mean())
        summary = f"{len(ranked)} token ids in freq_{size}.pt; they cover {covered:.2%} of the held-out answer tokens"
        (output / f"freq_{size}.md").write_text(
            f"# FR-Spec token ranking for {loaded.name}\n\n{summary} ({len(test_ids)} held-out conversations); "
            f"counted on the target's greedy answers to {len(train_ids)} conversations of this project's prompt "
            f"corpus, then filled in id order (see `training.FrSpecFamily`).\n\nReproduce (writes this file):\n\n"
            f"```\n{command}\n```\n", encoding="utf-8")
        return summary


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


class KangarooFamily(Family):
    """Kangaroo's adapter (one attention layer, two norms) on the target's exit after its first l = 2 layers
    (the paper's for Vicuna-7B; the exit states are stored with the data, as the input of EAGLE-3's
    first fused layer). Loss as its train.py: the cross-entropy of the adapter's distribution
    (through the target's LM head) against the target's distribution at the same position,
    -sum_x p(x) log q(x), here both over the draft vocabulary (the `LOSS_VOCAB` most frequent
    tokens), which the adapter then drafts from: trained on those rows only, its logits for the
    others are meaningless (decoding over all 49k tokens drafted rare tokens and lost to the
    untrained exit). AdamW, betas (0.9, 0.95) and gradient clipping as its code; the learning rate
    is higher than its 3e-5 for a budget of minutes."""

    name, exit_layer, conversations, lr, default_steps, steps_evaluated = "kangaroo", 2, 2, 2e-3, 3000, 6

    def layers(self, model):
        assert self.exit_layer in stored_layers(model), "the exit layer's states must be in the training data"
        return (self.exit_layer, model.config.num_hidden_layers)

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final, lm_weight = model.config.num_hidden_layers, model.lm_head.weight.detach()
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        start = shared_prompt_prefix(features)
        vocabulary = loss_vocabulary(features, train_ids, lm_weight).frequent
        adapter = KangarooAdapter(LayerConfig.from_dict(model.config.to_dict()), model.model.norm.weight.detach(),
                                  len(vocabulary))
        adapter.draft_vocab.copy_(vocabulary)
        head = lm_weight[vocabulary]
        untrained = self.evaluate(adapter, features, test_ids, lm_weight)
        optimizer = torch.optim.AdamW(adapter.parameters(), lr=self.lr, weight_decay=0.0, betas=(0.9, 0.95))

        def batches(step, generator):
            picked = [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[: self.conversations]]
            mask = padded([torch.arange(len(features.tokens[c])) >= start for c in picked], False)
            with torch.no_grad():
                p = F.linear(padded([features.hidden[final][c].float() for c in picked])[mask], head).softmax(-1)
            return padded([features.hidden[self.exit_layer][c].float() for c in picked]), mask, p

        def loss_fn(batch):
            exits, mask, p = batch
            positions = torch.arange(exits.shape[1])[None].expand(exits.shape[0], -1)
            return -(p * F.linear(adapter(exits, positions)[mask], head).log_softmax(-1)).sum(-1).mean()

        state = train_loop(adapter, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(adapter, features, test_ids, lm_weight) | {"untrained": untrained}
        return finish(run, adapter, loaded, features, train_ids, test_ids, state, accuracy, output, command,
                      {"exit_layer": self.exit_layer},
                      {"targets": f"targets are the target's full distributions; inputs its exit states after layer "
                                  f"{self.exit_layer}"})

    @torch.no_grad()
    def evaluate(self, adapter, features, conversations, lm_weight) -> dict:
        """Top-1 chain acceptance on held-out answers (see `run_lengths`), without the
        confidence exit: the drafter's own acceptance at each depth up to the paper's 6."""
        head, accepted = VocabularyHead(lm_weight, adapter.draft_vocab), []
        for c in conversations:
            exits = features.hidden[self.exit_layer][c].float()
            drafted = head(adapter(exits[None], torch.arange(len(exits))[None])[0]).argmax(-1)
            accepted += run_lengths(drafted == features.greedy[c], features.prompt_lengths[c] - 1, self.steps_evaluated)
        return acceptance_summary(accepted, self.steps_evaluated)


class DistillFamily(Family):
    """DistillSpec (Zhou et al. 2024): a drafter distilled from the target's distribution. The
    student is the target's first `num_layers` layers (copied; the target's embeddings, final norm
    and LM head restricted to the loss vocabulary, which is also its draft vocabulary: see
    `distilled`). Data: the paper's on-policy recipe, sequences the student samples from the
    training prompts, scored by the target's full distribution; it starts on the cached target
    answers (off-policy, whose distributions are stored), because an untrained student's samples
    are poor text, then alternates the two. Loss: the total variation distance between the
    target's distribution p and the student's q. DistillSpec compares forward and reverse KL, JSD
    and TVD and finds the best depends on task and decoding; TVD is the one the acceptance rate
    is written in (a draft token is accepted with probability 1 - TVD(p, q)), and the one that
    stays exact with a restricted head: q is zero outside the draft vocabulary S, so
    TVD = (sum_S |p - q| + p(not S)) / 2 needs p on S only (KL would be infinite)."""

    name, num_layers, lr, default_steps, steps_evaluated = "distillspec", 2, 2e-4, 1500, 5
    # Per step: 2 conversations (the student runs over all their tokens for context; the loss scores at most
    # `scored_rows` positions, whose target distributions need the full 49k-row head) or 2 samples of 48 tokens.
    conversations, scored_rows, on_policy_prompts, on_policy_tokens, off_policy_warmup = 2, 256, 2, 48, 50

    def fit(self, loaded, features, run, output, budget_minutes, command, progress) -> str:
        model = loaded.model
        final, lm_weight = model.config.num_hidden_layers, model.lm_head.weight.detach()
        train_ids, test_ids = split(len(features.tokens), seed=run.seed)
        start = shared_prompt_prefix(features)
        vocabulary = loss_vocabulary(features, train_ids, lm_weight).frequent
        student = DraftLayers.from_target(model, self.num_layers, vocabulary).train().requires_grad_(True)
        drafter, head = student.drafter(model), lm_weight[vocabulary]
        untrained = self.evaluate(drafter, features, test_ids)
        optimizer = torch.optim.AdamW(student.parameters(), lr=self.lr, weight_decay=0.0)
        pad = int(features.tokens[0][0])  # any id: padded positions are masked out of attention and loss
        stops = torch.tensor(sorted(eos_ids(model, loaded.tokenizer)))

        def pick(count, generator):
            return [train_ids[i] for i in torch.randperm(len(train_ids), generator=generator)[:count]]

        def off_policy(generator):
            picked = pick(self.conversations, generator)
            tokens = padded([features.tokens[c] for c in picked], pad)
            mask = padded([torch.ones(len(features.tokens[c]), dtype=torch.bool) for c in picked], False)
            scored = padded([torch.arange(len(features.tokens[c])) >= start for c in picked], False)
            rows = scored.nonzero()
            rows = rows[torch.randperm(len(rows), generator=generator)[self.scored_rows :]]
            scored[rows[:, 0], rows[:, 1]] = False
            with torch.no_grad():
                p = F.linear(padded([features.hidden[final][c].float() for c in picked])[scored], lm_weight)
            return tokens, mask, scored, p.softmax(-1)[:, vocabulary]

        @torch.no_grad()
        def on_policy(generator):  # the samples draw from torch's global RNG, seeded per step by train_loop
            prompts = [features.tokens[c][: features.prompt_lengths[c]] for c in pick(self.on_policy_prompts, generator)]
            width = max(map(len, prompts))
            # Left-padded, so every sample starts at column `width`; the student samples at T = 1.
            batch = torch.stack([torch.cat([prompt.new_full((width - len(prompt),), pad), prompt]) for prompt in prompts])
            mask = torch.stack([torch.arange(width) >= width - len(prompt) for prompt in prompts])
            drafter.eval()
            tokens = drafter.generate(input_ids=batch, attention_mask=mask.long(), do_sample=True, temperature=1.0,
                                      top_k=0, top_p=1.0, max_new_tokens=self.on_policy_tokens, pad_token_id=pad)
            drafter.train()
            ends = torch.isin(tokens[:, width:], stops).long()
            kept = ends.cumsum(1) - ends == 0  # the samples up to their first end token (generate pads after it)
            mask = torch.cat([mask, kept], 1)
            # Position t is scored when token t + 1 is a sample: the student's choices, the target's judgement.
            scored = torch.zeros_like(mask)
            scored[:, width - 1 : -1] = kept
            logits = model(input_ids=tokens, attention_mask=mask.long(), position_ids=positions(mask)).logits
            return tokens, mask, scored, logits[scored].softmax(-1)[:, vocabulary]

        def batches(step, generator):
            return on_policy(generator) if step >= self.off_policy_warmup and step % 2 else off_policy(generator)

        def loss_fn(batch):
            tokens, mask, scored, p = batch
            hidden = drafter.model(input_ids=tokens, attention_mask=mask.long(), position_ids=positions(mask)).last_hidden_state
            q = F.linear(hidden[scored], head).softmax(-1)
            return 0.5 * ((p - q).abs().sum(-1) + 1 - p.sum(-1)).mean()

        state = train_loop(student, optimizer, batches, loss_fn, run, budget_minutes, progress)
        accuracy = self.evaluate(drafter, features, test_ids) | {"untrained": untrained}
        return finish(run, student, loaded, features, train_ids, test_ids, state, accuracy, output, command,
                      {"num_hidden_layers": self.num_layers, "draft_vocab_size": len(vocabulary)},
                      {"trained_on": "by distillation: on the target's greedy answers, then alternately on sequences "
                                     "the drafter sampled itself (on-policy)",
                       "targets": "the loss is the total variation distance to the target's full distribution"})

    @torch.no_grad()
    def evaluate(self, drafter, features, conversations) -> dict:
        """Top-1 chain acceptance of the drafter on held-out answers (see `run_lengths`)."""
        accepted = []
        for c in conversations:
            drafted = drafter(input_ids=features.tokens[c][None]).logits[0].argmax(-1)
            accepted += run_lengths(drafted == features.greedy[c], features.prompt_lengths[c] - 1, self.steps_evaluated)
        return acceptance_summary(accepted, self.steps_evaluated)


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a padded batch: each row counts its own tokens (padding repeats 0)."""
    return (mask.long().cumsum(1) - 1).clamp(min=0)


FAMILIES: dict[str, Family] = {family.name: family for family in
                               (MedusaFamily(), HydraFamily(), EagleFamily(), Eagle3Family(), FrSpecFamily(),
                                KangarooFamily(), DistillFamily())}


def default_output(family: str, model_name: str) -> Path:
    if model_name == EMBEDDED:
        return checkpoints.shipped_head_folder(FAMILIES[family].folder or family)
    return Path.cwd() / f"{FAMILIES[family].folder or family}-head"
