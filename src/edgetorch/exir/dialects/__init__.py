"""ExecuTorch's operator dialects: ``from edgetorch.exir.dialects._ops import ops as exir_ops``."""
