"""Which nodes XNNPACK takes, and why not: the checks every operator shares plus each
operator's own (``OP_RULES[op].check``, next to its lowering)."""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from ....exir.passes.spec_prop import upper_bound
from .. import xnnpack_preprocess  # noqa: F401  (registers the operator rules)
from ..aot.builder import OP_RULES
from ..aot.quant import (
    AFFINE_CHOOSE,
    AFFINE_DQ,
    AFFINE_Q,
    CHOOSE_QPARAMS,
    DQ_CHANNEL,
    DQ_DYNAMIC,
    DQ_STATIC,
    GEMM_ARGS,
    Q_DYNAMIC,
    Q_STATIC,
    QDQ_OPS,
    is_dynamic_act,
)

MAX_DIMS = 6  # XNN_MAX_TENSOR_DIMS
FLOAT_TYPES = (torch.float32, torch.float16)
# XNNPACK has no fp16 kernel for these (ExecuTorch 1.5.1's configs refuse them in fp16).
NO_FP16 = (torch.ops.aten.gelu.default,)


def _tensor_reason(val: object, what: str) -> str | None:
    if not isinstance(val, torch.Tensor):
        return f"{what} is not a tensor"
    if val.dtype not in FLOAT_TYPES:
        return f"{what} is {val.dtype} (XNNPACK takes float32 and float16)"
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
    rule = OP_RULES.get(node.target)  # type: ignore[arg-type]
    if rule is None:
        return f"XNNPACK has no lowering for {node.target}"
    if node.target in QDQ_OPS:  # integer tensors: the rule checks them itself
        return rule.check(node, ep)
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
    dtypes = {v.dtype for v in (out, *(a.meta.get("val") for a in node.all_input_nodes))
              if isinstance(v, torch.Tensor)}
    if len(dtypes) > 1:
        return f"it mixes {sorted(map(str, dtypes))} (a delegate computes in one float type)"
    if torch.float16 in dtypes and node.target in NO_FP16:
        return f"{node.target} has no float16 kernel in XNNPACK"
    return rule.check(node, ep)


def is_getitem_of(node: torch.fx.Node, producers: set[torch.fx.Node]) -> bool:
    """Output 0 of a supported node, or any output of a supported choose_qparams."""
    return (node.op == "call_function" and node.target is operator.getitem
            and node.args[0] in producers
            and (node.args[1] == 0 or node.args[0].target in (CHOOSE_QPARAMS, AFFINE_CHOOSE)))


def _weight_dq(node: torch.fx.Node) -> torch.fx.Node | None:
    w = node.args[GEMM_ARGS[node.target][1]]
    return w if isinstance(w, torch.fx.Node) and w.op == "call_function" \
        and w.target in QDQ_OPS else None


def quant_dependency(node: torch.fx.Node, kept: set[torch.fx.Node]) -> str | None:
    """Why ``node`` cannot be delegated given the other delegated nodes ``kept``: a quantize
    and its dequantizes, a dynamic quantization chain and its linear, a quantized weight and
    its linear must all be delegated together (XNNPACK's values are typed: an int8 tensor
    never crosses a delegate's boundary)."""
    t = node.target
    if t in GEMM_ARGS and _weight_dq(node) is not None:
        act = node.args[GEMM_ARGS[t][0]]
        missing = [a for a in (act, _weight_dq(node)) if a not in kept]
        if missing:
            return f"its quantized input %{missing[0].name} is not delegated"
        if act.target == DQ_STATIC:  # static: the output is int8 too
            tail = next(iter(node.users)) if len(node.users) == 1 else None
            if tail is not None and tail.target != Q_STATIC and len(tail.users) == 1:
                tail = next(iter(tail.users))
            if tail is None or tail.target != Q_STATIC or tail not in kept:
                return "its output's quantize is not delegated (XNNPACK computes it in int8)"
        return None
    produced = node.args[0] if t in QDQ_OPS and node.args else None
    if t in (DQ_STATIC, DQ_DYNAMIC, AFFINE_DQ) and isinstance(produced, torch.fx.Node) \
            and produced.op == "call_function" and produced not in kept:
        return f"its quantize %{produced.name} is not delegated"
    weight = t in (DQ_CHANNEL, DQ_STATIC, AFFINE_DQ) and isinstance(produced, torch.fx.Node) \
        and produced.op == "placeholder"
    if t in (Q_STATIC, Q_DYNAMIC, AFFINE_Q, DQ_DYNAMIC) or weight or (
            t == AFFINE_DQ and is_dynamic_act(node)):
        lost = [u for u in node.users if u not in kept]
        if lost:
            return f"its user %{lost[0].name} is not delegated (it needs the quantized value)"
    if t in (CHOOSE_QPARAMS, AFFINE_CHOOSE):
        quants = [q for item in node.users for q in item.users]
        if not quants or any(q not in kept for q in quants):
            return "its dynamic quantize is not delegated"
    return None
