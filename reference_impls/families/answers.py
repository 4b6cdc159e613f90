"""The target's own answers, the data every head family learns from: batched generation and the
shard files that keep them as token ids.

Generation is continuous batching over one preallocated KV slab: every row of the batch writes its
next token's keys and values into the same column, each row sees only its own columns (an additive
4-D mask), and a finished row's slot is refilled from the queue at once (its prompt prefilled in a
small batch of its own and copied in, right-aligned to the current column). On a 2-core CPU one
forward of 64 rows costs about four of one row, so the throughput is 15-20x plain decoding, and
unlike padded batch generation no row waits for the longest answer. Batched rows are left-padded
and computed together, so an answer can differ from batch-1 greedy decoding where two logits tie to
float32 rounding; the answers are training data, not a losslessness claim.

A shard (`answers-00000.npz`, numpy arrays only, read without pickle) keeps, per conversation: a
reference to where its prompt came from (`source:key`), the SHA-256 of the prompt text, the
prompt's token ids when the prompt is the project's own (empty for third-party prompts, which are
never stored: they are re-read from their source by reference), the answer's token ids and whether
the answer ended on its own (EOS) or at the length cap.
"""

from __future__ import annotations

from contextlib import contextmanager

import hashlib
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as ATTENTION

from specatlas.fsutil import ReadError, atomic_write, read_limited
from specatlas.impls.engine.kv import cache_argument


class Slab(DynamicLayer):
    """A cache layer over a preallocated [rows, heads, width, head_dim] buffer: `update` writes at
    column `end` and returns the columns `start`..`end` (the ones some row sees), so a step copies
    nothing (DynamicLayer's concatenation copies the whole cache every step)."""

    def __init__(self, rows: int, heads: int, width: int, head_dim: int, dtype, device):
        super().__init__()
        self.keys = torch.zeros(rows, heads, width, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)
        self.start, self.end, self.is_initialized, self.device = 0, 0, True, device

    def update(self, key_states, value_states, *args, **kwargs):
        new = key_states.shape[-2]
        self.keys[..., self.end : self.end + new, :] = key_states
        self.values[..., self.end : self.end + new, :] = value_states
        self.end += new
        return self.keys[..., self.start : self.end, :], self.values[..., self.start : self.end, :]

    def get_seq_length(self) -> int:
        return self.end


def grouped_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """SDPA for grouped-query attention that never copies the cache: the query heads sharing a
    key/value head are stacked as extra query rows. (transformers' own SDPA path repeats the keys
    and values per query head whenever there is a mask: a copy of the whole cache per layer.)"""
    batch, heads, length, dim = query.shape
    group = heads // key.shape[1]
    grouped = query.reshape(batch, key.shape[1], group * length, dim)
    mask = attention_mask.repeat(1, 1, group, 1) if attention_mask is not None and length > 1 else attention_mask
    out = F.scaled_dot_product_attention(grouped, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(batch, heads, length, dim).transpose(1, 2), None


GROUPED = "specatlas_grouped_sdpa"


@dataclass
class Answer:
    index: int  # the prompt's position in the list given to `generate`
    tokens: list[int]
    finished: bool  # ended on an EOS token (included in `tokens`), not at the length cap


@torch.inference_mode()
def generate(model, prompts: list[list[int]], max_new_tokens: int, stop: set[int], rows: int = 64,
             temperature: float = 0.0, seed: int = 0, max_prompt: int | None = None) -> Iterator[Answer]:
    """Answer every prompt (token ids): greedily, or sampled at `temperature` (seeded), yielding
    each answer as it finishes (not in order). `rows`: the batch; `max_prompt`: the longest prompt
    that will come (default the longest given)."""
    batch = _Batch(model, prompts, max_new_tokens, stop, rows, temperature, seed, max_prompt)
    with _grouped_attention(model):
        while True:
            free = [slot for slot in range(rows) if batch.owner[slot] < 0]
            # Refill in groups: a prefill of several prompts costs about what one costs.
            if batch.pending and free and (len(free) >= max(1, rows // 8) or len(free) == rows):
                batch.admit(free)
            yield from batch.finished()
            if not any(slot >= 0 for slot in batch.owner):
                if batch.pending:
                    continue
                break
            batch.step()


class _Batch:
    """`generate`'s state: `rows` slots, each answering one prompt at a time, over one KV slab."""

    def __init__(self, model, prompts: list[list[int]], max_new_tokens: int, stop: set[int], rows: int,
                 temperature: float, seed: int, max_prompt: int | None):
        config, device = model.config, model.device
        self.model, self.prompts, self.max_new_tokens, self.stop, self.rows = model, prompts, max_new_tokens, stop, rows
        self.temperature, self.device = temperature, device
        self.argument = cache_argument(type(model))
        self.max_prompt = max_prompt or max(map(len, prompts))
        # Columns: a prompt is placed right-aligned to the current column, which is therefore kept at
        # >= max_prompt; compaction (shifting every row left) runs when the slab is full, every
        # >= max_new_tokens steps.
        self.width = 2 * self.max_prompt + max_new_tokens + 1
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.cache = DynamicCache(config=config)
        self.cache.layers = [Slab(rows, heads, self.width, head_dim, model.dtype, device)
                             for _ in range(config.num_hidden_layers)]
        for layer in self.cache.layers:
            layer.end = self.max_prompt
        self.visible = torch.zeros(rows, self.width, dtype=torch.bool, device=device)
        self.position = torch.zeros(rows, dtype=torch.long, device=device)
        self.owner = [-1] * rows  # prompt index per slot, -1 when free
        self.answers: list[list[int]] = [[] for _ in range(rows)]
        self.last = torch.zeros(rows, dtype=torch.long, device=device)
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.queue = iter(range(len(prompts)))
        self.pending = True  # prompts are left in the queue

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        if self.temperature <= 0:
            return logits.argmax(-1)
        probs = torch.softmax(logits.float() / self.temperature, -1)
        return torch.multinomial(probs, 1, generator=self.generator)[:, 0]

    def admit(self, slots: list[int]) -> None:
        """The next prompts of the queue into the free `slots`, prefilled together."""
        batch = []
        for slot in slots:
            index = next(self.queue, None)
            if index is None:
                self.pending = False
                break
            batch.append((slot, index))
        if batch:
            self._prefill(batch)

    def _prefill(self, batch: list[tuple[int, int]]) -> None:
        """Each (slot, prompt index) of `batch`: its prompt's keys and values copied into its slot's
        row, right-aligned to the current column, and its first answer token."""
        model, prompts, device = self.model, self.prompts, self.device
        length = max(len(prompts[index]) for _, index in batch)
        ids = torch.tensor([[0] * (length - len(prompts[i])) + prompts[i] for _, i in batch], device=device)
        mask = torch.tensor([[0] * (length - len(prompts[i])) + [1] * len(prompts[i]) for _, i in batch], device=device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        sees = torch.ones(length, length, dtype=torch.bool, device=device).tril() & mask.bool()[:, None, :]
        additive = torch.zeros(len(batch), 1, length, length, dtype=model.dtype, device=device)
        additive.masked_fill_(~sees[:, None], torch.finfo(model.dtype).min)
        scratch = DynamicCache(config=model.config)
        out = model(input_ids=ids, attention_mask=additive, position_ids=positions, **{self.argument: scratch},
                    use_cache=True, logits_to_keep=1)
        first = self.pick(out.logits[:, -1])
        end = self.cache.layers[0].end
        index = torch.tensor([slot for slot, _ in batch], device=device)
        for layer, filled in zip(self.cache.layers, scratch.layers):
            layer.keys[index, :, end - length : end] = filled.keys
            layer.values[index, :, end - length : end] = filled.values
        self.visible[index] = False
        self.visible[index, end - length : end] = mask.bool()
        for row, (slot, i) in enumerate(batch):
            self.owner[slot], self.answers[slot] = i, [int(first[row])]
            self.position[slot], self.last[slot] = len(prompts[i]), first[row]

    def finished(self) -> Iterator[Answer]:
        """The answers that ended (on EOS or at the length cap), their slots freed."""
        for slot in range(self.rows):
            if self.owner[slot] >= 0 and self._done(slot):
                tokens = self.answers[slot]
                yield Answer(self.owner[slot], tokens, tokens[-1] in self.stop)
                self.owner[slot] = -1
                self.visible[slot] = False

    def _done(self, slot: int) -> bool:
        tokens = self.answers[slot]
        return tokens[-1] in self.stop or len(tokens) >= self.max_new_tokens

    def step(self) -> None:
        """One forward of every row: each live slot's next token, appended to its answer."""
        if self.cache.layers[0].end == self.width:
            self._compact()
        end = self.cache.layers[0].end
        self.visible[:, end] = torch.tensor([slot >= 0 for slot in self.owner], device=self.device)
        start = int(self.visible[:, : end + 1].any(0).nonzero()[0])
        for layer in self.cache.layers:
            layer.start = start
        dtype = self.model.dtype
        mask = torch.zeros(self.rows, 1, 1, end + 1 - start, dtype=dtype, device=self.device)
        mask.masked_fill_(~self.visible[:, None, None, start : end + 1], torch.finfo(dtype).min)
        out = self.model(input_ids=self.last[:, None], attention_mask=mask, position_ids=self.position[:, None],
                         use_cache=True, **{self.argument: self.cache})
        nxt = self.pick(out.logits[:, -1])
        for slot in range(self.rows):
            if self.owner[slot] >= 0:
                self.answers[slot].append(int(nxt[slot]))
        self.last, self.position = nxt, self.position + 1

    def _compact(self) -> None:
        """Every row shifted left as far as the live rows' earliest column allows, keeping the current
        column at >= max_prompt."""
        end = self.cache.layers[0].end
        live = self.visible[[slot for slot in range(self.rows) if self.owner[slot] >= 0]]
        first = int(live.any(0).nonzero()[0]) if live.any() else end
        shift = min(first, end - self.max_prompt)
        for layer in self.cache.layers:
            layer.keys[..., : end - shift, :] = layer.keys[..., shift:end, :].clone()
            layer.values[..., : end - shift, :] = layer.values[..., shift:end, :].clone()
            layer.end = end - shift
        self.visible[:, : end - shift] = self.visible[:, shift:end].clone()
        self.visible[:, end - shift :] = False


@contextmanager
def _grouped_attention(model):
    """transformers finds attention by name in one process-wide table: the name is there only while
    a generation runs, and the model's own setting comes back after it."""
    ATTENTION[GROUPED] = grouped_attention
    before = model.config._attn_implementation
    model.set_attn_implementation(GROUPED)
    try:
        yield
    finally:
        model.set_attn_implementation(before)
        del ATTENTION[GROUPED]


# --------------------------------------------------------------------------------------------
# Shards


@dataclass
class Conversation:
    ref: str  # "source:key", where the prompt came from
    prompt_sha: str  # SHA-256 of the prompt text (hex)
    prompt: list[int]  # token ids of the chat-formatted prompt; [] for a third-party prompt (re-read by ref)
    answer: list[int]
    finished: bool


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ragged(rows: list[list[int]], vocab: int) -> tuple[np.ndarray, np.ndarray]:
    dtype = np.uint16 if vocab <= 1 << 16 else np.uint32
    flat = np.fromiter((t for row in rows for t in row), dtype=dtype)
    return flat, np.cumsum([0] + [len(row) for row in rows]).astype(np.int64)


def write_shard(path: Path, conversations: list[Conversation], vocab: int) -> bytes:
    """Write the shard atomically; return its bytes (their hash goes into the manifest)."""
    prompts, prompt_offsets = _ragged([c.prompt for c in conversations], vocab)
    answers, answer_offsets = _ragged([c.answer for c in conversations], vocab)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, refs=np.array([c.ref for c in conversations]),
                        prompt_sha=np.array([c.prompt_sha for c in conversations]),
                        prompts=prompts, prompt_offsets=prompt_offsets, answers=answers,
                        answer_offsets=answer_offsets, finished=np.array([c.finished for c in conversations]))
    atomic_write(path, buffer.getvalue())
    return buffer.getvalue()


class ShardError(Exception):
    """A shard cannot be read; the message is one line naming the file."""


# A shard of 128 conversations is ~0.5 MB unpacked: the zip's stated sizes are checked against this
# before anything is unpacked (a few kB of zip can unpack to gigabytes).
MAX_SHARD_BYTES = 64 << 20


def read_shard(path: Path, vocab: int, sha256: str | None = None) -> list[Conversation]:
    """The conversations of the shard `path`, whose token ids must lie in 0..vocab-1 and, when
    `sha256` is given, whose bytes must hash to it (its manifest's entry)."""
    try:
        raw = read_limited(path, MAX_SHARD_BYTES)
    except ReadError as exc:
        raise ShardError(f"training data shard {path} {exc}") from None
    if sha256 is not None and file_sha(raw) != sha256:
        raise ShardError(f"training data shard {path} does not match the hash in its manifest")
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise ShardError(f"training data shard {path} cannot be read (not a .npz archive: {exc})") from None
    if unpacked > MAX_SHARD_BYTES:
        raise ShardError(f"training data shard {path} unpacks to {unpacked:,} bytes; at most {MAX_SHARD_BYTES:,} "
                         "are accepted")
    return _unpack_shard(path, raw, vocab)


def _unpack_shard(path: Path, raw: bytes, vocab: int) -> list[Conversation]:
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            refs, shas = data["refs"].tolist(), data["prompt_sha"].tolist()
            prompts, prompt_offsets = data["prompts"], data["prompt_offsets"]
            answers, answer_offsets = data["answers"], data["answer_offsets"]
            finished = data["finished"].tolist()
        count = len(refs)
        if not (len(shas) == len(finished) == count and len(prompt_offsets) == len(answer_offsets) == count + 1
                and prompt_offsets[-1] == len(prompts) and answer_offsets[-1] == len(answers)
                and (np.diff(prompt_offsets) >= 0).all() and (np.diff(answer_offsets) >= 0).all()):
            raise ValueError("its arrays disagree in length")
        for name, tokens, offsets in (("prompt", prompts, prompt_offsets), ("answer", answers, answer_offsets)):
            outside = np.flatnonzero((tokens < 0) | (tokens >= vocab)) if tokens.dtype.kind in "iu" else [0] * len(tokens)
            if len(outside):
                i = int(np.searchsorted(offsets, outside[0], side="right")) - 1
                raise ShardError(f"training data shard {path}: the {name} of {refs[i]} holds token id "
                                 f"{tokens[outside[0]]}, outside the vocabulary of {vocab:,}")
    except ShardError:
        raise
    except Exception as exc:  # noqa: BLE001 - truncated zip, missing array, object arrays refused...
        raise ShardError(f"training data shard {path} cannot be read ({type(exc).__name__}: {exc})") from None
    return [Conversation(refs[i], shas[i], prompts[prompt_offsets[i] : prompt_offsets[i + 1]].tolist(),
                         answers[answer_offsets[i] : answer_offsets[i + 1]].tolist(), bool(finished[i]))
            for i in range(count)]


def file_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

