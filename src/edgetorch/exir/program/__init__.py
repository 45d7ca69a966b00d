"""``to_edge``, ``to_edge_transform_and_lower`` and the program managers (``_program``), at
ExecuTorch's paths (``executorch.exir.program`` is a package there too)."""

from ._program import (
    EdgeProgramManager,
    ExecutorchProgramManager,
    to_edge,
    to_edge_transform_and_lower,
)

__all__ = [
    "EdgeProgramManager",
    "ExecutorchProgramManager",
    "to_edge",
    "to_edge_transform_and_lower",
]
