"""`specatlas calibrate`: what one target forward costs on this machine, by how many new tokens it
scores (the curve the cost-aware policy sizes drafts with), and the matrix-product kernel each
layer shape uses at each row count (`cpu_kernels`, measured once per machine and cached)."""

from __future__ import annotations

import argparse

from specatlas.cli import CommandError, add_trust_remote_code

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="local HF folder or hub id (default: the embedded model)")
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--max-width", type=int, default=64, help="widest forward to time, in new tokens (default 64)")
    add_trust_remote_code(parser)


def execute(args: argparse.Namespace) -> int:
    if not 1 <= args.max_width <= 512:
        raise CommandError("--max-width must be in 1..512")
    from specatlas.impls.engine import cpu_kernels
    from specatlas.impls.engine.draft_length import calibrate, relative
    from specatlas.impls.engine.models import ModelLoadError, load_model, pick_device

    try:
        loaded = load_model(args.model, device=pick_device(args.device), trust_remote_code=args.trust_remote_code)
    except (ModelLoadError, ValueError) as exc:
        raise CommandError(str(exc), status=1) from None
    model = loaded.model
    seconds = calibrate(model, args.max_width, widths=range(1, args.max_width + 1))
    ratios = relative(seconds)
    here = cpu_kernels.machine()
    print(f"{loaded.name} on {model.device} ({model.dtype}), {here['cpu']}, {here['threads']} threads")
    print(f"kernels: {cpu_kernels.describe(model)}")
    print("new tokens | ms per forward | x one-token step")
    for width, value in seconds.items():
        print(f"{width:>10} | {value * 1e3:>14.2f} | {ratios[width]:>6.2f}")
    return 0
