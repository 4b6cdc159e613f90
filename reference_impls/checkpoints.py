"""Draft-head checkpoints in the layouts people download: EAGLE-1/2, EAGLE-3, Medusa v1 and v2,
Hydra (also vLLM's and the speculators library's renames of them). See reference_impls/CHECKPOINT_FORMATS.md.

`load(source, target)` reads a local folder or a hub id (config.json + safetensors, or a .bin/.pt
read with `torch.load(weights_only=True)`), detects the layout from the keys, builds the head, and
checks it against the target: hidden size, vocabulary and (when the checkpoint names one) base
model. Any problem is a `CheckpointError` with one line naming the missing or unexpected keys or
the mismatched shape: a checkpoint never half-loads onto random weights. `save` writes a head in
its family's published layout (float16) with a model card. `load_head` is what methods call:
the given checkpoint, else the head shipped for the embedded model in `SHIPPED_HEADS`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from specatlas.impls.distilled import DraftLayers
from specatlas.impls.errors import ModelLoadError, first_line, unpickle_failure
from specatlas.impls.heads import Eagle3Head, EagleHead, HydraHeads, KangarooAdapter, LayerConfig, MedusaHeads, eagle3_layers
from specatlas.impls.models import EMBEDDED, _hub_reachable

# The heads, adapters and drafter trained for the embedded model, one folder per family:
# `<EMBEDDED>-<family>` (`shipped_head_folder`). Tests point it elsewhere.
SHIPPED_HEADS = Path(__file__).resolve().parent / "trained_heads"
WEIGHT_FILES = ("model.safetensors", "medusa_lm_head.safetensors", "pytorch_model.bin", "medusa_lm_head.pt",
                "hydra_lm_head.pt", "model.pt")


class CheckpointError(Exception):
    """A draft checkpoint cannot be used with this target; the message is one line for the user."""


class HeadNotShipped(ModelLoadError):
    """The embedded model's trained head (or FR-Spec's token ranking) is not in `trained_heads/` yet."""


@dataclass
class DraftCheckpoint:
    family: str  # "medusa", "hydra", "eagle" (EAGLE-1/2) or "eagle3"
    layout: str  # the published layout it was read from, e.g. "medusa-v1", "vllm-eagle3"
    head: nn.Module
    config: dict
    hidden_layers: tuple[int, ...]  # the target states the head reads (`kv.forward`'s numbering)
    source: str

    def describe(self) -> str:
        # A shipped head is named, not located: results must not record this machine's paths.
        path = Path(self.source).resolve()
        if path.parent == SHIPPED_HEADS:
            return f"{self.layout} checkpoint {path.name} (shipped)"
        return f"{self.layout} checkpoint {self.source}"


# --------------------------------------------------------------------------------------------
# Reading


def load(source: str | Path, target: nn.Module, base_model: str | None = None) -> DraftCheckpoint:
    """A draft head for `target` from a folder or hub id. `base_model`: the name the target was
    loaded as, compared with the checkpoint's base model when it names one."""
    folder = _locate(str(source))
    config = _read_config(folder)
    weights = _read_weights(folder)
    family, layout, weights = _detect(weights, config, folder)
    head, hidden_layers = BUILDERS[family](weights, config, target)
    _check_keys(head, weights, layout, folder)
    _check_base(config, base_model, target)
    head.load_state_dict({key: value.to(torch.float32) if value.is_floating_point() else value
                          for key, value in weights.items()}, strict=True)
    parameter = next(target.parameters())
    head.to(device=parameter.device, dtype=parameter.dtype).eval().requires_grad_(False)
    return DraftCheckpoint(family, layout, head, config, hidden_layers, str(source))


def shipped_head_folder(family: str) -> Path:
    """Where the `family` head trained for the embedded model ships."""
    return SHIPPED_HEADS / f"{EMBEDDED}-{family}"


def load_head(target, family: str, drafter_checkpoint=None) -> DraftCheckpoint:
    """The head for `target`: a given checkpoint, else the one shipped for the embedded model;
    a `ModelLoadError` (`HeadNotShipped` when it is not shipped yet) with one line otherwise."""
    source = drafter_checkpoint or shipped_head_folder(family)
    if drafter_checkpoint is None and not source.is_dir():
        raise HeadNotShipped(f"no trained {family} head is shipped yet; train one with `specatlas train {family}` "
                             "or pass --drafter-checkpoint")
    try:
        checkpoint = load(source, target, None if drafter_checkpoint else EMBEDDED)
    except CheckpointError as exc:
        hint = "" if drafter_checkpoint else " (the shipped head is for the embedded model: pass --drafter-checkpoint)"
        raise ModelLoadError(f"{exc}{hint}") from None
    if checkpoint.family != family:
        raise ModelLoadError(f"{source} is a {checkpoint.family} checkpoint, this method needs {family}")
    return checkpoint


def _locate(source: str) -> Path:
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if path.exists() or source.startswith(("/", ".", "~")) or source.count("/") != 1:
        raise CheckpointError(f"{source}: no such checkpoint folder")
    try:
        from huggingface_hub import snapshot_download

        patterns = ["config.json", *WEIGHT_FILES]
        try:
            return Path(snapshot_download(source, allow_patterns=patterns, local_files_only=True))
        except Exception:
            if not _hub_reachable():
                raise CheckpointError(f"{source}: not a local folder, not in the Hugging Face cache, "
                                      "and the hub is unreachable") from None
            return Path(snapshot_download(source, allow_patterns=patterns))
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"{source}: cannot download ({first_line(exc)})") from None


def _read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{folder}: no config.json")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({first_line(exc)})") from None


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    files = [folder / name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not files:
        raise CheckpointError(f"{folder}: no weights (looked for {', '.join(WEIGHT_FILES)})")
    path = files[0]
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            weights = load_file(str(path))
        else:
            weights = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"{path}: cannot read weights ({unpickle_failure(exc)})") from None
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise CheckpointError(f"{path}: expected a flat dict of tensors")
    return weights


MEDUSA_KEY = re.compile(r"^(\d+)\.(\d+)\.(linear\.weight|linear\.bias|weight)$")
VLLM_MEDUSA_KEY = re.compile(r"^(?:blocks\.(\d+)\.layers\.(\d+)|lm_heads\.(\d+))\.(weight|bias)$")


def _detect(weights: dict, config: dict, folder: Path) -> tuple[str, str, dict]:
    """(family, layout, weights renamed to our modules' keys, which are the reference layouts)."""
    keys = set(weights)
    if any(key.startswith("hydra_mlp.") for key in keys):
        own_vocab = any(key.startswith("hydra_lm_head.") for key in keys)
        return "hydra", "hydra" if own_vocab else "hydra-shared-lm-head", weights
    if any(VLLM_MEDUSA_KEY.match(key) for key in keys):
        renamed = {}
        layers = config.get("num_hidden_layers", config.get("medusa_num_layers", 1))
        for key, value in weights.items():
            match = VLLM_MEDUSA_KEY.match(key)
            if match is None:
                renamed[key] = value  # reported as unexpected
            elif match.group(3) is not None:
                renamed[f"{match.group(3)}.{layers}.weight"] = value
            else:
                renamed[f"{match.group(1)}.{match.group(2)}.linear.{match.group(4)}"] = value
        return "medusa", "vllm-medusa", renamed
    if any(MEDUSA_KEY.match(key) for key in keys):
        layers = config.get("medusa_num_layers", 1)
        own_vocab = any(key.endswith(f".{layers}.weight") and MEDUSA_KEY.match(key) for key in keys)
        return "medusa", "medusa-v1" if own_vocab else "medusa-v2", weights

    layout, renamed = "", {}
    for key, value in weights.items():
        new = key
        if new.startswith("model."):
            new, layout = new[len("model."):], "vllm-"
        if new.startswith("fusion_fc."):
            new, layout = "fc." + new[len("fusion_fc."):], "speculators-"
        renamed[new] = value
    keys = set(renamed)
    if "draft_id_to_target_id" in keys:
        layout = "vllm-"
        renamed["d2t"] = renamed.pop("draft_id_to_target_id")
    if any(key.startswith("layers.0.hidden_norm.") for key in keys):  # vLLM's name for EAGLE-3's midlayer
        layout = "vllm-"
        renamed = {("midlayer." + key[len("layers.0."):] if key.startswith("layers.0.") else key): value
                   for key, value in renamed.items()}
    keys = set(renamed)
    if "d2t" in keys and "t2d" not in keys:  # vLLM drops t2d: it is implied by d2t
        vocab = config.get("vocab_size")
        if vocab is None:
            raise CheckpointError(f"{folder}: EAGLE-3 checkpoint without t2d needs vocab_size in config.json")
        t2d = torch.zeros(vocab, dtype=torch.bool)
        d2t = renamed["d2t"]
        t2d[torch.arange(len(d2t)) + d2t] = True
        renamed["t2d"] = t2d
    if any(key.startswith("midlayer.") for key in renamed):
        return "eagle3", layout + "eagle3", renamed
    if "fc.weight" in renamed and any(key.startswith("layers.0.") for key in renamed):
        return "eagle", layout + "eagle", renamed
    if "draft_vocab" in renamed and any(".mlp." in key for key in renamed):
        return "distillspec", "distillspec", renamed
    if "norm.weight" in renamed and "layers.0.input_layernorm.weight" in renamed and \
            not any(".mlp." in key for key in renamed):
        return "kangaroo", "kangaroo", renamed
    shown = ", ".join(sorted(weights)[:4])
    raise CheckpointError(f"{folder}: not a Medusa, Hydra, EAGLE, EAGLE-3, Kangaroo or DistillSpec checkpoint (keys start: {shown})")


# --------------------------------------------------------------------------------------------
# Building each family from its config and weights


def _target_sizes(target) -> tuple[int, int, int]:
    config = target.config
    return config.hidden_size, config.vocab_size, config.num_hidden_layers


def _medusa(weights: dict, config: dict, target) -> tuple[nn.Module, tuple[int, ...]]:
    hidden, vocab, layers = _target_sizes(target)
    indices = {int(MEDUSA_KEY.match(key).group(1)) for key in weights if MEDUSA_KEY.match(key)}
    num_heads = config.get("medusa_num_heads", config.get("num_heads", len(indices)))
    num_layers = config.get("medusa_num_layers", config.get("num_hidden_layers", 1))
    block = weights.get("0.0.linear.weight")
    if block is not None and block.shape[-1] != hidden:
        raise CheckpointError(f"Medusa heads have hidden size {block.shape[-1]}, the target {hidden}")
    projection = weights.get(f"0.{num_layers}.weight")
    if projection is not None and projection.shape[0] != vocab:
        raise CheckpointError(f"Medusa heads project to {projection.shape[0]} tokens, the target's vocabulary has {vocab}")
    return MedusaHeads(hidden, num_heads, num_layers, vocab if projection is not None else None), (layers,)


HYDRA_KEY = re.compile(r"^hydra_(?:mlp|lm_head)\.(\d+)\.")


def _hydra(weights: dict, config: dict, target) -> tuple[nn.Module, tuple[int, ...]]:
    hidden, vocab, layers = _target_sizes(target)
    arch = config.get("hydra_head_arch", "mlp")
    if arch != "mlp" or not config.get("grounded_heads", True) or config.get("hidden_state_offset", 0):
        raise CheckpointError(f"Hydra heads of arch {arch!r} (grounded_heads: {config.get('grounded_heads')}, "
                              f"hidden_state_offset: {config.get('hidden_state_offset', 0)}) are not supported: "
                              "only grounded MLP heads on the final state")
    block = weights.get("hydra_mlp.0.0.linear.weight")
    if block is not None and block.shape[0] != hidden:
        raise CheckpointError(f"Hydra heads have hidden size {block.shape[0]}, the target {hidden}")
    projection = weights.get("hydra_lm_head.0.weight")
    if projection is not None and projection.shape[0] != vocab:
        raise CheckpointError(f"Hydra heads project to {projection.shape[0]} tokens, the target's vocabulary has {vocab}")
    heads = config.get("hydra_num_heads") or 1 + max(int(m.group(1)) for m in map(HYDRA_KEY.match, weights) if m)
    return HydraHeads(hidden, heads, config.get("hydra_num_layers", 1), vocab if projection is not None else None), \
        (layers,)


def _layer_config(config: dict, folder_hint: str) -> LayerConfig:
    try:
        return LayerConfig.from_dict(config)
    except KeyError as exc:
        raise CheckpointError(f"config.json lacks {exc.args[0]!r}, needed to build the {folder_hint} layer") from None


def _eagle(weights: dict, config: dict, target) -> tuple[nn.Module, tuple[int, ...]]:
    hidden, vocab, layers = _target_sizes(target)
    layer = _layer_config(config, "EAGLE")
    if layer.hidden_size != hidden:
        raise CheckpointError(f"EAGLE head has hidden size {layer.hidden_size}, the target {hidden}")
    if config.get("vocab_size", vocab) != vocab:
        raise CheckpointError(f"EAGLE head was trained for a vocabulary of {config['vocab_size']}, the target has {vocab}")
    return EagleHead(layer, fc_bias=config.get("bias", True)), (layers,)


def _eagle3(weights: dict, config: dict, target) -> tuple[nn.Module, tuple[int, ...]]:
    hidden, vocab, layers = _target_sizes(target)
    layer = _layer_config(config, "EAGLE-3")
    target_hidden = config.get("target_hidden_size") or hidden
    if target_hidden != hidden:
        raise CheckpointError(f"EAGLE-3 head reads target states of size {target_hidden}, the target's are {hidden}")
    t2d = weights.get("t2d")
    if t2d is not None and len(t2d) != vocab:
        raise CheckpointError(f"EAGLE-3 t2d covers a vocabulary of {len(t2d)}, the target has {vocab}")
    draft_vocab = config.get("draft_vocab_size") or config.get("vocab_size", vocab)
    aux = tuple(config.get("eagle_aux_hidden_state_layer_ids") or
                (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or eagle3_layers(layers))
    return Eagle3Head(layer, target_hidden, vocab, draft_vocab), aux


# Kangaroo's released checkpoints do not record the exit layer (its scripts pass --exitlayer 2).
KANGAROO_EXIT_LAYER = 2


def _kangaroo(weights: dict, config: dict, target) -> tuple[nn.Module, tuple[int, ...]]:
    hidden, _, layers = _target_sizes(target)
    layer = _layer_config({**target.config.to_dict(), **config}, "Kangaroo adapter")
    if layer.hidden_size != hidden:
        raise CheckpointError(f"Kangaroo adapter has hidden size {layer.hidden_size}, the target {hidden}")
    exit_layer = config.get("exit_layer", KANGAROO_EXIT_LAYER)
    if not 1 <= exit_layer < layers:
        raise CheckpointError(f"Kangaroo adapter exits after layer {exit_layer}; the target has {layers} layers")
    return KangarooAdapter(layer, draft_vocab_size=len(weights.get("draft_vocab", ()))), (exit_layer,)


def _distillspec(weights: dict, config: dict, target) -> tuple[nn.Module, tuple[int, ...]]:
    hidden, vocab, layers = _target_sizes(target)
    if config.get("hidden_size", hidden) != hidden or config.get("vocab_size", vocab) != vocab:
        raise CheckpointError(f"the drafter's layers were distilled for hidden size {config.get('hidden_size')} and "
                              f"{config.get('vocab_size')} tokens, the target has {hidden} and {vocab}")
    if not 1 <= config.get("num_hidden_layers", 0) < layers:
        raise CheckpointError(f"the drafter needs 1..{layers - 1} layers, its config says {config.get('num_hidden_layers')}")
    return DraftLayers(target, config["num_hidden_layers"], config["draft_vocab_size"]), ()


BUILDERS = {"medusa": _medusa, "hydra": _hydra, "eagle": _eagle, "eagle3": _eagle3, "kangaroo": _kangaroo, "distillspec": _distillspec}


def _check_keys(head: nn.Module, weights: dict, layout: str, folder: Path) -> None:
    expected = {key: value.shape for key, value in head.state_dict().items()}
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    if missing or unexpected:
        parts = ([f"missing keys: {_listing(missing)}"] if missing else []) + \
                ([f"unexpected keys: {_listing(unexpected)}"] if unexpected else [])
        raise CheckpointError(f"{folder} ({layout}): {'; '.join(parts)}")
    for key, shape in expected.items():
        if tuple(weights[key].shape) != tuple(shape):
            raise CheckpointError(f"{folder} ({layout}): {key} has shape {tuple(weights[key].shape)}, "
                                  f"expected {tuple(shape)} for this target")


def _check_base(config: dict, base_model: str | None, target) -> None:
    named = config.get("base_model_name_or_path") or config.get("base_model")
    if not named:
        return
    actual = {_short(name) for name in (base_model, getattr(target.config, "_name_or_path", None),
                                        getattr(target, "name_or_path", None)) if name}
    if actual and _short(named) not in actual:
        raise CheckpointError(f"the checkpoint was trained for {named}, not for {base_model or sorted(actual)[0]}")


def _short(name: str) -> str:
    return str(name).rstrip("/").rsplit("/", 1)[-1].lower()


def _listing(keys: list[str], shown: int = 6) -> str:
    more = f" (+{len(keys) - shown} more)" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


# --------------------------------------------------------------------------------------------
# Writing


def config_for(family: str, head: nn.Module, target, base_model: str, extra: dict | None = None) -> dict:
    """The config.json the family's reference code writes, plus our base model name."""
    hidden, vocab, layers = _target_sizes(target)
    if family == "medusa":
        config = {"medusa_num_heads": len(head), "medusa_num_layers": head.num_layers, "hidden_size": hidden,
                  "vocab_size": vocab}
        if not head.own_vocab:
            config["version"] = "2"
    elif family in ("kangaroo", "distillspec"):  # our layouts: `extra` says what the module is
        config = {"specatlas_family": family, "hidden_size": hidden, "vocab_size": vocab}
        if family == "kangaroo":
            config |= head.config.to_dict()
    elif family == "hydra":  # zankner/Hydra's HydraConfig
        config = {"hydra_num_heads": len(head), "hydra_num_layers": head.num_layers, "hydra_head_arch": "mlp",
                  "grounded_heads": True, "hidden_state_offset": 0, "hidden_size": hidden, "vocab_size": vocab}
    else:
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
                  **head.config.to_dict(), "vocab_size": vocab, "max_position_embeddings":
                  getattr(target.config, "max_position_embeddings", 2048)}
        if family == "eagle":
            config["bias"] = head.fc.bias is not None
        else:
            config |= {"draft_vocab_size": head.lm_head.out_features, "target_hidden_size": hidden,
                       "eagle_aux_hidden_state_layer_ids": list(eagle3_layers(layers))}
    config["base_model_name_or_path"] = base_model
    config["torch_dtype"] = "float16"
    return config | (extra or {})


def save(head: nn.Module, family: str, folder: Path, target, base_model: str, extra: dict | None = None,
         card: dict | None = None) -> Path:
    """Write `head` as `family`'s published layout: config.json + float16 safetensors (+ README.md card)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {key: (value.detach().to(torch.float16) if value.is_floating_point() else value.detach()).contiguous().cpu()
               for key, value in head.state_dict().items()}
    if family == "hydra":  # Hydra's code reads only this file (torch.load)
        torch.save(tensors, folder / "hydra_lm_head.pt")
    else:
        name = "medusa_lm_head.safetensors" if family == "medusa" else "model.safetensors"
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
    config = config_for(family, head, target, base_model, extra)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if card is not None:
        (folder / "README.md").write_text(model_card(family, config, card))
        (folder / "training.json").write_text(json.dumps(card, indent=2) + "\n")
    return folder


def _schedule(card: dict) -> str:
    """How the run ended, when the card records it: its schedule ran out, or the time budget stopped it."""
    if card.get("stopped_by") == "budget":
        return f" of {card['planned_steps']} planned (stopped by the time budget)"
    return f" (seed {card['config']['seed']})" if "config" in card else ""


def model_card(family: str, config: dict, card: dict) -> str:
    held = card["held_out"]
    by_position = ", ".join(f"{x:.3f}" for x in held["acceptance_by_position"])
    untrained = (f"\n| The same before training | {held['untrained']['mean_accepted_tokens_chain']} |"
                 if "untrained" in held else "")
    what = {"medusa": f"{config.get('medusa_num_heads')} Medusa heads (one ResBlock each, reusing the target's LM "
                      "head: Medusa v2 layout)",
            "eagle": "an EAGLE-1/2 draft head (fc over [embedding, feature] + one decoder layer without input norm; "
                     "the target's embeddings and LM head)",
            "hydra": f"{config.get('hydra_num_heads')} Hydra heads (sequentially dependent MLP heads over the final "
                     "state and the embeddings of the tokens before; the target's LM head is reused)",
            "eagle3": f"an EAGLE-3 draft head (fused low/mid/high target states, training-time test; a draft "
                      f"vocabulary of the {config.get('draft_vocab_size')} most frequent target tokens)",
            "kangaroo": f"a Kangaroo adapter (one attention layer and two norms) on the exit after the target's first "
                        f"{config.get('exit_layer')} layers, read by the target's LM head",
            "distillspec": f"a DistillSpec drafter: the target's first {config.get('num_hidden_layers')} decoder layers, "
                           f"distilled; the target's embeddings, final norm and LM head (restricted to "
                           f"{config.get('draft_vocab_size')} tokens) are shared, not shipped"}[family]
    return f"""# {family} head for {card['base_model']}

{what}, trained by `specatlas train` {card.get('trained_on', "on the target's own greedy answers (self-distillation)")}.

| | |
|---|---|
| Data | {card['train_conversations']} conversations of this project's prompt corpus (`specatlas/train_prompts.py`), \
{card['train_tokens']} tokens ({card['train_answer_tokens']} of them answer tokens); {card.get('targets', "labels are the target's greedy tokens")} |
| Held out | {card['held_out_conversations']} conversations, {held['positions']} answer positions |
| Training | {card['steps']} steps{_schedule(card)}, {card['train_seconds'] / 60:.1f} min (float32, CPU), final loss {card['final_loss']} |
| Held-out acceptance by draft position (top-1 chain, given the earlier drafts accepted) | {by_position} |
| Held-out mean accepted tokens per step (top-1 chain, bonus token included) | {held['mean_accepted_tokens_chain']} |{untrained}
| Weights | float16, the family's published layout (loads with `specatlas.impls.checkpoints.load`) |
| torch | {card['torch']} |

Reproduce (writes this folder):

```
{card['command']}
```

Loss curve (every few logged intervals): {', '.join(map(str, card['loss_curve']))}
"""
