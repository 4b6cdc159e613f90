"""`specatlas recall`: the catalog's recall per quarter, by capture-recapture of two blind sweeps
(`specatlas.catalog.capture_recapture` estimates it and states the method and its assumptions)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specatlas.catalog.capture_recapture import SWEEPS, SweepError, estimate, latest_round, read_sweeps


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sweeps", type=Path, help="folder of the two sweep-*.yaml files (default: the newest "
                        "round under tools/catalog/recall/)")
    parser.add_argument("--json", action="store_true", help="the whole estimate, missing papers included")


def execute(args: argparse.Namespace) -> int:
    from specatlas.cli import CommandError

    from specatlas.catalog.validate import validate

    _, records, _ = validate()
    try:
        folder = args.sweeps or latest_round()
        if folder is None:
            raise SweepError(f"{SWEEPS}: no round-<n> folder of sweeps")
        result = estimate([r.paper for r in records if r.paper], read_sweeps(folder))
    except SweepError as exc:
        raise CommandError(str(exc), status=1) from None
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    sweeps = [f"{name} ({about['papers']} papers, ended {about['ended']})" for name, about in result["sweeps"].items()]
    print(f"sweeps: {', '.join(sweeps)}")
    print(f"{'quarter':8} {'A':>4} {'B':>4} {'both':>5} {'found':>6} {'N (95% CI)':>16} {'catalogued':>11} "
          f"{'share (95% CI)':>22} {'records':>8} {'recall (95% CI)':>22}")
    for q, row in result["quarters"].items():
        n, low, high = row["field_size"]
        print(f"{q:8} {row['sweep_a']:>4} {row['sweep_b']:>4} {row['both']:>5} {row['found']:>6} "
              f"{n:>5.0f} ({low:.0f}-{high:.0f}){'':>3} {row['catalogued']:>11} {_percent(row['share_catalogued']):>22} "
              f"{row['records']:>8} {_percent(row['recall']):>22}")
    return 0


def _percent(interval: list[float]) -> str:
    point, low, high = interval
    return f"{point:.1%} ({low:.1%}-{high:.1%})"
