"""What a trained-head folder holds, and how a result row names the shipped ones it loaded.

Importable without torch: which weights a run written before results recorded them used is read
from its result file and git (`specatlas.bench.earlier_weights`), and the leaderboard names the
heads whose weights are unknown, on a machine that may have no engine installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from specatlas.fsutil import WriteError

# Where the shipped heads are in the repository (`SHIPPED_HEADS` in a checkout): what git is asked about.
SHIPPED_IN_REPOSITORY = "reference_impls/trained_heads"
SHIPPED_HEADS = Path(__file__).resolve().parent.parent / "trained_heads"  # beside the code that loads them
# The weight files a head folder may hold, in the order the checkpoint loader looks for them.
WEIGHT_FILES = ("model.safetensors", "medusa_lm_head.safetensors", "pytorch_model.bin", "medusa_lm_head.pt",
                "hydra_lm_head.pt", "model.pt")
_SHIPPED = re.compile(r"checkpoint ([\w.-]+) \(shipped\)")


def weight_file(present: Callable[[str], bool]) -> str | None:
    """The file a head folder's weights are read from: the first of `WEIGHT_FILES` that `present` finds."""
    return next((name for name in WEIGHT_FILES if present(name)), None)


def shipped_label(layout: str, name: str) -> str:
    """How a shipped head is named in a method's setup: by its folder, never by this machine's path."""
    return f"{layout} checkpoint {name} (shipped)"


def shipped_in(setup: str) -> list[str]:
    """The folders of the shipped heads a result row's setup names (`shipped_label`), sorted: what it
    loaded, for result files written before rows recorded their weights (`results.Method.weights`)."""
    return sorted(set(_SHIPPED.findall(setup)))


def keep_better(name: str, output: Path, accuracy: dict) -> None:
    """Refuse (a `WriteError`) to replace the head shipped in `output` unless the retrained one's
    held-out mean accepted tokens beat its model card's: every committed retrain stays in the git
    history, so one that is no better only grows the repository. A folder outside the shipped heads,
    or with no readable card, is written as before."""
    if output.resolve().parent != SHIPPED_HEADS.resolve():
        return
    try:
        shipped = json.loads((output / "training.json").read_text(encoding="utf-8"))["held_out"]["mean_accepted_tokens_chain"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    new = accuracy["mean_accepted_tokens_chain"]
    if isinstance(shipped, (int, float)) and new <= shipped:
        raise WriteError(f"{output}: kept the shipped {name} head: the retrained one's held-out mean accepted tokens, "
                         f"{new}, are no better than its card's {shipped}; the same command with --replace-anyway "
                         "writes it (resuming from this run's saved state, no training again)")
