"""The Cortex-M passes (ExecuTorch's ``backends/cortex_m/passes`` names)."""

from .activation import ActivationFusionPass, QuantizedClampActivationPass
from .cortex_m_pass_manager import CortexMPassManager
from .lowering import AtenToCortexMPass
from .qparams import FoldAndAnnotateQParamsPass
from .remove_getitem import RemoveGetItemPass
from .replace_quant_nodes_pass import ReplaceQuantNodesPass

__all__ = ["ActivationFusionPass", "AtenToCortexMPass", "CortexMPassManager",
           "FoldAndAnnotateQParamsPass", "QuantizedClampActivationPass", "RemoveGetItemPass",
           "ReplaceQuantNodesPass"]
