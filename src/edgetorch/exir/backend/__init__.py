"""The backend-authoring API, with ExecuTorch's names (``executorch.exir.backend``).

Write a backend as a ``BackendDetails`` subclass (its ``preprocess`` compiles an Edge
subgraph to bytes) plus a ``Partitioner`` that tags what it takes; lower with
``to_backend``, ``EdgeProgramManager.to_backend`` or ``to_edge_transform_and_lower``.
``docs/writing-a-backend.md`` walks through one.
"""

from .backend_api import to_backend
from .backend_details import BACKEND_DETAILS, BackendDetails, PreprocessResult, get_backend_details
from .compile_spec_schema import CompileSpec
from .lowered_backend_module import (
    LoweredBackendModule,
    executorch_call_delegate,
    get_lowered_submodules,
)
from .partitioner import DelegationSpec, Partitioner, PartitionResult

__all__ = [
    "BACKEND_DETAILS",
    "BackendDetails",
    "CompileSpec",
    "DelegationSpec",
    "LoweredBackendModule",
    "PartitionResult",
    "Partitioner",
    "PreprocessResult",
    "executorch_call_delegate",
    "get_backend_details",
    "get_lowered_submodules",
    "to_backend",
]
