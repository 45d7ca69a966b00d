"""Backend-dialect operators: custom ops that stand for a pattern of Edge ops.

A backend op is an Edge op of a library registered as a backend namespace (by
``bind_pattern_to_op`` or listed in ``BACKEND_NAMESPACES``); it must have a kernel torch can
trace (CompositeExplicitAutograd, CompositeImplicitAutograd or Meta), and remembers the
Python function of the pattern it replaces (``_equivalent_callable``).
"""

from __future__ import annotations

from torch._C import DispatchKey
from torch._ops import OpOverload

from ..edge._ops import EdgeOpOverload, EdgeOpOverloadPacket

#: Namespaces whose operators may be reached through ``exir_ops.backend``.
BACKEND_NAMESPACES: list[str] = ["executorch_prim", "quantized_decomposed", "DO_NOT_USE_TEST_ONLY"]

_TRACEABLE = (DispatchKey.CompositeExplicitAutograd, DispatchKey.CompositeImplicitAutograd,
              DispatchKey.Meta)


class BackendOpOverload(EdgeOpOverload):
    """An Edge op of a backend namespace, with the pattern callable it replaces."""

    def __init__(self, op: OpOverload, dialect: str = "backend"):
        super().__init__(op, dialect)
        self._equivalent_callable = None
        if not any(op.has_kernel_for_dispatch_key(k) for k in _TRACEABLE):
            raise RuntimeError(
                f"backend op {op.name()} has no CompositeExplicitAutograd, "
                "CompositeImplicitAutograd or Meta kernel, so it cannot be traced; register "
                "one (bind_pattern_to_op does) before using it in a graph")

    def __repr__(self) -> str:
        return f"<BackendOpOverload: {self.__name__}>: schema = {self._schema.schema}"


class BackendOpOverloadPacket(EdgeOpOverloadPacket):
    overload_class = BackendOpOverload

    def __repr__(self) -> str:
        return f"<BackendOpOverloadPacket(op='{self.__name__}')>"
