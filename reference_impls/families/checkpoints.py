"""Draft-head checkpoints in the layouts people download: EAGLE-1/2, EAGLE-3, Medusa v1 and v2,
Hydra, ReDrafter (also vLLM's and the speculators library's renames of them). See reference_impls/CHECKPOINT_FORMATS.md.

`load(source, target)` reads a local folder or a hub id (config.json + safetensors, or a .bin/.pt
read with `torch.load(weights_only=True)`), detects the layout from the keys, builds the head, and
checks it against the target: hidden size, vocabulary and (when the checkpoint names one) base
model. Any problem is a `CheckpointError` with one line naming the missing or unexpected keys or
the mismatched shape: a checkpoint never half-loads onto random weights. Each layout's detection
and building is its family's (`families/`), which also writes it (`Family.save`, with a model
card; matrices int8, `weight_storage`). `load_head` is what methods call:
the given checkpoint, else the head shipped for the embedded model in `SHIPPED_HEADS`. A loaded
checkpoint names the weight file it was read from (`DraftCheckpoint.files`), which the method's
builder returns on its decoder (`SpeculativeDecoder.weights`) and `specatlas bench` records per
result row (a shipped head is retrained from time to time: a row must say which weights it measured).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from specatlas.fsutil import ReadError, read_json
from specatlas.impls.engine.errors import CheckpointError, ModelLoadError, first_line, unpickle_failure
from specatlas.impls.engine.head_folders import SHIPPED_HEADS, WEIGHT_FILES, shipped_label, weight_file
from specatlas.impls.families import FAMILIES, Family
from specatlas.impls.engine.models import EMBEDDED, _hub_reachable
from specatlas.impls.engine.weight_storage import StorageError, unpack

# The heads, adapters and drafter trained for the embedded model, one folder per family:
# `<EMBEDDED>-<family>` (`shipped_head_folder`). Tests point it elsewhere.


class HeadNotShipped(ModelLoadError):
    """The embedded model's trained head (or FR-Spec's token ranking) is not in `trained_heads/` yet."""


@dataclass
class DraftCheckpoint:
    family: str  # its `families.FAMILIES` name: "medusa", "hydra", "eagle" (EAGLE-1/2), "eagle3"...
    layout: str  # the published layout it was read from, e.g. "medusa-v1", "vllm-eagle3"
    head: nn.Module
    config: dict
    hidden_layers: tuple[int, ...]  # the target states the head reads (`kv.forward`'s numbering)
    source: str
    weights: Path  # the file its weights were read from

    @property
    def files(self) -> dict[str, Path]:
        """The file it was loaded from, by its name: what a method built on it returns as its provenance."""
        return {self.name: self.weights}

    @property
    def shipped(self) -> bool:
        return Path(self.source).resolve().parent == SHIPPED_HEADS

    @property
    def name(self) -> str:
        """How results name it: a shipped head by its folder (never this machine's path), any other as given."""
        return Path(self.source).resolve().name if self.shipped else self.source

    def describe(self) -> str:
        return shipped_label(self.layout, self.name) if self.shipped else f"{self.layout} checkpoint {self.source}"


# --------------------------------------------------------------------------------------------
# Reading


def load(source: str | Path, target: nn.Module, base_model: str | None = None) -> DraftCheckpoint:
    """A draft head for `target` from a folder or hub id. `base_model`: the name the target was
    loaded as, compared with the checkpoint's base model when it names one."""
    folder = _locate(str(source))
    config = _read_config(folder)
    _check_sizes(config, target, folder)
    path, weights = _read_weights(folder)
    family, layout, weights = _detect(weights, config, folder)
    try:
        head, hidden_layers = family.build(weights, config, target)
    except CheckpointError as exc:
        raise CheckpointError(f"{folder}: {exc}") from None
    _check_keys(head, weights, layout, folder)
    _check_base(config, base_model, target)
    head.load_state_dict({key: value.to(torch.float32) if value.is_floating_point() else value
                          for key, value in weights.items()}, strict=True)
    parameter = next(target.parameters())
    head.to(device=parameter.device, dtype=parameter.dtype).eval().requires_grad_(False)
    return DraftCheckpoint(family.name, layout, head, config, hidden_layers, str(source), path)


def shipped_head_folder(family: str) -> Path:
    """Where the `family` head trained for the embedded model ships."""
    return SHIPPED_HEADS / f"{EMBEDDED}-{family}"


def load_head(target, family: str, drafter_checkpoint=None, folder: str = "") -> DraftCheckpoint:
    """The head for `target`: a given checkpoint, else the one shipped for the embedded model (in
    `folder`'s shipped folder where a variant trains its own `family` head); a `ModelLoadError`
    (`HeadNotShipped` when it is not shipped yet) with one line otherwise."""
    source = drafter_checkpoint or shipped_head_folder(folder or family)
    if drafter_checkpoint is None and not source.is_dir():
        raise HeadNotShipped(f"no trained {folder or family} head is shipped yet; train one with "
                             f"`specatlas train {folder or family}` or pass --drafter-checkpoint")
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


CONFIG_BYTES = 1 << 20  # a draft head's config.json is a few hundred bytes


def _read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{folder}: no config.json")
    try:
        config = read_json(path, CONFIG_BYTES)
    except ReadError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    return config


def _check_sizes(config: dict, target, folder: Path) -> None:
    """Every size a family builds its module from, bounded by the target's before anything is
    allocated: a small config.json must not ask for gigabytes (a million heads, a vocabulary of 10^9)."""
    hidden, vocab, layers = (target.config.hidden_size, target.config.vocab_size, target.config.num_hidden_layers)
    # hidden_size and vocab_size must equal the target's: each family checks that first, in its own words.
    bounds = {"medusa_num_heads": 64, "hydra_num_heads": 64, "medusa_num_layers": 16, "hydra_num_layers": 16,
              "num_hidden_layers": layers, "exit_layer": layers, "intermediate_size": 16 * hidden,
              "num_attention_heads": hidden, "num_key_value_heads": hidden, "head_dim": hidden, "draft_vocab_size": vocab,
              "num_draft_layers": 16, "exit_dim": 16 * hidden}
    for key, bound in bounds.items():
        value = config.get(key)
        if value is not None and (type(value) is not int or not 0 < value <= bound):
            raise CheckpointError(f"{folder / 'config.json'}: {key} = {str(value)[:40]} is not a size from 1 to "
                                  f"{bound} (the most this target allows)")


def _read_weights(folder: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    """(the file read, its tensors)."""
    name = weight_file(lambda candidate: (folder / candidate).is_file())
    if name is None:
        raise CheckpointError(f"{folder}: no weights (looked for {', '.join(WEIGHT_FILES)})")
    path = folder / name
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
    try:
        return path, unpack(weights)  # the int8 matrices the project's own heads are stored as
    except StorageError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def _detect(weights: dict, config: dict, folder: Path) -> tuple[Family, str, dict]:
    """(family, layout, weights renamed to our modules' keys, which are the reference layouts)."""
    for family in FAMILIES.values():
        try:
            found = family.detect(weights, config)
        except CheckpointError as exc:
            raise CheckpointError(f"{folder}: {exc}") from None
        if found is not None:
            return family, *found
    shown = ", ".join(sorted(weights)[:4])
    titles = [family.title for family in FAMILIES.values() if family.title]
    raise CheckpointError(f"{folder}: not a {', '.join(titles[:-1])} or {titles[-1]} checkpoint (keys start: {shown})")


def _check_keys(head: nn.Module, weights: dict, layout: str, folder: Path) -> None:
    state = head.state_dict()
    expected = {key: value.shape for key, value in state.items()}
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
        # Loading casts silently: integer weights would become floats, float offsets would be truncated.
        if _kind(weights[key]) != _kind(state[key]):
            raise CheckpointError(f"{folder} ({layout}): {key} holds {weights[key].dtype}, expected {_kind(state[key])}")
        if weights[key].is_floating_point() and not torch.isfinite(weights[key]).all():
            raise CheckpointError(f"{folder} ({layout}): {key} holds NaN or infinite values")


def _kind(tensor: torch.Tensor) -> str:
    return "floating-point numbers" if tensor.is_floating_point() else "booleans" if tensor.dtype == torch.bool \
        else "whole numbers"


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
