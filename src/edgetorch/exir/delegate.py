"""ExecuTorch's path of the delegate-call operator (``exir.delegate``):
``executorch_call_delegate(lowered_module, *inputs)``, torch's higher-order operator."""

from .backend.lowered_backend_module import executorch_call_delegate

__all__ = ["executorch_call_delegate"]
