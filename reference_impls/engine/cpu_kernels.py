"""Matrix products on CPU through the kernel this machine runs fastest, chosen by measurement.

Speculative decoding lives on forwards over a few new tokens, and on CPU the cost of a float32
product with few rows depends on the kernel far more than on the rows: torch's default GEMM (MKL)
repacks the weight on some calls, and where its small-row paths are slow depends on the CPU. On a
2-core AMD EPYC, SmolLM2's 49,152 x 576 LM head took 15 ms at 1 row but 62-77 ms at 2-3 rows with
MKL, and 12-23 ms with the weight packed once for oneDNN (what torch's inductor does when it freezes
a model); on an Intel machine the packed kernel lost below 4 rows. So nothing is hard-coded: for each
linear shape of a model, `measure` times both kernels at a spread of row counts (`ROWS`), and
`PackedLinear` runs each product through the faster one for its row count. The choices are cached
per CPU model, torch version and thread count in the user cache (`kernels/`), so a machine
measures once (seconds for SmolLM2); `specatlas calibrate` prints them with the forward-cost curve.
The command that loads a model names the choice (`KernelChoice`, `models.load_model(kernels=...)`):
applied to the target as loaded, so every decoder on it, the baseline included, gets them.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from bisect import bisect_right
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from specatlas.fsutil import CACHE_BYTES, ReadError, read_json, update_json

# Row counts measured: every count up to 32, where drafts and trees live (an unmeasured count takes the
# choice of the one below it, and the default kernel's cost jumps between neighbouring counts), then a spread.
ROWS = (*range(1, 33), 48, 64, 96, 128)
DEFAULT, PACKED = "mkl", "onednn-packed"  # torch's default float32 kernel; oneDNN on a weight packed once


def available() -> bool:
    """Whether this torch build has the oneDNN ops and they agree with the default kernel."""
    try:
        weight, x = torch.randn(48, 32), torch.randn(8, 32)
        out = _packed_product(x, torch.ops.mkldnn._reorder_linear_weight(weight, None), None)
    except (AttributeError, RuntimeError):
        return False
    return bool(torch.backends.mkldnn.is_available() and torch.allclose(out, F.linear(x, weight), rtol=1e-4, atol=1e-4))


def _packed_product(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinear(nn.Linear):
    """An `nn.Linear` (same parameters, same state dict) that keeps its weight packed for oneDNN
    as a buffer and sends a product of r rows to the kernel `packed_rows` says is faster here: the
    packed one for the row counts listed (and for counts between or beyond measured ones, as the
    nearest measured count below decides). The packed copy follows the weight through `.to()`:
    repacked for float32 on CPU, dropped otherwise (the default kernel then runs)."""

    def __init__(self, linear: nn.Linear, packed_rows: tuple[int, ...]):
        super().__init__(linear.in_features, linear.out_features, linear.bias is not None, device="meta")
        self.weight, self.bias = linear.weight, linear.bias  # shared, so tied embeddings stay tied
        self.packed_rows = frozenset(packed_rows)
        self.suspended = 0  # > 0 inside `default_kernels` of a model holding this layer
        self.register_buffer("packed", None, persistent=False)
        self._repack()

    def _repack(self) -> None:
        usable = self.weight.device.type == "cpu" and self.weight.dtype == torch.float32 and self.packed_rows
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), None) if usable else None

    def _apply(self, fn, recurse=True):
        self.packed = None  # the packed layout is not a tensor `fn` can convert
        super()._apply(fn, recurse)
        self._repack()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        # The packed kernel has no backward: a gradient through the frozen target (PaSS's training) takes F.linear.
        if self.packed is None or self.suspended or _measured_row(rows) not in self.packed_rows or \
                (x.requires_grad and torch.is_grad_enabled()):
            return F.linear(x, self.weight, self.bias)
        out = _packed_product(x.reshape(rows, x.shape[-1]), self.packed, self.bias)
        return out.reshape(*x.shape[:-1], out.shape[-1])


def _measured_row(rows: int) -> int:
    """The measured row count whose choice stands for `rows`: the nearest one at or below it."""
    return ROWS[max(0, bisect_right(ROWS, rows) - 1)]


def machine() -> dict:
    """What a kernel choice depends on besides the shape."""
    cpu = platform.processor() or platform.machine()
    try:  # Linux names the model; platform.processor() often says only "x86_64"
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "torch": torch.__version__, "threads": torch.get_num_threads()}


def measure(out_features: int, in_features: int, rows=ROWS, rounds: int = 3) -> dict:
    """Milliseconds of a product of r rows with an (out x in) float32 weight, per kernel: the fastest
    of `rounds` timings, kernels interleaved so a burst of load hits both alike."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(out_features, in_features, generator=generator)
    packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
    timings: dict[str, list[float]] = {DEFAULT: [], PACKED: []}
    with torch.inference_mode():
        for r in rows:
            calls = max(1, min(50, int(1e8 // (out_features * in_features * r))))  # ~0.2 GFLOP per timing
            x = torch.randn(r, in_features, generator=generator)
            kernels = {DEFAULT: lambda: F.linear(x, weight), PACKED: lambda: _packed_product(x, packed, None)}
            best = {name: float("inf") for name in kernels}
            for kernel in kernels.values():
                kernel()  # warm-up
            for _ in range(rounds):
                for name, kernel in kernels.items():
                    start = time.perf_counter()
                    for _ in range(calls):
                        kernel()
                    best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e3)
            for name in kernels:
                timings[name].append(round(best[name], 4))
    return {"rows": list(rows), **{f"{name}_ms": values for name, values in timings.items()}}


def packed_rows(timing: dict) -> tuple[int, ...]:
    """The row counts at which the packed kernel measured faster."""
    return tuple(r for r, default, packed in zip(timing["rows"], timing[f"{DEFAULT}_ms"], timing[f"{PACKED}_ms"])
                 if packed < default)


def choices(shapes: set[tuple[int, int]], cache_dir: Path | None) -> dict[str, dict]:
    """The timing of every (out, in) shape on this machine: read from `cache_dir` when measured
    before, else measured now and written there. A damaged cache file is named and measured anew."""
    here = machine()
    key = hashlib.sha256(json.dumps(here, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir / "kernels" / f"{key}.json" if cache_dir else None
    table: dict[str, dict] = {}
    if path and path.is_file():
        try:
            table = _saved_shapes(read_json(path, CACHE_BYTES))
        except ReadError:
            table = None
        if table is None:
            table = {}
            print(f"specatlas: ignoring the damaged kernel choices {path}; measuring again", file=sys.stderr)
    missing = sorted(f"{o}x{i}" for o, i in shapes if f"{o}x{i}" not in table)
    if missing:
        print(f"specatlas: timing matrix-product kernels for {len(missing)} weight shapes on this CPU "
              f"(once{'; cached in ' + str(path.parent) if path else ''})", file=sys.stderr)
        for name in missing:
            table[name] = measure(*map(int, name.split("x")))
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Merged under a lock: shapes another process measured meanwhile are kept.
            update_json(path, lambda saved: {"machine": here, "shapes": (_saved_shapes(saved) or {}) | table})
    return table


def _saved_shapes(saved) -> dict | None:
    """The valid timings of a saved choices file; None when it is not one."""
    try:
        return {name: timing for name, timing in saved["shapes"].items() if _valid(timing)}
    except (KeyError, TypeError, AttributeError):
        return None


def _valid(timing) -> bool:
    numbers = [timing.get(f"{kernel}_ms") for kernel in (DEFAULT, PACKED)]
    return (isinstance(timing, dict) and timing.get("rows") == list(ROWS)
            and all(isinstance(n, list) and len(n) == len(ROWS) and all(isinstance(v, (int, float)) for v in n)
                    for n in numbers))


def pack_linears(model: nn.Module, cache_dir: Path | None = None) -> int:
    """Swap the float32 CPU `nn.Linear` layers of `model` for `PackedLinear`s routed by the kernel
    choices measured on this machine (cached under `cache_dir`). Returns how many layers now use
    the packed kernel for some row count (0: oneDNN unavailable, or never faster here)."""
    if not available():
        return 0
    linears = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if type(child) is nn.Linear and child.weight.dtype == torch.float32 and child.weight.device.type == "cpu"]
    table = choices({(child.out_features, child.in_features) for _, _, child in linears}, cache_dir)
    for parent, name, child in linears:
        rows = packed_rows(table[f"{child.out_features}x{child.in_features}"])
        if rows:
            setattr(parent, name, PackedLinear(child, rows))
    return packed_layers(model)


@dataclass(frozen=True)
class KernelChoice:
    """Which kernels a loaded model's float32 CPU linears run, named by whoever loads it: torch's
    default everywhere (`TORCH_KERNELS`), or each product through the kernel measured faster on this
    machine (`measured`: `pack_linears`, the choices cached under `cache_dir`)."""

    measured: bool = False
    cache_dir: Path | None = None

    def apply(self, model: nn.Module) -> int:
        """Swap `model`'s layers as chosen; how many use the packed kernel for some row count."""
        return pack_linears(model, self.cache_dir) if self.measured else 0


TORCH_KERNELS = KernelChoice()


def repack(model: nn.Module) -> None:
    """Pack again the weights of `model`'s `PackedLinear`s, changed in place (online distillation)."""
    for module in model.modules():
        if isinstance(module, PackedLinear):
            module._repack()


def packed_layers(model: nn.Module) -> int:
    return sum(isinstance(module, PackedLinear) and module.packed is not None for module in model.modules())


def describe(model: nn.Module) -> str:
    """Which kernel each distinct layer shape uses at which row counts, in one line."""
    shapes: dict[str, frozenset] = {}
    for module in model.modules():
        if isinstance(module, PackedLinear) and module.packed is not None:
            shapes[f"{module.out_features}x{module.in_features}"] = module.packed_rows
    if not shapes:
        return f"{DEFAULT} everywhere"
    return "; ".join(f"{shape}: {PACKED} at {_ranges(sorted(rows))} rows" for shape, rows in sorted(shapes.items()))


def _ranges(rows: list[int]) -> str:
    """[1, 2, 3, 5, 6] -> '1-3, 5-6' over the measured row counts."""
    parts, start = [], rows[0]
    for previous, row in zip(rows, rows[1:] + [None]):
        if row is None or ROWS.index(row) != ROWS.index(previous) + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = row
    return ", ".join(parts)


def suspended(model: nn.Module) -> bool:
    """Whether `model`'s packed layers run the default kernel now (inside `default_kernels`)."""
    return any(module.suspended for module in model.modules() if isinstance(module, PackedLinear))


@contextmanager
def default_kernels(*models: nn.Module):
    """The packed layers of `models` use the default kernel while inside: how transformers as
    shipped runs them. Other models, on any thread, keep their kernels."""
    layers = [module for model in models for module in model.modules() if isinstance(module, PackedLinear)]
    for layer in layers:
        layer.suspended += 1
    try:
        yield
    finally:
        for layer in layers:
            layer.suspended -= 1
