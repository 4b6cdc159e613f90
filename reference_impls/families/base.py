"""What every trained-head family is: `Family`, the base each module of this package subclasses.

A family ties together its `nn.Module`, how a checkpoint of it is recognised (`detect`) and built
(`build`), the config.json and model-card wording it is saved with (`config_for`, `describe`,
`weight_file`; `save` writes them the same way for every family), and how it is trained (`fit`,
its settings as class attributes, `layers`); its drafter is in its module too, composed into
methods by `methods.heads`. `families.FAMILIES` is the table of them. Writing (`save`) and the
run's key and seed (`train`) are here rather than in `checkpoints` and `training` because
`checkpoints` imports the table: a family's `fit` saves through its own `save`, without a cycle.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path

import torch
from torch import nn

from specatlas.fsutil import build_dir
from specatlas.impls.engine.errors import CheckpointError
from specatlas.impls.engine.head_folders import WEIGHT_FILES
from specatlas.impls.engine.weight_storage import pack
from specatlas.impls.families.blocks import LayerConfig
from specatlas.impls.families.training import Run, positions_after, shared_prompt_prefix, split

# In every head folder the project writes (`Family.save`, `specatlas train`): a later save may replace it.
HEAD_MARKER = ".specatlas-train"
# What a saved head is made of: a later save of any family drops these from the old folder, keeps the rest.
HEAD_FILES = frozenset({*WEIGHT_FILES, "config.json", "README.md", "training.json"})


def earlier_head(folder: Path) -> bool:
    """A head saved before the marker existed: its model card's training.json is there."""
    return (folder / "training.json").is_file()


class Family:
    name = ""
    folder = ""  # the shipped folder's family when it is another's (FR-Spec writes beside the EAGLE head)
    default_steps = 0
    # What the checkpoint loader and `specatlas train` read; not training settings (left out of the run key).
    title = ""  # the family as messages name it
    paper, aliases = "", ()  # `specatlas train PAPER|ALIAS`
    uses_draft_model = False  # trains on a draft model's states: `train` takes the draft model
    weight_file = "model.safetensors"  # the file `save` writes
    _not_settings = ("title", "paper", "aliases", "weight_file", "uses_draft_model")

    # ----------------------------------------------------------------------------------------
    # Checkpoints

    @staticmethod
    def check_sizes(config: dict, target, what: str) -> None:
        """A checkpoint trained for another hidden size or vocabulary than `target`'s: one line naming `what`."""
        hidden, vocab = target.config.hidden_size, target.config.vocab_size
        if config.get("hidden_size", hidden) != hidden or config.get("vocab_size", vocab) != vocab:
            raise CheckpointError(f"{what} for hidden size {config.get('hidden_size')} and "
                                  f"{config.get('vocab_size')} tokens, the target has {hidden} and {vocab}")

    def detect(self, weights: dict, config: dict) -> tuple[str, dict] | None:
        """(layout, weights renamed to this family's module keys) when `weights` are this family's; else None."""
        return None

    def build(self, weights: dict, config: dict, target) -> tuple[nn.Module, tuple[int, ...]]:
        """The module for these detected weights (not loaded yet) and the target states it reads
        (`kv.forward`'s numbering); a `CheckpointError` when it cannot serve `target`."""
        raise NotImplementedError

    def config_for(self, head: nn.Module, target) -> dict:
        """The config.json the family's reference code writes (our base model name is added by `save`)."""
        raise NotImplementedError

    def describe(self, config: dict) -> str:
        """What the saved module is, for its model card."""
        raise NotImplementedError

    def save(self, head: nn.Module, folder: Path, target, base_model: str, extra: dict | None = None,
             card: dict | None = None) -> Path:
        """Write `head` in the family's published key layout, stored as `weight_storage.pack` does
        (int8 matrices with float16 row scales), with config.json (+ README.md card).
        The folder is made whole at once (fsutil.build_dir): a kill, or another run saving to the
        same folder, leaves one run's head complete, never a mix of two. Files beside it that are no
        head's (FR-Spec's ranking beside the EAGLE head) are kept."""
        from safetensors.torch import save

        weights = save(pack(head.state_dict()), metadata={"format": "pt"})
        config = self.config_for(head, target) | {"base_model_name_or_path": base_model, "torch_dtype": "float16"} \
            | (extra or {})
        files = {self.weight_file: weights, "config.json": json.dumps(config, indent=2) + "\n"}
        if card is not None:
            files |= {"README.md": self.model_card(config, card), "training.json": json.dumps(card, indent=2) + "\n"}
        return self.write(folder, files, keep=lambda name: name not in HEAD_FILES)

    def write(self, folder: Path, files: dict[str, str | bytes], keep) -> Path:
        """`files` (name: text or bytes) written as the head folder `folder` (fsutil.build_dir, with
        the marker `specatlas train` recognises); the old folder's files that `keep` names are carried over."""
        def fill(staging: Path) -> None:
            for name, data in files.items():
                with open(staging / name, "wb") as f:
                    f.write(data.encode("utf-8") if isinstance(data, str) else data)
                    f.flush()
                    os.fsync(f.fileno())

        return build_dir(folder, fill, HEAD_MARKER, f"the {self.name} head", legacy=earlier_head, keep=keep)

    def model_card(self, config: dict, card: dict) -> str:
        held = card["held_out"]
        by_position = ", ".join(f"{x:.3f}" for x in held["acceptance_by_position"])
        extra_rows = (f"\n| The same before training | {held['untrained']['mean_accepted_tokens_chain']} |"
                      if "untrained" in held else "")
        if held.get("drafts_outside_loss_vocabulary_by_position") is not None:
            extra_rows += ("\n| Held-out top-1 drafts outside the loss vocabulary, by draft position (argmax over the "
                          "whole vocabulary; the loss scores the most frequent tokens, `training.LOSS_VOCAB`) | "
                          + ", ".join(f"{x:.3f}" for x in held["drafts_outside_loss_vocabulary_by_position"]) + " |")
        return f"""# {self.name} head for {card['base_model']}

{self.describe(config)}, trained by `specatlas train` {card.get('trained_on', "on the target's own greedy answers (self-distillation)")}.

| | |
|---|---|
| Data | {card['train_conversations']} conversations of {card.get('data_source') or "the target's answers"}, \
{card['train_tokens']} tokens ({card['train_answer_tokens']} of them answer tokens); {card.get('targets', "labels are the target's greedy tokens")} |
| Held out | {card['held_out_conversations']} conversations, {held['positions']} answer positions |
| Training | {card['steps']} steps{_schedule(card)}{_epochs(card)}, {card['train_seconds'] / 60:.1f} min (float32, CPU), final loss {card['final_loss']} |
| Held-out acceptance by draft position (top-1 chain, given the earlier drafts accepted) | {by_position} |
| Held-out mean accepted tokens per step (top-1 chain, bonus token included) | {held['mean_accepted_tokens_chain']} |{extra_rows}
| Weights | int8 matrices with a float16 scale per row, vectors float16 (`weight_storage`; the acceptance above is measured on them), in the family's published key layout (loads with `specatlas.impls.families.checkpoints.load`) |
| torch | {card['torch']} |{_checkout_row(card)}

Reproduce (writes this folder):

```
{card['command']}
```

Loss curve (every few logged intervals): {', '.join(map(str, card['loss_curve']))}
"""

    # ----------------------------------------------------------------------------------------
    # Training

    def layers(self, model) -> tuple[int, ...]:
        """Indices into the target's `hidden_states` the head reads (N: the final normed state); None
        for a target-independent drafter, which reads no target state, not even its greedy tokens."""
        return (model.config.num_hidden_layers,)

    def epoch(self, features, train_ids: list[int]) -> tuple[int, int, str]:
        """The family's data in the unit a step of its `fit` draws: (how many the training
        conversations `train_ids` hold, how many a step draws, the unit). Most families draw whole
        conversations, `conversations` a step; one drawing rows or positions overrides this."""
        if not hasattr(self, "conversations"):
            raise NotImplementedError(f"the {self.name} family draws no `conversations` a step: its `epoch` says what it draws")
        return len(train_ids), self.conversations, "conversations"

    def epoch_steps(self, features, epochs: float, seed: int) -> int:
        """The steps of `epochs` epochs on `features` (`--epochs`): as many draws as `epochs` times
        the training data holds, rounded up. Resolved before training and recorded with the steps,
        so the run stays a step schedule, a function of its config."""
        examples, per_step, _ = self.epoch(features, split(features, seed)[0])
        return max(1, math.ceil(round(epochs * examples / per_step, 9)))  # round: 0.1 * 30 is not 3.0000000000000004 steps

    def train(self, loaded, features, folder, output, budget_minutes, steps, seed, command, progress,
              draft_model=None, stop=None, epochs: float | None = None, code: dict | None = None,
              replace_anyway: bool = False) -> str:
        """Train on `features` (cached in `folder`) and save to `output`. The run is a function of
        its config: the seed fixes the initial weights here and every step's draws in `train_loop`,
        and its resume checkpoint is keyed by the whole config, so a changed seed, schedule, setting
        or data never resumes another run. `stop`: end at that step of the schedule (`Run.stop`).
        `epochs`: what `steps` was resolved from (`epoch_steps`), recorded in the config beside them.
        `code`: the checkout the code came from, for the model card (`Run.code`). `replace_anyway`:
        write over a shipped head that is as good (`Run.replace_anyway`)."""
        data = hashlib.sha256()
        for tokens in features.tokens:
            data.update(tokens.numpy().astype("int64").tobytes() + b"|")
        steps = steps or self.default_steps
        config = {"family": self.name, "settings": self.settings(), "steps": steps, "seed": seed,
                  "data": {"conversations": len(features.tokens), "sha256": data.hexdigest()}}
        if epochs is not None:  # absent otherwise: a --steps run keeps the key it always had
            config["epochs"] = epochs
        key = hashlib.sha256(json.dumps(config, sort_keys=True).encode() + _training_code(self)).hexdigest()[:12]
        torch.manual_seed(seed)
        run = Run(self.name, seed, steps, folder / f"{self.name}-{key}.ckpt", config, draft_model, stop, code, replace_anyway)
        return self.fit(loaded, features, run, output, budget_minutes, command, progress)

    def fit(self, loaded, features, run: Run, output, budget_minutes, command, progress) -> str:
        raise NotImplementedError

    def settings(self) -> dict:
        """The family's hyperparameters (learning rate, batch, heads...), as its attributes say."""
        return {name: value for name in dir(self) if not name.startswith("_") and name not in self._not_settings
                and isinstance(value := getattr(self, name), (bool, int, float, str, tuple))}


def _training_code(family: Family) -> bytes:
    """The source a run of `family` executes: its module and the shared training code. Part of the
    resume checkpoint's key, so a run never resumes one that code since changed saved (the config
    alone would not tell a changed loss)."""
    modules = (sys.modules[type(family).__module__], sys.modules[__name__], sys.modules[Run.__module__],
               sys.modules[LayerConfig.__module__])
    return b"".join(hashlib.sha256(Path(module.__file__).read_bytes()).digest() for module in modules)


def positions_epoch(family: Family, features, train_ids: list[int]) -> tuple[int, int, str]:
    """`Family.epoch` of a family that draws `batch` positions a step, with replacement, from every
    position after the shared prompt prefix (Medusa, Hydra, ReDrafter: `epoch = positions_epoch`)."""
    return positions_after(features, train_ids, shared_prompt_prefix(features)), family.batch, "positions"


def _schedule(card: dict) -> str:
    """How the run ended, when the card records it: its schedule ran out, or the time budget stopped it."""
    if card.get("stopped_by") == "budget":
        return f" of {card['planned_steps']} planned (stopped by the time budget; the command below stops at the same step)"
    if card.get("stopped_by") == "stop":
        return f" of {card['planned_steps']} planned (stopped there by --stop-at)"
    return f" (seed {card['config']['seed']})" if "config" in card else ""


def _checkout_row(card: dict) -> str:
    """The card's row for the checkout that trained it, when the card records it."""
    if "code" not in card:
        return ""
    commit, dirty = card["code"].get("commit"), card["code"].get("dirty")
    if commit is None:
        return "\n| Code | unknown (no git checkout, or git could not tell) |"
    state = {False: "clean", True: "with uncommitted changes"}.get(dirty, "state unknown")
    return f"\n| Code | commit {commit} ({state}; the shipped heads folder aside) |"


def _epochs(card: dict) -> str:
    """How much of its data the run drew, when the card records it (`training.epochs_seen`)."""
    seen = card.get("epochs_seen")
    if not seen:
        return ""
    asked = f"--epochs {card['config']['epochs']}: " if "epochs" in card.get("config", {}) else ""
    return (f"; {asked}{seen['epochs']} epochs drawn ({seen['per_step']:,} of the {seen['per_epoch']:,} training "
            f"{seen['unit']} a step, at random)")


def layer_config(config: dict, what: str) -> LayerConfig:
    """A checkpoint's decoder-layer shape from its config.json."""
    try:
        return LayerConfig.from_dict(config)
    except KeyError as exc:
        raise CheckpointError(f"config.json lacks {exc.args[0]!r}, needed to build the {what} layer") from None
    except ValueError as exc:
        raise CheckpointError(f"config.json: {exc}, needed to build the {what} layer") from None


def draft_vocabulary(d2t: torch.Tensor, t2d: torch.Tensor | None, draft_vocab: int, vocab: int, what: str) -> torch.Tensor:
    """t2d, the target ids a draft vocabulary maps to, checked against d2t (target id = draft id +
    d2t[draft id], EAGLE-3's map, also ReDrafter's here): one whole-number offset per draft token,
    each landing on a distinct target id inside the vocabulary, in increasing order as EAGLE-3
    writes them. A layout without t2d (vLLM's, ReDrafter's) has it made from d2t. `what` names the
    head in the one-line error."""
    if d2t.dtype.is_floating_point or d2t.dtype == torch.bool or d2t.shape != (draft_vocab,):
        raise CheckpointError(f"{what} d2t must be {draft_vocab} whole-number offsets, got {d2t.dtype} of shape "
                              f"{tuple(d2t.shape)}")
    targets = torch.arange(draft_vocab) + d2t.long()
    if targets.min() < 0 or targets.max() >= vocab or (draft_vocab > 1 and not (targets.diff() > 0).all()):
        raise CheckpointError(f"{what} d2t maps draft ids outside the target's vocabulary of {vocab} or onto "
                              "the same target id twice")
    mapped = torch.zeros(vocab, dtype=torch.bool)
    mapped[targets] = True
    if t2d is not None and (t2d.shape != (vocab,) or not torch.equal(t2d.bool(), mapped)):
        raise CheckpointError(f"{what} t2d does not mark the {draft_vocab} target ids d2t maps to (a mask over "
                              f"the target's vocabulary of {vocab})")
    return mapped if t2d is None else t2d
