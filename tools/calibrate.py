"""`specatlas calibrate`: what one target forward costs on this machine, by how many new tokens it
scores (the curve the cost-aware policy sizes drafts with), and the matrix-product kernel each
layer shape uses at each row count (`cpu_kernels`, measured once per machine and cached). With
`--kernels default` the curve is timed on torch's own kernels instead (what transformers runs as
shipped), with `both` side by side: what the measured choice changes. `--context` sets how many
tokens are cached before the timed forwards (the policy times 64 and 1,024: attention over a
long context makes wide forwards dearer; see `draft_length.calibrate_contexts`)."""

from __future__ import annotations

import argparse
from contextlib import nullcontext

from specatlas.cli import CommandError, add_trust_remote_code, number
from specatlas.impls.engine.draft_length import CONTEXTS

MEASURED, DEFAULT, BOTH = "measured", "default", "both"
KERNELS = (MEASURED, DEFAULT, BOTH)

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="local HF folder or hub id (default: the embedded model)")
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--max-width", type=number(int, 1, 512), default=64, help="widest forward to time, in new tokens (default 64)")
    parser.add_argument("--context", type=number(int, 1, 1_000_000), default=CONTEXTS[0],
                        help=f"tokens cached before each timed forward (default {CONTEXTS[0]}; the cost-aware policy "
                             f"also times {', '.join(map(str, CONTEXTS[1:]))})")
    parser.add_argument("--kernels", choices=KERNELS, default=MEASURED,
                        help=f"time the forwards on the kernels chosen by measurement on this machine ({MEASURED}, what "
                             f"the decoders use), on torch's own ({DEFAULT}), or {BOTH} side by side (default {MEASURED})")
    add_trust_remote_code(parser)


def execute(args: argparse.Namespace) -> int:
    from specatlas.impls.engine import cpu_kernels
    from specatlas.impls.engine.draft_length import calibrate, relative
    from specatlas.impls.engine.models import ModelLoadError, load_model, machine_kernels, pick_device

    try:
        loaded = load_model(args.model, device=pick_device(args.device), trust_remote_code=args.trust_remote_code,
                            kernels=machine_kernels())
    except (ModelLoadError, ValueError) as exc:
        raise CommandError(str(exc), status=1) from None
    model = loaded.model
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions and args.context + args.max_width > positions:
        raise CommandError(f"--context {args.context} + --max-width {args.max_width} is past {loaded.name}'s "
                           f"{positions} positions")
    curves = {}
    for kernels in (DEFAULT, MEASURED) if args.kernels == BOTH else (args.kernels,):
        with cpu_kernels.default_kernels(model) if kernels == DEFAULT else nullcontext():
            curves[kernels] = calibrate(model, args.max_width, args.context, widths=range(1, args.max_width + 1))
    here = cpu_kernels.machine()
    print(f"{loaded.name} on {model.device} ({model.dtype}), {here['cpu']}, {here['threads']} threads, "
          f"forwards after {args.context} cached tokens")
    if DEFAULT in curves:
        print(f"kernels, {DEFAULT}: torch's own ({cpu_kernels.DEFAULT} on CPU) everywhere")
    if MEASURED in curves:
        print(f"kernels, {MEASURED}: {cpu_kernels.describe(model)}")
    print("new tokens | " + " | ".join(f"{name}: ms per forward | x one-token step" for name in curves))
    ratios = {name: relative(seconds) for name, seconds in curves.items()}
    for width in range(1, args.max_width + 1):
        print(f"{width:>10} | " + " | ".join(f"{curves[name][width] * 1e3:>{len(name) + 16}.2f} | {ratios[name][width]:>16.2f}"
                                            for name in curves))
    return 0
