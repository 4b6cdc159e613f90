"""Multi-row matrix products on CPU through oneDNN, with every weight packed once.

Speculative decoding lives on forwards over a few new tokens. On CPU, torch's default float32
GEMM repacks the weight on every call once a product has 4 or more rows, so on SmolLM2-135M
(2 cores) a forward over 4 new tokens costs ~1.55x a one-token step where one over 3 costs ~1.15x.
oneDNN with the weight packed ahead of time (what torch's own inductor does when it freezes a
model) removes the repacking. Below 4 rows the default kernel is the faster one, and above 32
(a prefill) the default GEMM amortises its packing and is ~8% faster: both keep it. Measured in
one session: a forward over 4 / 8 / 12 new tokens costs 44 / 53 / 57 ms instead of 50 / 61 / 71 ms
(a one-token step: 32 ms either way). Applied to the target model as
loaded, so every decoder on it, the baseline and transformers' own `generate` included, gets it.
"""

from __future__ import annotations

import types
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as F

MIN_ROWS, MAX_ROWS = 4, 32
_suspended = 0  # > 0 inside `default_kernels()`


def available() -> bool:
    """Whether this torch build has the oneDNN ops and they agree with the default kernel."""
    try:
        weight, x = torch.randn(48, 32), torch.randn(8, 32)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
        out = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
    except (AttributeError, RuntimeError):
        return False
    return bool(torch.allclose(out, F.linear(x, weight), rtol=1e-4, atol=1e-4))


def pack_linears(model: nn.Module) -> int:
    """Route the float32 CPU `nn.Linear` layers of `model` through packed oneDNN weights for
    products of `MIN_ROWS` to `MAX_ROWS` rows. Returns how many layers were packed (0: unavailable)."""
    if not torch.backends.mkldnn.is_available() or not available():
        return 0
    count = 0
    for module in model.modules():
        if (isinstance(module, nn.Linear) and module.weight.dtype == torch.float32
                and module.weight.device.type == "cpu" and not hasattr(module, "packed_weight")):
            module.packed_weight = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), None)
            module.forward = types.MethodType(_packed_forward, module)
            count += 1
    return count


@contextmanager
def default_kernels():
    """Packed layers use the default kernel while inside: how transformers as shipped runs."""
    global _suspended
    _suspended += 1
    try:
        yield
    finally:
        _suspended -= 1


def packed_layers(model: nn.Module) -> int:
    return sum(hasattr(module, "packed_weight") for module in model.modules())


def _packed_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1]
    if _suspended or not MIN_ROWS <= rows <= MAX_ROWS:
        return F.linear(x, self.weight, self.bias)
    out = torch.ops.mkldnn._linear_pointwise(x.reshape(rows, x.shape[-1]), self.packed_weight, self.bias,
                                             "none", [], "")
    return out.reshape(*x.shape[:-1], out.shape[-1])
