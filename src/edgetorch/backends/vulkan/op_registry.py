"""Which operators the Vulkan delegate implements, and how (ExecuTorch 1.5.1's
``backends/vulkan/op_registry.py``, the facts of its C++ ``graph/ops/impl/*.cpp``).

Each entry says which dtypes an operator takes, which (storage, layout) representations its
inputs and outputs may use, whether it resizes (dynamic shapes), takes tensors of more than 4
dims, or prepacks its own weights, plus an optional check of the node's arguments and an
optional per-node choice of representations. Entries are keyed by the operator's Edge name
(``aten.add.Tensor``, what ``OperatorCall.name`` stores), by ``torch.ops``/``operator``
callables for the symbolic ops that stay outside the Edge dialect, or by ``ns::op`` names
for custom operators. An Edge name never matches a plain ``torch.ops.aten`` target, as in
ExecuTorch, where ``scalar_tensor`` traced as ``torch.ops.aten`` stays on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...exir.dialects.edge._ops import EdgeOpOverload
from . import custom_ops_lib  # noqa: F401  (defines torch.ops.et_vk)
from . import utils as u


def allow_node(node: torch.fx.Node) -> bool:
    return True


class OpFeatures:
    """How the Vulkan delegate implements one operator."""

    __slots__ = ("inputs_dtypes", "outputs_dtypes", "inputs_storage", "outputs_storage",
                 "supports_resize", "supports_highdim", "supports_prepacking",
                 "are_node_inputs_supported_fn", "pick_io_storage_fn")

    def __init__(self, inputs_dtypes=None, outputs_dtypes=None, inputs_storage=None,
                 outputs_storage=None, supports_resize: bool = False,
                 supports_highdim: bool = False, supports_prepacking: bool = False,
                 are_node_inputs_supported_fn: Callable | None = allow_node,
                 pick_io_storage_fn: Callable | None = None) -> None:
        self.inputs_dtypes = u.DtypeSetList(u.ALL_T if inputs_dtypes is None else inputs_dtypes)
        self.outputs_dtypes = u.DtypeSetList(
            self.inputs_dtypes[0] if outputs_dtypes is None else outputs_dtypes)
        self.inputs_storage = u.TensorRepSetList([] if inputs_storage is None else inputs_storage)
        self.outputs_storage = u.TensorRepSetList(
            [] if outputs_storage is None else outputs_storage)
        if self.outputs_storage.any_is_empty():  # unset: the output follows the first input
            self.outputs_storage = u.TensorRepSetList(self.inputs_storage[0])
        self.supports_resize = supports_resize
        self.supports_highdim = supports_highdim
        self.supports_prepacking = supports_prepacking
        self.are_node_inputs_supported_fn = are_node_inputs_supported_fn
        self.pick_io_storage_fn = pick_io_storage_fn

    def check_dtypes(self, node: torch.fx.Node) -> tuple[bool, str]:
        return u.check_node_dtypes(node, self.inputs_dtypes, self.outputs_dtypes)

    def make_op_repsets(self, node: torch.fx.Node,
                        texture_limits: u.ImageExtents = u.DEFAULT_TEXTURE_LIMITS):
        ins, outs = self.inputs_storage, self.outputs_storage
        if self.pick_io_storage_fn is not None:
            i, o = self.pick_io_storage_fn(node)
            ins, outs = u.TensorRepSetList(i), u.TensorRepSetList(o)
        return u.OpRepSets(ins, outs, node, texture_limits)


OpKey = Any


def _key(target: Any) -> Any:
    return target.__name__ if isinstance(target, EdgeOpOverload) else target


class _Registry(dict):
    """``{op key: OpFeatures}``; an Edge operator looks itself up by its Edge name."""

    def __contains__(self, target: object) -> bool:
        return dict.__contains__(self, _key(target))

    def __getitem__(self, target: Any) -> OpFeatures:
        return dict.__getitem__(self, _key(target))


vulkan_supported_ops: _Registry = _Registry()


def register(ops: list, **features: Any) -> None:
    """Register one ``OpFeatures`` per name of ``ops`` (each built fresh, as the constraining
    passes modify nothing shared); a second registration of a name is an error."""
    for op in ops:
        key = _key(op)
        if dict.__contains__(vulkan_supported_ops, key):
            raise RuntimeError(f"[Vulkan delegate] duplicate registration of {op}!")
        dict.__setitem__(vulkan_supported_ops, key, OpFeatures(**features))


def has_impl(target: Any) -> bool:
    if isinstance(target, str):
        return target in vulkan_supported_ops
    return target in vulkan_supported_ops or target.name() in vulkan_supported_ops


def get_op_features(target: Any) -> OpFeatures:
    if not isinstance(target, str) and target not in vulkan_supported_ops:
        return vulkan_supported_ops[target.name()]
    return vulkan_supported_ops[target]


def handles_own_prepacking(target: Any) -> bool:
    return get_op_features(target).supports_prepacking


from . import op_table  # noqa: E402, F401  (fills vulkan_supported_ops)
