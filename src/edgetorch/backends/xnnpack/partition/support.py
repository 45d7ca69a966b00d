"""Which nodes XNNPACK takes, and why not: the checks every operator shares plus each
operator's own (``RULES[op].check``, next to its lowering)."""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from ....exir.passes.spec_prop import upper_bound
from .. import xnnpack_preprocess  # noqa: F401  (registers the operator rules)
from ..preprocess_builder import RULES

MAX_DIMS = 6  # XNN_MAX_TENSOR_DIMS


def _tensor_reason(val: object, what: str) -> str | None:
    if not isinstance(val, torch.Tensor):
        return f"{what} is not a tensor"
    if val.dtype != torch.float32:
        return f"{what} is {val.dtype} (edgetorch lowers float32 to XNNPACK)"
    try:
        sizes = [upper_bound(d) for d in val.shape]
    except ValueError:
        return f"{what} has a dynamic shape {list(val.shape)} without an upper bound"
    if 0 in sizes:
        return f"{what} is empty (XNNPACK has no empty tensors)"
    if val.dim() > MAX_DIMS:
        return f"{what} has {val.dim()} dimensions (XNNPACK allows {MAX_DIMS})"
    return None


def why_not(node: torch.fx.Node, ep: ExportedProgram) -> str | None:
    """Why XNNPACK cannot take ``node`` (an operator call), or None when it can."""
    if node.op != "call_function":
        return "not an operator call"
    rule = RULES.get(node.target)  # type: ignore[arg-type]
    if rule is None:
        return f"XNNPACK has no lowering for {node.target}"
    for a in node.all_input_nodes:
        why = _tensor_reason(a.meta.get("val"), f"input %{a.name}")
        if why:
            return why
    out = node.meta.get("val")
    if isinstance(out, (tuple, list)):
        out = out[0] if out else None
    why = _tensor_reason(out, "the output")
    if why:
        return why
    return rule.check(node, ep)


def is_getitem_of(node: torch.fx.Node, producers: set[torch.fx.Node]) -> bool:
    return (node.op == "call_function" and node.target is operator.getitem
            and node.args[0] in producers and node.args[1] == 0)

