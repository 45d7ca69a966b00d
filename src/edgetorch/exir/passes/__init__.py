"""Graph passes of the compiler.

Every internal pass has one shape: ``fn(ep: ExportedProgram) -> bool`` -- it edits ``ep`` (and
its nested graphs) in place and says whether it changed anything; node-local ones are rule
tables run by :func:`rewrite`. User passes are ExecuTorch's shapes (``ExportPass``,
``PassBase``, ``gm -> PassResult`` callables; see ``edgetorch.exir.pass_base``), run by
``EdgeProgramManager.transform`` and ``ExecutorchBackendConfig(passes=...)``; the modules
named as ExecuTorch names them (``cse_pass``, ``remove_noop_pass``...) hold both forms of a
pass, one implementation each.
``to_executorch`` runs an explicit, ordered list of steps (see ``exir/lowering.py``).
"""

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..pass_base import ExportPass
from . import convert_constant_dim_order_pass
from .debug_pass import DebugPass
from .insert_write_back_for_buffers_pass import insert_write_back_for_buffers_pass
from .legalize_portable_dim_order_pass import LegalizePortableDimOrderPass
from .memory_format_ops_pass import MemoryFormatOpsPass
from .memory_planning_pass import MemoryPlanningPass
from .remove_noop_pass import RemoveNoopPass, RemoveToCopyPass
from .remove_unused_parameters_pass import remove_unused_parameters_pass
from .replace_edge_with_backend_pass import EdgeToBackendOpsPass
from .replace_sym_size_op_pass import ReplaceSymSizeOpPass
from .rewrite import rewrite
from .scalar_to_tensor_pass import ScalarToTensorPass
from .spec_prop import SpecPropPass
from .sym_shape_eval_pass import HintBasedSymShapeEvalPass
from .to_out_variant import ToOutVarPass

__all__ = ["DebugPass", "EdgeToBackendOpsPass", "ExportPass", "HintBasedSymShapeEvalPass",
           "LegalizePortableDimOrderPass", "MemoryFormatOpsPass", "MemoryPlanningPass",
           "PassBase", "PassResult", "RemoveNoopPass", "RemoveToCopyPass",
           "ReplaceSymSizeOpPass", "ScalarToTensorPass", "SpecPropPass", "ToOutVarPass",
           "convert_constant_dim_order_pass", "dead_code_elimination_pass",
           "insert_write_back_for_buffers_pass", "propagate_dynamic_shape",
           "remove_unused_parameters_pass", "rewrite"]


def dead_code_elimination_pass(graph_module: torch.fx.GraphModule) -> PassResult:
    """Drop unused nodes from the graph and every nested graph (ExecuTorch's helper)."""
    for sub in graph_module.modules():
        if isinstance(sub, torch.fx.GraphModule):
            sub.graph.eliminate_dead_code()
            sub.recompile()
    return PassResult(graph_module, True)


def propagate_dynamic_shape() -> list:
    """The passes that give every node a ``TensorSpec`` with its upper-bound sizes (ExecuTorch
    uses them to tell delegates the sizes of dynamic tensors)."""
    return [SpecPropPass(), HintBasedSymShapeEvalPass()]
