"""The Arm passes ExecuTorch's ``backends/arm/_passes`` names: the annotation pipeline
(``ArmPassManager``), the pass helpers, and the Q/DQ folding pass the Cortex-M flow shares."""

from ...cortex_m.passes.qparams import FoldAndAnnotateQParamsPass
from .arm_pass_manager import ArmPassManager

__all__ = ["ArmPassManager", "FoldAndAnnotateQParamsPass"]
