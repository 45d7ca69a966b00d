"""Graph passes of the compiler.

Every internal pass has one shape: ``fn(ep: ExportedProgram) -> bool`` -- it edits ``ep`` (and
its nested graphs) in place and says whether it changed anything; node-local ones are rule
tables run by :func:`rewrite`. User passes are ExecuTorch's shapes (``ExportPass``,
``PassBase``, ``gm -> PassResult`` callables; see ``edgetorch.exir.pass_base``), run by
``EdgeProgramManager.transform`` and ``ExecutorchBackendConfig(passes=...)``.
``to_executorch`` runs an explicit, ordered list of steps (see ``exir/lowering.py``).
"""

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..pass_base import ExportPass
from .debug_pass import DebugPass
from .legalize_portable_dim_order_pass import LegalizePortableDimOrderPass
from .memory_planning_pass import MemoryPlanningPass
from .rewrite import rewrite
from .scalar_to_tensor_pass import ScalarToTensorPass
from .spec_prop import SpecPropPass
from .sym_shape_eval_pass import HintBasedSymShapeEvalPass
from .to_out_variant import ToOutVarPass

__all__ = ["DebugPass", "ExportPass", "HintBasedSymShapeEvalPass", "LegalizePortableDimOrderPass",
           "MemoryPlanningPass",
           "PassBase", "PassResult", "ScalarToTensorPass", "SpecPropPass", "ToOutVarPass",
           "dead_code_elimination_pass", "rewrite"]


def dead_code_elimination_pass(graph_module: torch.fx.GraphModule) -> PassResult:
    """Drop unused nodes from the graph and every nested graph (ExecuTorch's helper)."""
    for sub in graph_module.modules():
        if isinstance(sub, torch.fx.GraphModule):
            sub.graph.eliminate_dead_code()
            sub.recompile()
    return PassResult(graph_module, True)
