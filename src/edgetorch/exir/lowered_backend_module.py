"""ExecuTorch's path of the lowered (delegated) module and its helpers; the code lives in
``edgetorch.exir.backend.lowered_backend_module`` and ``edgetorch.exir.backend.subgraph``."""

from .backend.lowered_backend_module import (
    LoweredBackendModule,
    executorch_call_delegate,
    get_lowered_backend_modules,
    get_lowered_submodules,
)
from .backend.subgraph import create_exported_program_from_submodule, create_submodule_from_nodes

__all__ = ["LoweredBackendModule", "create_exported_program_from_submodule",
           "create_submodule_from_nodes", "executorch_call_delegate",
           "get_lowered_backend_modules", "get_lowered_submodules"]
