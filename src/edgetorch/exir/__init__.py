"""The ahead-of-time compiler: ``to_edge`` -> ``EdgeProgramManager`` -> ``to_executorch``.

Names and call shapes are ExecuTorch's (``executorch.exir``), so scripts written for ExecuTorch
run after renaming the import.
"""

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

__all__ = [
    "EdgeCompileConfig",
    "EdgeProgramManager",
    "ExecutorchBackendConfig",
    "ExecutorchProgramManager",
    "ExportedProgram",
    "MemoryPlan",
    "MemoryPlanningPass",
    "TensorSpec",
    "to_edge",
    "to_edge_transform_and_lower",
]
