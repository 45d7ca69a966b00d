"""Graph passes of the compiler, with torch.fx's ``PassResult(graph_module, modified)`` contract.

``to_executorch`` runs an explicit, ordered list of them (see ``exir/lowering.py``).
"""

from torch.fx.passes.infra.pass_base import PassBase, PassResult

from .memory_planning_pass import MemoryPlanningPass

__all__ = ["MemoryPlanningPass", "PassBase", "PassResult"]
