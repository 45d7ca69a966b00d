"""The ahead-of-time compiler: ``to_edge`` -> ``EdgeProgramManager`` -> ``to_executorch``.

Names and call shapes are ExecuTorch's (``executorch.exir``), so scripts written for ExecuTorch
run after renaming the import.
"""

from typing import Any

from torch.export import ExportedProgram

from .capture import CaptureConfig, capture  # noqa: F401  (legacy API; ``exir.capture(...)``)
from .config import EdgeCompileConfig, ExecutorchBackendConfig
from .memory_planning import MemoryPlan
from .passes import MemoryPlanningPass
from .program import (
    EdgeProgramManager,
    ExecutorchProgramManager,
    to_edge,
    to_edge_transform_and_lower,
)
from .tensor import TensorSpec

# ExecuTorch's annotation for any value a traced model passes around (``exir.Value``).
Value = Any

__all__ = [
    "EdgeCompileConfig",
    "EdgeProgramManager",
    "ExecutorchBackendConfig",
    "ExecutorchProgramManager",
    "ExportedProgram",
    "MemoryPlan",
    "MemoryPlanningPass",
    "TensorSpec",
    "Value",
    "to_edge",
    "to_edge_transform_and_lower",
]
