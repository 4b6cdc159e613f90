"""Toy language models with a tiny vocabulary, and an exact enumerator of decoding randomness.

`ToyLM` is a stand-in causal LM with the transformers calling convention (cache, position_ids,
4-D additive attention mask): each row's logits are a fixed pseudo-random function of exactly
the tokens that row can see, read back from the KV cache through the mask. So it checks what
the loop feeds it (masks, positions, cache rollback) while being fast enough to enumerate every
branch of a decoder's randomness. `tiny_llama` is a real (random) transformer for the tests
that need real attention.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from itertools import product
from types import SimpleNamespace

import torch

from specatlas.impls.engine.sampling import Randomness, Sampling

VOCAB = 3


class ToyLM(torch.nn.Module):
    """`LAYERS` toy layers: the hidden state of layer l at a row is `hidden(l, prefix)` of the
    tokens that row sees, so a test can check which rows a drafter was given."""

    LAYERS = 2

    def __init__(self, seed: int, sharpness: float = 2.0):
        super().__init__()
        self.seed, self.sharpness = seed, sharpness
        self.config = None
        self.dtype, self.device = torch.float64, torch.device("cpu")
        self.hidden_asked: list[object] = []  # `output_hidden_states` of every forward

    def hidden(self, layer: int, prefix: tuple[int, ...]) -> torch.Tensor:
        """Layer l's state after `prefix`: the next-token logits plus l (layer 0 is the last token)."""
        if layer == 0:
            return torch.nn.functional.one_hot(torch.tensor(prefix[-1]), VOCAB).double()
        return self.next_logits(prefix) + layer

    @lru_cache(maxsize=None)
    def next_logits(self, prefix: tuple[int, ...]) -> torch.Tensor:
        generator = torch.Generator().manual_seed(hash((self.seed, prefix)) % 2**31)
        return torch.randn(VOCAB, generator=generator, dtype=torch.float64) * self.sharpness

    def forward(self, input_ids, position_ids=None, attention_mask=None, cache=None, use_cache=True,
                output_hidden_states=False, logits_to_keep=0):  # every row is returned; callers slice
        new = input_ids.shape[1]
        past = cache.get_seq_length()
        if position_ids is None:
            position_ids = torch.arange(past, past + new)[None]
        rows = torch.stack([input_ids[0].double(), position_ids[0].double()])[None, :, :, None]
        tokens, positions = (t[0, 0, :, 0].long().tolist() for t in cache.update(rows[:, :1], rows[:, 1:], 0))
        prefixes = []
        for row in range(new):
            query = past + row
            visible = [j for j in range(query + 1)
                       if attention_mask is None and j <= query or attention_mask is not None and attention_mask[0, 0, row, j] == 0]
            seen = sorted((positions[j], tokens[j]) for j in visible)
            assert [p for p, _ in seen] == list(range(len(seen))), f"positions do not form a prefix: {seen}"
            prefixes.append(tuple(t for _, t in seen))
        logits = torch.stack([self.next_logits(prefix) for prefix in prefixes])[None]
        self.hidden_asked.append(output_hidden_states)
        hidden = None
        if output_hidden_states is not False:
            layers = range(self.LAYERS + 1) if output_hidden_states is True else output_hidden_states
            hidden = tuple(torch.stack([self.hidden(layer, prefix) for prefix in prefixes])[None] if layer in layers else None
                           for layer in range(self.LAYERS + 1))
        return SimpleNamespace(logits=logits, hidden_states=hidden)


@torch.no_grad()
def sequence_distribution(model, prompt: list[int], length: int, sampling: Sampling) -> dict[tuple, float]:
    """P(continuation) under plain sampling from a model with `next_logits(prefix)` (a ToyLM, or a
    real transformer through `FullPrefix`), computed exactly from full prefixes."""
    out = {}
    for continuation in product(range(VOCAB), repeat=length):
        probability, prefix = 1.0, tuple(prompt)
        for token in continuation:
            probability *= float(sampling.probs(model.next_logits(prefix))[token])
            prefix += (token,)
        out[continuation] = probability
    return out


def tiny_llama(seed: int, layers: int = 2, vocab: int = 16):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=0, eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    return LlamaForCausalLM(config).to(torch.float64).eval()


class Enumerator(Randomness):
    """Replays a script of choice indices; past its end it takes the first option and records how
    many options each choice point had, so `enumerate_outputs` can walk every branch."""

    def __init__(self, script: list[int]):
        self.script, self.chosen, self.arity, self.weight = script, [], [], 1.0

    def _pick(self, options: list[tuple[object, float]]):
        index = self.script[len(self.chosen)] if len(self.chosen) < len(self.script) else 0
        self.chosen.append(index)
        self.arity.append(len(options))
        value, probability = options[index]
        self.weight *= probability
        return value

    def bernoulli(self, p: float, *key) -> bool:
        p = min(max(p, 0.0), 1.0)
        return self._pick([(value, w) for value, w in ((True, p), (False, 1 - p)) if w > 0])

    def categorical(self, probs: torch.Tensor, *key) -> int:
        return self._pick([(i, w) for i, w in enumerate(probs.double().tolist()) if w > 0])


def enumerate_outputs(run) -> dict[tuple, float]:
    """Exact output distribution of `run(rng) -> tuple` over every branch of its random choices."""
    distribution: dict[tuple, float] = defaultdict(float)
    script: list[int] = []
    while True:
        rng = Enumerator(script)
        distribution[run(rng)] += rng.weight
        chosen = rng.chosen
        position = next((i for i in reversed(range(len(chosen))) if chosen[i] + 1 < rng.arity[i]), None)
        if position is None:
            return dict(distribution)
        script = chosen[:position] + [chosen[position] + 1]
