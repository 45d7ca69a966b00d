"""ExecuTorch's path of the lowered (delegated) module and its helpers; the code lives in
``edgetorch.exir.backend.lowered_backend_module``."""

from .backend.lowered_backend_module import (
    LoweredBackendModule,
    executorch_call_delegate,
    get_lowered_backend_modules,
    get_lowered_submodules,
)

__all__ = ["LoweredBackendModule", "executorch_call_delegate", "get_lowered_backend_modules",
           "get_lowered_submodules"]
