"""The backend dialect: custom operators a backend fuses patterns into (``exir_ops.backend``)."""

from ._ops import BackendOpOverload, BackendOpOverloadPacket

__all__ = ["BackendOpOverload", "BackendOpOverloadPacket"]
