"""Operator facts the compiler needs: out variants, names as a ``.pte`` stores them, and the
``dim_order_ops`` custom operators that ExecuTorch's Edge dialect uses for layout changes."""

from __future__ import annotations

import functools
import os
import re

import torch
from torch._ops import OpOverload

from .dim_order_utils import get_memory_format

# ---- operator names ----------------------------------------------------------------------


def op_name_and_overload(op: OpOverload) -> tuple[str, str]:
    """``("aten::add", "out")`` -- the ``Operator`` table entry ExecuTorch writes for ``op``.

    The default overload is stored as an empty string, as ExecuTorch's emitter does.
    """
    name = op._schema.name
    overload = op._overloadname
    return name, ("" if overload == "default" else overload)


def qualified_name(op: OpOverload) -> str:
    """The registry key the runtime resolves for ``op``: ``aten::add.out``."""
    name, overload = op_name_and_overload(op)
    return f"{name}.{overload}" if overload else name


# ---- out variants ------------------------------------------------------------------------


# Tensor options are carried by the ``out`` tensor itself, so out variants drop them
# (``full_like(self, v, *, dtype, layout, device, pin_memory, memory_format)`` ->
# ``full_like.out(self, v, *, memory_format, out)``).
_TENSOR_OPTIONS = {"dtype", "layout", "device", "pin_memory"}


def _signature_key(schema: torch._C.FunctionSchema) -> tuple[tuple[str, str], ...]:
    return tuple((a.name, str(a.type)) for a in schema.arguments
                 if not a.is_out and a.name not in _TENSOR_OPTIONS)


@functools.cache
def out_variant(op: OpOverload) -> OpOverload | None:
    """The ``.out`` overload of functional ``op`` (same non-out arguments), or None."""
    schema = op._schema
    if any(a.is_out for a in schema.arguments):
        return op
    key = _signature_key(schema)
    exact = tuple((a.name, str(a.type)) for a in schema.arguments)
    packet = op.overloadpacket
    found = None
    for name in packet.overloads():
        cand = getattr(packet, name)
        cs = cand._schema
        outs = [a for a in cs.arguments if a.is_out]
        if outs and _signature_key(cs) == key and len(outs) == max(1, len(schema.returns)):
            # An overload keeping every argument wins (``embedding_byte.dtype`` ->
            # ``dtype_out``, not ``out``, which drops ``dtype`` like a tensor option).
            if tuple((a.name, str(a.type)) for a in cs.arguments if not a.is_out) == exact:
                return cand
            found = found or cand
    return found


def out_arg_names(op: OpOverload) -> list[str]:
    return [a.name for a in op._schema.arguments if a.is_out]


def is_out_variant(op: OpOverload) -> bool:
    return any(a.is_out for a in op._schema.arguments)


# ---- scalar overloads -------------------------------------------------------------------

# ``x + 2`` exports as ``aten.add.Tensor(x, 2)``; the runtime's kernels (ours and ExecuTorch's)
# expect a Tensor there, so such calls move to the ``.Scalar`` overload.
_SCALAR_OVERLOAD = {
    "Tensor": "Scalar",
    "Tensor_Tensor": "Tensor_Scalar",
    "self": "Scalar",
}


def scalar_overload(op: OpOverload) -> OpOverload | None:
    target = _SCALAR_OVERLOAD.get(op._overloadname)
    if target is None or not hasattr(op.overloadpacket, target):
        return None
    return getattr(op.overloadpacket, target)


# ---- dim_order_ops ----------------------------------------------------------------------

_DIM_ORDER_SCHEMAS = {
    "_to_dim_order_copy": "_to_dim_order_copy(Tensor self, *, ScalarType? dtype=None, "
    "Layout? layout=None, Device? device=None, bool? pin_memory=None, "
    "bool non_blocking=False, int[]? dim_order=None) -> Tensor",
    "_to_dim_order_copy.out": "_to_dim_order_copy.out(Tensor self, *, bool non_blocking=False, "
    "int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)",
    "_clone_dim_order": "_clone_dim_order(Tensor self, *, bool non_blocking=False, "
    "int[]? dim_order=None) -> Tensor",
    "_clone_dim_order.out": "_clone_dim_order.out(Tensor self, *, bool non_blocking=False, "
    "int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)",
}


def _to_dim_order_copy_impl(self, *, dtype=None, layout=None, device=None, pin_memory=None,
                            non_blocking=False, dim_order=None):
    return torch.ops.aten._to_copy.default(
        self, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
        non_blocking=non_blocking, memory_format=get_memory_format(dim_order))


def _to_dim_order_copy_meta(self, *, dtype=None, layout=None, device=None, pin_memory=None,
                            non_blocking=False, dim_order=None):
    # Shapes only: a graph's ``device=cpu`` must not move a meta (or fake) tensor to the CPU,
    # which cannot be done and made every re-trace of such a copy fail.
    return torch.ops.aten._to_copy.default(self, dtype=dtype, layout=layout,
                                           memory_format=get_memory_format(dim_order))


def _to_dim_order_copy_out_impl(self, *, non_blocking=False, dim_order=None, out):
    out.copy_(self)
    return out


def _clone_dim_order_impl(self, *, non_blocking=False, dim_order=None):
    return torch.ops.aten.clone.default(self, memory_format=get_memory_format(dim_order))


def _define_dim_order_ops() -> None:
    if hasattr(torch.ops, "dim_order_ops") and hasattr(torch.ops.dim_order_ops, "_clone_dim_order"):
        return  # already defined in this process (same schema as ExecuTorch's)
    lib = torch.library.Library("dim_order_ops", "DEF")
    for schema in _DIM_ORDER_SCHEMAS.values():
        lib.define(schema)
    lib.impl("_to_dim_order_copy", _to_dim_order_copy_impl, "CompositeExplicitAutograd")
    lib.impl("_to_dim_order_copy", _to_dim_order_copy_meta, "Meta")
    for key in ("CompositeExplicitAutograd", "Meta"):
        lib.impl("_to_dim_order_copy.out", _to_dim_order_copy_out_impl, key)
        lib.impl("_clone_dim_order", _clone_dim_order_impl, key)
        lib.impl("_clone_dim_order.out", _to_dim_order_copy_out_impl, key)
    _LIBS.append(lib)


_LIBS: list[torch.library.Library] = []
_define_dim_order_ops()


# ---- graphs ------------------------------------------------------------------------------


def graph_modules(gm: torch.fx.GraphModule):
    """``gm`` and every nested graph (the branches of ``torch.cond``), outermost first."""
    for mod in gm.modules():
        if isinstance(mod, torch.fx.GraphModule):
            yield mod


def is_cond(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is torch.ops.higher_order.cond


def is_map(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is torch.ops.higher_order.map_impl


def body_attrs(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The ``get_attr`` nodes naming the sub-graphs a control-flow call runs (``cond``: both
    branches; ``map_impl``: its body); empty for any other node."""
    if is_cond(node):
        return [node.args[1], node.args[2]]
    if is_map(node):
        return [node.args[0]]
    return []


# ---- source locations -------------------------------------------------------------------

_TORCH_DIR = os.path.dirname(torch.__file__)
_FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n\s*(?P<code>.*)')


def user_frame(node: torch.fx.Node) -> str | None:
    """``file.py:12 in forward: x = self.conv(x)`` -- the user's line that produced ``node``."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    frames = list(_FRAME_RE.finditer(trace))
    if not frames:
        return None
    # The innermost frame outside torch itself is the user's line (torch's nn.Linear.forward
    # is not where the user can change anything).
    # FX's generated code (``<eval_with_key>.3``, e.g. under a ``torch.map``) is no one's line.
    user = [f for f in frames if not f["file"].startswith((_TORCH_DIR, "<"))]
    m = (user or frames)[-1]
    return f"{m['file']}:{m['line']} in {m['func']}: {m['code'].strip()}"


def describe_node(node: torch.fx.Node) -> str:
    where = user_frame(node)
    text = f"node %{node.name} ({node.format_node()})"
    return f"{text}\n  at {where}" if where else text
