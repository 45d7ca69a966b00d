"""The Edge dialect: ATen operators with ExecuTorch's dtype rules (``exir_ops.edge``)."""

from ._ops import EdgeOpOverload, EdgeOpOverloadPacket

__all__ = ["EdgeOpOverload", "EdgeOpOverloadPacket"]
