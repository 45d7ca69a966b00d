"""``exir_ops``: the operator namespaces of ExecuTorch's dialects.

``ops.edge.<ns>.<op>.<overload>`` is the Edge form of ``torch.ops.<ns>.<op>.<overload>``;
``ops.backend.<ns>.<op>.<overload>`` is a backend op of a namespace registered with
:func:`bind_pattern_to_op`. Objects are created on first access and cached, so each name
is one object.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable

import torch
from torch._C import DispatchKey
from torch.library import Library

from .backend._ops import _TRACEABLE, BACKEND_NAMESPACES, BackendOpOverloadPacket
from .edge._ops import EdgeOpOverloadPacket

_PACKETS = {"edge": EdgeOpOverloadPacket, "backend": BackendOpOverloadPacket}


class _OpNamespace(types.ModuleType):
    """``ops.edge.aten``: operator packets of one torch library namespace."""

    def __init__(self, dialect: str, name: str):
        super().__init__(f"exir_ops.{dialect}.{name}")
        if dialect == "backend" and name not in BACKEND_NAMESPACES:
            raise RuntimeError(
                f"{name} is not a backend op library; register its ops with "
                f"bind_pattern_to_op(Library({name!r}, 'DEF'), schema) first")
        self._dialect = dialect
        self._name = name
        self._torch_ns = getattr(torch.ops, name)

    def __getattr__(self, op_name: str):
        if op_name.startswith("__"):
            raise AttributeError(op_name)
        try:
            parent = getattr(self._torch_ns, op_name)
        except AttributeError as e:
            raise AttributeError(f"exir_ops.{self._dialect}.{self._name} has no operator "
                                 f"{op_name!r}") from e
        packet = _PACKETS[self._dialect](f"{self._name}::{op_name}", op_name, parent,
                                         self._dialect)
        setattr(self, op_name, packet)
        return packet


class _Dialect(types.ModuleType):
    def __init__(self, dialect: str):
        super().__init__(f"exir_ops.{dialect}")
        self._dialect = dialect

    def __getattr__(self, name: str) -> _OpNamespace:
        if name.startswith("__"):
            raise AttributeError(name)
        ns = _OpNamespace(self._dialect, name)
        setattr(self, name, ns)
        return ns


class _Ops(types.ModuleType):
    def __init__(self):
        super().__init__("exir_ops")
        self.edge = _Dialect("edge")
        self.backend = _Dialect("backend")


ops = _Ops()

_SCHEMA_NAME = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\.(?P<overload>\w+))?(?P<rest>\(.*)?$")


def bind_pattern_to_op(library: Library, schema_or_name: str) -> Callable[[Callable], Callable]:
    """Decorator: the decorated function is the pattern the backend op ``schema_or_name``
    of ``library`` replaces. The op is defined (from a schema string) if needed, given the
    pattern as its CompositeImplicitAutograd kernel when it has no traceable kernel, and its
    namespace becomes a backend namespace (``exir_ops.backend.<ns>``)."""

    def wrapper(f: Callable) -> Callable:
        if library.ns not in BACKEND_NAMESPACES:
            BACKEND_NAMESPACES.append(library.ns)
        text = schema_or_name.split("::")[-1]
        m = _SCHEMA_NAME.match(text)
        if m is None:
            raise ValueError(f"cannot parse operator schema {schema_or_name!r}")
        if m["rest"]:
            library.define(text)
        name, overload = m["name"], m["overload"] or "default"
        torch_op = getattr(getattr(getattr(torch.ops, library.ns), name), overload)
        if not any(torch_op.has_kernel_for_dispatch_key(k) for k in _TRACEABLE):
            qual = name if overload == "default" else f"{name}.{overload}"
            library.impl(qual, f, DispatchKey.CompositeImplicitAutograd.name)
        op = getattr(getattr(getattr(ops.backend, library.ns), name), overload)
        op._equivalent_callable = f
        return f

    return wrapper
