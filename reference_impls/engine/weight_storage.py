"""How the heads the project trains are stored: matrices as int8 with a float16 scale per row.

A drafter's weights only change which tokens it proposes, never what the target accepts, so they
can be stored coarser than the target's: int8 with one absmax scale per output row halves the
shipped files against float16 while a head's top-1 drafts barely move (each model card's held-out
acceptance is measured on the stored weights: `specatlas train` rounds the module through
`stored` before it evaluates and saves). Vectors (norms, biases) and small tensors stay float16;
integer tensors (a draft vocabulary's token ids) are kept as they are.

In a file, matrix `k` is an I8 tensor `k` beside its F16 scales `k:scale` ([rows, 1]); the other
keys are the family's published layout unchanged. `unpack` is what the checkpoint loader applies to
every file, so checkpoints written elsewhere (float16/32, no `:scale` keys) load as before.
"""

from __future__ import annotations

import torch

SCALE = ":scale"  # a ':' never occurs in a PyTorch parameter name, so no published key can clash
SMALLEST = 4096  # elements: below this a matrix is a few kB and int8 would only add error


class StorageError(ValueError):
    """An int8 tensor without its scales, or scales that do not fit it."""


def pack(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` (a module's state_dict) as the tensors a file holds."""
    out = {}
    for key, value in state.items():
        value = value.detach().cpu()
        if not value.is_floating_point():
            out[key] = value.contiguous()
        elif value.dim() == 2 and value.numel() >= SMALLEST:
            # The scale is rounded to float16 first so the int8 values are computed against the
            # scale the file holds: unpack(pack(w)) is then exactly what a loader reads.
            scale = (value.float().abs().amax(1, keepdim=True) / 127).half()
            safe = torch.where(scale > 0, scale.float(), torch.ones(()))
            out[key] = (value.float() / safe).round().clamp(-127, 127).to(torch.int8).contiguous()
            out[key + SCALE] = scale.contiguous()
        else:
            out[key] = value.half().contiguous()
    return out


def unpack(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state_dict a file's tensors stand for: each int8 matrix times its scales, in float32."""
    out = {}
    for key, value in tensors.items():
        if key.endswith(SCALE):
            scaled = tensors.get(key[: -len(SCALE)])
            if scaled is None or scaled.dtype != torch.int8:
                raise StorageError(f"{key} scales no int8 tensor ({key[: -len(SCALE)]} is "
                                   f"{'missing' if scaled is None else scaled.dtype})")
            continue
        if value.dtype != torch.int8:
            out[key] = value
            continue
        scale = tensors.get(key + SCALE)
        if scale is None:
            raise StorageError(f"{key} is int8 without its scales ({key}{SCALE})")
        if value.dim() != 2 or tuple(scale.shape) != (value.shape[0], 1) or not scale.is_floating_point():
            raise StorageError(f"{key}{SCALE} has shape {tuple(scale.shape)} ({scale.dtype}), "
                               f"expected ({value.shape[0] if value.dim() else '?'}, 1) floats for {key} {tuple(value.shape)}")
        out[key] = value.float() * scale.float()
    return out


@torch.no_grad()
def stored(module: torch.nn.Module) -> torch.nn.Module:
    """`module` with its weights replaced by what `pack` stores of them, in place: what is then
    evaluated is what ships."""
    state = module.state_dict()
    for key, value in unpack(pack(state)).items():
        state[key].copy_(value)
    return module
