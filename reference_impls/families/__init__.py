"""The trained-head families, one module each, and the one table of them.

A family (`base.Family`) is defined once, in its module: its `nn.Module`, how its checkpoints are
detected, built and written (config.json, model-card wording, weight file), how it is trained
and evaluated. `checkpoints.load` detects a checkpoint's family by asking each in turn, and
`specatlas train` offers every family here. Adding one is a new module and a line below.
"""

from specatlas.impls.families.base import Family
from specatlas.impls.families.dflash import DFlashCPUFamily, DFlashFamily
from specatlas.impls.families.distillspec import DistillFamily
from specatlas.impls.families.eagle import EagleFamily
from specatlas.impls.families.eagle3 import Eagle3Family
from specatlas.impls.families.fr_spec import FrSpecFamily
from specatlas.impls.families.hydra import HydraFamily
from specatlas.impls.families.kangaroo import KangarooFamily
from specatlas.impls.families.medusa import MedusaFamily
from specatlas.impls.families.pard import ConfidenceAdaptiveFamily, ParallelFamily
from specatlas.impls.families.pass_tokens import PassFamily
from specatlas.impls.families.redrafter import ReDrafterFamily
from specatlas.impls.families.specdecpp import SpecDecFamily

FAMILIES: dict[str, Family] = {family.name: family for family in (
    MedusaFamily(), HydraFamily(), EagleFamily(), Eagle3Family(), KangarooFamily(), DistillFamily(), FrSpecFamily(),
    PassFamily(), SpecDecFamily(), ReDrafterFamily(), ParallelFamily(), ConfidenceAdaptiveFamily(),
    DFlashFamily(), DFlashCPUFamily())}
