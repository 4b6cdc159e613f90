"""Everything a registered method reads, for a tiny random Llama, written to a temporary folder.

`TinyWorld` stands in for the embedded model and the files shipped for it: a random 6-layer
Llama (float64, so greedy ties cannot hide in rounding), a random 1-layer draft model, a
random-weight checkpoint of every trained-head family in its published layout, FR-Spec's token
ranking beside the EAGLE head, a datastore of the target's own greedy text, and a Draft & Verify
layer search and Sequoia's acceptance vectors. `build(spec, policy)` builds a registry method on it the way `specatlas run` does
(the same builder, a `--drafter-checkpoint` folder for head methods, `--draft-model` for
draft-model methods, `--datastore` for retrieval methods), so a fast test covers every builder without the real model.
`model_folder` writes a tiny target as a `--model` folder, for the commands.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specatlas.impls.families import FAMILIES
from specatlas.impls.families.dflash import DFlashDraft
from specatlas.impls.families.distillspec import DraftLayers
from specatlas.impls.families.eagle import EagleHead
from specatlas.impls.families.eagle3 import Eagle3Head
from specatlas.impls.families.fr_spec import FR_SPEC_FRACTION
from specatlas.impls.families.hydra import HydraHeads
from specatlas.impls.families.kangaroo import KangarooAdapter
from specatlas.impls.families.medusa import MedusaHeads
from specatlas.impls.families.pard import ParallelDraft
from specatlas.impls.families.pass_tokens import LookAheadTokens
from specatlas.impls.families.specdecpp import AcceptanceHead
from specatlas.impls.families.blocks import LayerConfig
from specatlas.impls.drafters.model_free.retrieval import Datastore
from specatlas.impls.drafters.self_drafting.layer_skip import search_identity
from specatlas.impls.engine.sampling import Sampling
from specatlas.impls.drafters.draft_structure.tree_search import MAX_BRANCH, acceptance_file

from .toy import tiny_llama

VOCAB, LAYERS = 64, 6
# Sequoia's acceptance vector for the samplings the method tests decode with: a drafter that agrees
# with the target often (the random draft model does not, and no tree would pay on it); the
# measurement itself is tested in test_sequoia.py.
ACCEPTANCE = {Sampling(): [0.9, 0.05, 0.02], Sampling(0.9, top_k=20): [0.8, 0.1, 0.05]}
NAME = "tiny-random-llama"  # the target's _name_or_path: checkpoints name the base model they were made for


def randomise(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Random weights everywhere (default inits zero some outputs, which would draft one token only)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.5)
    return module


class TinyWorld:
    def __init__(self, folder: Path):
        self.folder = folder
        self.target = tiny_llama(seed=11, layers=LAYERS, vocab=VOCAB)
        self.target.config._name_or_path = NAME
        self.draft_model = tiny_llama(seed=12, layers=1, vocab=VOCAB)
        self.heads = {family: self._write_head(family, seed) for seed, family in enumerate(
            ["medusa", "hydra", "eagle", "eagle3", "kangaroo", "distillspec", "pass", "specdecpp", "redrafter", "pard",
             "pard2", "dflash"], start=20)}
        self._write_frequent_tokens()
        self.datastore = folder / "datastore.npz"
        Datastore.from_documents([self.greedy([3, 5, 7], 48), self.greedy([9, 2], 48)], separator=0,
                                 meta={"model": NAME, "vocab_size": VOCAB}).save(self.datastore)
        self.cache = folder / "cache"
        self.skipped = [1, 3]
        identity, file = search_identity(self.target)
        (self.cache / "draft-and-verify").mkdir(parents=True)
        (self.cache / "draft-and-verify" / file).write_text(json.dumps({"identity": json.loads(identity),
                                                                         "skipped": self.skipped}))
        (self.cache / "sequoia").mkdir()
        for sampling, vector in ACCEPTANCE.items():
            identity, file = acceptance_file(self.target, self.draft_model, sampling)
            vector = vector + [0.0] * (MAX_BRANCH - len(vector))
            (self.cache / "sequoia" / file).write_text(json.dumps({"identity": identity, "acceptance": vector}))

    def greedy(self, prompt: list[int], tokens: int) -> list[int]:
        ids = torch.tensor([prompt])
        with torch.no_grad():
            out = self.target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                                       do_sample=False, pad_token_id=0)
        return out[0].tolist()

    def _write_head(self, family: str, seed: int) -> Path:
        target, config = self.target, self.target.config
        layer = LayerConfig.from_dict(config.to_dict())
        head = {"medusa": lambda: MedusaHeads(config.hidden_size, 4),
                "hydra": lambda: HydraHeads(config.hidden_size, 4),
                "eagle": lambda: EagleHead(layer),
                "eagle3": lambda: self._eagle3(layer),
                "kangaroo": lambda: KangarooAdapter(layer, draft_vocab_size=VOCAB // 2),
                "distillspec": lambda: DraftLayers(target, 2, VOCAB // 2),
                "pard": lambda: ParallelDraft(target, 2, VOCAB // 2),
                "pard2": lambda: ParallelDraft(target, 2, VOCAB // 2),
                "dflash": lambda: DFlashDraft(layer, 2, 2, VOCAB // 2),
                "pass": lambda: LookAheadTokens(config.hidden_size, 6),
                "specdecpp": lambda: AcceptanceHead(self.draft_model.config.hidden_size),
                "redrafter": lambda: FAMILIES["redrafter"].head(config.hidden_size, VOCAB, torch.arange(0, VOCAB, 2))}[family]()
        randomise(head, seed)
        for name, buffer in head.named_buffers():  # vocabularies: the first half of the ids
            if name.endswith("draft_vocab"):
                buffer.copy_(torch.arange(len(buffer)))
        extra = {"kangaroo": {"exit_layer": 2},
                 "distillspec": {"num_hidden_layers": 2, "draft_vocab_size": VOCAB // 2}}.get(family)
        return FAMILIES[family].save(head, self.folder / family, target, NAME, extra)

    @staticmethod
    def _eagle3(layer: LayerConfig) -> Eagle3Head:
        head = Eagle3Head(layer, layer.hidden_size, VOCAB, VOCAB // 2)
        used = torch.arange(0, VOCAB, 2)  # draft vocabulary: the even ids
        head.d2t.copy_(used - torch.arange(len(used)))
        head.t2d.zero_()
        head.t2d[used] = True
        return head

    def _write_frequent_tokens(self) -> None:
        size = VOCAB // FR_SPEC_FRACTION
        ranking = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(5))[:size].tolist()
        torch.save(ranking, self.heads["eagle"] / f"freq_{size}.pt")

    def build(self, spec, policy):
        """`spec` built on the tiny target as `specatlas run` builds it (`--datastore` the world's)."""
        from specatlas.impls.methods.retrieval import datastore_for

        head = {"drafter_checkpoint": str(self.heads[spec.trained_head])} if spec.trained_head else {}
        if spec.uses_datastore:
            head["datastore"] = datastore_for(self.target, self.datastore)
        return spec.build(self.target, self.draft_model if spec.uses_draft_model else None, policy=policy, **head)


TOKENIZER_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789 .,?!'"


def model_folder(folder: Path) -> Path:
    """A tiny random Llama of the world's shape as a Hugging Face folder a command loads with
    `--model`: float32 weights at scale 0.5 (default inits leave logits so flat that float32 rounding
    could break greedy ties), and a character-level tokenizer (lower-cased; other characters are
    <unk>) over the model's vocabulary. No chat template: prompts are encoded as plain text."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model = randomise(tiny_llama(seed=13, layers=LAYERS, vocab=VOCAB), seed=13).to(torch.float32)
    model.save_pretrained(folder)
    tokens = ["<unk>", *TOKENIZER_CHARACTERS]
    tokens += [f"<unused{i}>" for i in range(VOCAB - len(tokens))]
    tokenizer = Tokenizer(models.WordLevel({token: i for i, token in enumerate(tokens)}, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    tokenizer.decoder = decoders.Fuse()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>").save_pretrained(folder)
    return folder
