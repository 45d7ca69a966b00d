"""Quantized graphs -> XNNPACK's quantized values (ExecuTorch 1.5.1's encodings).

PT2E and torchao leave quantization as explicit quantize/dequantize ("Q/DQ") nodes around
float operators. XNNPACK instead types its values: an operator whose inputs all come from
dequantize nodes and whose (optionally clamped) output goes to one quantize node *is* a
quantized operator, reading and writing ``qint8`` values. :class:`QuantPlan` finds those
operators once per delegate; their Q/DQ nodes are then implicit (the value itself carries the
parameters). Every other Q/DQ node becomes an ``XNNConvert`` (float32 <-> int8), so a delegate
converts at its boundary and no Q/DQ kernel stays outside.

Encodings (``operators/node_visitor.py`` and ``quant_params.py`` of ExecuTorch):

- activations: ``qint8`` + ``PerTensorQuant(scale, zero_point)``; dynamic ones ``qdint8`` +
  ``PerTokenDynamicQuant(num_nonbatch_dims)`` (1 for a linear, 3 before a convolution);
- weights: ``qcint8`` + ``PerChannelQuant`` (per channel) or ``qint8`` (per tensor); 4-bit
  grouped weights ``qbint4`` + ``PerChannelGroupQuant`` packed two per byte;
- bias: ``qcint32``/``qint32`` with scale = weight scale x input scale (static), float32
  for dynamic activations;
- per-channel scales go to the named data under ``"scale_" + sha256`` (bfloat16 for groups).
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from torch.export import ExportedProgram

from ....errors import ExportError
from ....exir.foreign_warnings import import_torchao
from .. import schema as x
from .builder import (
    CONSTANT_TENSOR_ALIGNMENT,
    Builder,
    permuted,
    rule,
    shape_of,
    static_tensor,
)

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed
Node = torch.fx.Node

Q_STATIC = qd.quantize_per_tensor.default
DQ_STATIC = qd.dequantize_per_tensor.default
DQ_CHANNEL = qd.dequantize_per_channel.default
Q_DYNAMIC = qd.quantize_per_tensor.tensor
DQ_DYNAMIC = qd.dequantize_per_tensor.tensor
CHOOSE_QPARAMS = qd.choose_qparams.tensor


def _torchao_op(name: str) -> Any:
    try:
        import_torchao()
        import torchao.quantization.quant_primitives  # noqa: F401  (defines torchao's ops)

        return getattr(torch.ops.torchao, name).default
    except (ImportError, AttributeError, RuntimeError):  # no torchao: no such graphs either
        return None


AFFINE_CHOOSE = _torchao_op("choose_qparams_affine")
AFFINE_Q = _torchao_op("quantize_affine")
AFFINE_DQ = _torchao_op("dequantize_affine")

DEQUANTIZE = {DQ_STATIC, DQ_CHANNEL, DQ_DYNAMIC, AFFINE_DQ} - {None}
QUANTIZE = {Q_STATIC, Q_DYNAMIC, AFFINE_Q} - {None}
QDQ_OPS = DEQUANTIZE | QUANTIZE | {CHOOSE_QPARAMS, AFFINE_CHOOSE} - {None}

# Operators XNNPACK runs on qint8 values (ExecuTorch's configs with STATIC_QUANT).
GEMM_ARGS = {  # op -> (activation, weight, bias) argument indices
    aten.linear.default: (0, 1, 2),
    aten.convolution.default: (0, 1, 2),
}
STATIC_QUANT_OPS = set(GEMM_ARGS) | {
    aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.relu.default,
    aten.hardtanh.default, aten.clamp.default, aten.cat.default, aten.permute_copy.default,
    aten.max_pool2d.default, aten.view_copy.default, aten.mean.dim, aten.slice_copy.Tensor,
    aten.unsqueeze_copy.default, torch.ops.dim_order_ops._to_dim_order_copy.default,
}
FUSED_ACTIVATIONS = {aten.relu.default, aten.hardtanh.default}
FUSES = set(GEMM_ARGS) | {aten.add.Tensor}  # ops whose quantized pattern may end in a clamp
INT8 = (torch.int8,)


def is_qdq(node: Any) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in QDQ_OPS


def _sole_user(node: Node) -> Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


# ---- parameters read from Q/DQ nodes ----------------------------------------------------------


@dataclass
class WeightQuant:
    """A quantized constant weight: integer data and how to read it."""

    data: torch.Tensor  # int8 values as stored in the program
    scale: torch.Tensor | float  # per channel [C] / per group [C, G] / per tensor
    zero_point: torch.Tensor | int
    axis: int | None  # None: per tensor
    group_size: int = 0  # > 0: per channel group (4-bit)


def static_act_params(dq: Any) -> tuple[float, int] | None:
    """(scale, zero point) of a static per-tensor int8 Q/DQ node, else None."""
    if not isinstance(dq, Node) or dq.target not in (DQ_STATIC, Q_STATIC):
        return None
    _, scale, zp, qmin, qmax, dtype = dq.args[:6]
    if dtype not in INT8 or (qmin, qmax) != (-128, 127):
        return None
    return float(scale), int(zp)


def is_dynamic_act(dq: Any) -> bool:
    """Is ``dq`` the dequantize of a per-token/per-tensor dynamic int8 quantization?"""
    if not isinstance(dq, Node):
        return False
    if dq.target == DQ_DYNAMIC:
        q = dq.args[0]
        return isinstance(q, Node) and q.target == Q_DYNAMIC and all(
            isinstance(a, Node) and a.target is operator.getitem
            and a.args[0].target == CHOOSE_QPARAMS for a in q.args[1:3])
    if AFFINE_DQ is not None and dq.target == AFFINE_DQ:
        q = dq.args[0]
        return (isinstance(q, Node) and q.target == AFFINE_Q and _per_token(q)
                and all(isinstance(a, Node) and a.target is operator.getitem
                        and a.args[0].target == AFFINE_CHOOSE for a in q.args[2:4]))
    return False


def _per_token(node: Node) -> bool:
    block = list(node.args[1])
    shape = list(node.args[0].meta["val"].shape)
    return len(block) == len(shape) and all(b == 1 for b in block[:-1]) \
        and block[-1] == shape[-1]


def constant(ep: ExportedProgram, node: Any) -> torch.Tensor | None:
    """A constant's value; also a component of a tensor-subclass parameter (torchao's
    quantized weights before ``to_edge`` unwraps them)."""
    if isinstance(node, Node) and node.op == "call_function" \
            and node.target == torch.ops.export.access_subclass_inner_tensor.default:
        outer = static_tensor(ep, node.args[0])
        inner = getattr(outer, node.args[1], None) if outer is not None else None
        return inner if isinstance(inner, torch.Tensor) else None
    return static_tensor(ep, node)


def weight_quant(ep: ExportedProgram, dq: Any) -> WeightQuant | None:
    """The quantized weight behind a dequantize of constant integer data, else None."""
    if not isinstance(dq, Node) or dq.op != "call_function":
        return None
    data = constant(ep, dq.args[0])
    if data is None or data.dtype != torch.int8:
        return None
    if dq.target == DQ_STATIC:
        params = static_act_params(dq)
        if params is None and (dq.args[3], dq.args[4]) == (-127, 127):
            params = float(dq.args[1]), int(dq.args[2])
        return None if params is None else WeightQuant(data, params[0], params[1], None)
    if dq.target == DQ_CHANNEL:
        scale, zp = constant(ep, dq.args[1]), constant(ep, dq.args[2])
        if scale is None or zp is None or dq.args[6] not in INT8:
            return None
        return WeightQuant(data, scale, zp, int(dq.args[3]))
    if AFFINE_DQ is not None and dq.target == AFFINE_DQ:
        block = list(dq.args[1])
        scale, zp = constant(ep, dq.args[2]), constant(ep, dq.args[3])
        if scale is None or data.dim() != 2 or len(block) != 2 or block[0] != 1:
            return None
        if (dq.args[5], dq.args[6]) != (-8, 7):  # only 4-bit groups reach XNNPACK this way
            return None
        zp = zp if zp is not None else torch.zeros_like(scale, dtype=torch.int8)
        return WeightQuant(data, scale.reshape(data.shape[0], -1),
                           zp.reshape(data.shape[0], -1), 0, int(block[1]))
    return None


def weight_reason(ep: ExportedProgram, dq: Node) -> str | None:
    """Why XNNPACK cannot take this quantized weight (None when it can)."""
    w = weight_quant(ep, dq)
    if w is None:
        return (f"the weight %{dq.name} is not a dequantize of constant int8 data XNNPACK "
                "reads (per-tensor/per-channel int8, or int4 groups)")
    if isinstance(w.zero_point, torch.Tensor) and w.zero_point.any():
        return f"the weight %{dq.name} has non-zero zero points (XNNPACK's are symmetric)"
    if w.group_size:
        ic = w.data.shape[1]
        if w.group_size % 32 or ic % w.group_size:
            return (f"group size {w.group_size} for {ic} input channels (XNNPACK needs a "
                    "multiple of 32 dividing the input channels)")
    return None


# ---- the plan: which operators are quantized ---------------------------------------------------


class QuantPlan:
    """Which operators of a delegate run quantized, and which Q/DQ nodes are implicit.

    ``values[node]`` gives ``(datatype, quant_params)`` for every node whose XNNPACK value is
    quantized: the outputs of quantized operators and of explicit quantize nodes."""

    def __init__(self, ep: ExportedProgram) -> None:
        self.quantized: set[Node] = set()
        self.implicit: set[Node] = set()
        self.values: dict[Node, tuple[x.XNNDatatype, Any]] = {}
        self.op_quant: dict[Node, tuple[x.XNNDatatype, Any]] = {}  # quantized op -> output's
        for node in ep.graph.nodes:
            if node.op != "call_function":
                continue
            if node.target in STATIC_QUANT_OPS:
                self._static(ep, node)
            if node.target in (Q_DYNAMIC, AFFINE_Q):
                self.values[node] = (x.XNNDatatype.xnn_datatype_qdint8,
                                     x.PerTokenDynamicQuant(3 if _feeds_conv(node) else 1))
            if node.target == Q_STATIC and node not in self.values \
                    and static_act_params(node) is not None:  # int8 only (not 16-bit)
                self.values[node] = _qint8(node)
            if node.target == DQ_STATIC and _requantized_unchanged(node):
                # dq -> (copies) -> q with the same parameters converts nothing: ExecuTorch
                # drops the pair (e.g. around an eval-mode dropout)
                self.implicit.add(node)
                self.implicit.update(_requantized_unchanged(node))

    def input_quant(self, node: Node) -> tuple[x.XNNDatatype, Any] | None:
        """An int8 delegate input (a quantize in another delegate): its dequantizes' params."""
        users = list(node.users)
        if not users or any(u.target != DQ_STATIC or list(u.args[1:]) != list(users[0].args[1:])
                            or static_act_params(u) is None for u in users):
            return None
        return _qint8(users[0])

    def _static(self, ep: ExportedProgram, node: Node) -> None:
        if node.target in GEMM_ARGS:
            a, w, _ = GEMM_ARGS[node.target]
            act = node.args[a]
            if act.target != DQ_STATIC or static_act_params(act) is None \
                    or weight_quant(ep, node.args[w]) is None:
                return
            inputs = [act, node.args[w]]
        else:
            inputs = node.all_input_nodes
            if not inputs or any(i.target != DQ_STATIC or static_act_params(i) is None
                                 for i in inputs):
                return
        tail, fused = _sole_user(node), None
        if tail is not None and tail.target in FUSED_ACTIVATIONS and node.target in FUSES:
            tail, fused = _sole_user(tail), tail
        if tail is None or tail.target != Q_STATIC or static_act_params(tail) is None:
            return
        self.quantized.add(node)
        self.implicit.update(inputs)
        self.implicit.add(tail)
        self.values[fused or node] = self.values[tail] = self.op_quant[node] = _qint8(tail)


PASS_THROUGH = {aten.clone.default, aten.alias_copy.default,
                torch.ops.dim_order_ops._clone_dim_order.default}


def _requantized_unchanged(dq: Node) -> list[Node]:
    """The quantize nodes that take ``dq``'s value back with the same parameters, through
    copies only (an eval-mode dropout); empty unless that is all ``dq`` feeds."""
    if not isinstance(dq.args[0], Node) or dq.args[0].op != "call_function":
        return []
    found, todo = [], list(dq.users)
    while todo:
        u = todo.pop()
        if u.op == "call_function" and u.target in PASS_THROUGH:
            todo.extend(u.users)
        elif u.target == Q_STATIC and list(u.args[1:]) == list(dq.args[1:]):
            found.append(u)
        else:
            return []
    return found


def _qint8(q: Node) -> tuple[x.XNNDatatype, x.PerTensorQuant]:
    scale, zp = static_act_params(q)  # type: ignore[misc]
    return x.XNNDatatype.xnn_datatype_qint8, x.PerTensorQuant(scale, zp)


def _feeds_conv(node: Node) -> bool:
    """Does this dynamic quantization feed a convolution before any linear? (ExecuTorch
    then declares 3 non-batch dimensions.)"""
    todo = [node]
    while todo:
        n = todo.pop()
        if "linear" in str(n.target):
            return False
        if "convolution" in str(n.target):
            return True
        todo.extend(n.users)
    return False


# ---- constants ------------------------------------------------------------------------------------


def _add_bytes(g: Builder, raw: bytes, key: str) -> int:
    index = len(g.graph.constant_data)
    g.graph.constant_data.append(x.ConstantDataOffset(x.UINT64_MAX, len(raw), key))
    g.store.add_named_data(key, raw, CONSTANT_TENSOR_ALIGNMENT)
    return index


def _raw(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().view(torch.uint8).numpy().tobytes()


def quantized_constant(g: Builder, data: torch.Tensor, datatype: x.XNNDatatype,
                       scale: torch.Tensor | float, zero_point: int, axis: int | None,
                       group_size: int = 0, dims: list[int] | None = None) -> int:
    """A constant quantized value (data first, then its scales, as ExecuTorch orders them)."""
    raw = _raw(data)
    if not raw:
        raise ExportError("XNNPACK cannot hold an empty constant")
    index = _add_bytes(g, raw, hashlib.sha256(raw).hexdigest())
    if axis is None:
        quant: Any = x.PerTensorQuant(float(scale), int(zero_point))
    else:
        s = scale.detach().contiguous()
        if group_size:
            s = s.to(torch.bfloat16)
        s_raw = _raw(s)
        s_index = _add_bytes(g, s_raw, "scale_" + hashlib.sha256(s_raw).hexdigest())
        quant = (x.PerChannelGroupQuant([], axis, group_size, s_index, s.numel()) if group_size
                 else x.PerChannelQuant([], axis, s_index, s.numel()))
    return g.new_value(dims if dims is not None else list(data.shape), datatype, quant, index)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """[oc, ic] values in [-8, 7] -> [oc, ceil(ic/2)] bytes, even input channel in the low
    nibble (XNNPACK's qb4w layout)."""
    if q.shape[-1] % 2:
        q = torch.nn.functional.pad(q, (0, 1))
    u = (q.to(torch.int16) + 8).to(torch.uint8).reshape(-1)
    return (u[1::2] << 4 | u[::2]).reshape(q.shape[0], q.shape[1] // 2)


def weight_value(g: Builder, w: WeightQuant, data: torch.Tensor | None = None,
                 axis: int | None = None) -> int:
    """The XNNPACK value of a quantized weight (``data``/``axis``: its rearranged copy)."""
    data = w.data if data is None else data
    axis = w.axis if axis is None else axis
    if w.group_size:
        return quantized_constant(g, pack_int4(data), x.XNNDatatype.xnn_datatype_qbint4,
                                  w.scale, 0, 0, w.group_size, dims=list(data.shape))
    if w.axis is None:
        return quantized_constant(g, data, x.XNNDatatype.xnn_datatype_qint8, w.scale,
                                  int(w.zero_point), None)
    return quantized_constant(g, data, x.XNNDatatype.xnn_datatype_qcint8, w.scale, 0, axis)


def bias_value(g: Builder, bias: torch.Tensor, w: WeightQuant, act: Node) -> int:
    """Static activations: int32 bias at scale weight x input (per channel or per tensor);
    dynamic ones keep a float32 bias."""
    params = static_act_params(act)
    if params is None:
        return g.constant(bias)
    scale = w.scale * params[0]
    b = bias.detach().float()
    if w.axis is None:
        q = qd.quantize_per_tensor.default(b, float(scale), 0, -(2**31), 2**31 - 1, torch.int32)
        return quantized_constant(g, q, x.XNNDatatype.xnn_datatype_qint32, scale, 0, None)
    zp = torch.zeros(scale.shape, dtype=torch.int64)
    q = qd.quantize_per_channel.default(b, scale, zp, 0, -(2**31), 2**31 - 1, torch.int32)
    return quantized_constant(g, q, x.XNNDatatype.xnn_datatype_qcint32, scale, 0, 0)


# ---- Q/DQ nodes ---------------------------------------------------------------------------------


def _check_weight(node: Node, ep: ExportedProgram) -> str | None:
    if node.target == DQ_STATIC and static_act_params(node) is not None and not any(
            u.target in GEMM_ARGS and u.args[GEMM_ARGS[u.target][1]] is node for u in node.users):
        return None  # an int8 operand of add/mul... (a scalar the quantizer made a buffer)
    if not node.users or any(u.target not in GEMM_ARGS for u in node.users):
        return "a quantized weight not used by a linear or convolution"
    return weight_reason(ep, node)


def _check_qdq(node: Node, ep: ExportedProgram) -> str | None:
    t = node.target
    if t in (CHOOSE_QPARAMS, AFFINE_CHOOSE):
        return None
    if t == DQ_CHANNEL or (t in (DQ_STATIC, AFFINE_DQ)
                           and constant(ep, node.args[0]) is not None):
        return _check_weight(node, ep)
    if t in (Q_STATIC, DQ_STATIC):
        if static_act_params(node) is None:
            return f"{t} is not int8 in [-128, 127] (XNNPACK's qint8)"
        return None
    if t in (DQ_DYNAMIC, AFFINE_DQ):
        return None if is_dynamic_act(node) else \
            "a dynamic dequantize without its choose_qparams -> quantize chain"
    if t == Q_DYNAMIC and node.args[-1] not in INT8:
        return "dynamic quantization to a type other than int8"
    if t == AFFINE_Q and (node.args[4] not in INT8 or not _per_token(node)):
        return "dynamic quantization that is not int8 per token"
    return None


def _weight_statics(node: Node) -> list[Node]:
    """A gemm's weight must be a constant of its delegate; an int8 operand of add/mul... may
    also come in as a delegate input (several delegates read one rotary table)."""
    if not any(u.target in GEMM_ARGS for u in node.users):
        return []
    return [a for a in node.all_input_nodes if a.op == "placeholder"]


@rule(*QDQ_OPS, check=_check_qdq, statics=_weight_statics)
def _qdq(g: Builder, node: Node) -> None:
    plan = g.plan
    if node.target in (CHOOSE_QPARAMS, AFFINE_CHOOSE):
        for item in node.users:  # the scale and zero point never become XNNPACK values
            g.done.add(item)
        return
    src = node.args[0]
    data = g.static(src)
    if node.target == DQ_STATIC and data is not None and static_act_params(node) is not None \
            and not any(u.target in GEMM_ARGS for u in node.users):
        scale, zp = static_act_params(node)  # type: ignore[misc]
        if node in plan.implicit:  # an int8 operand of a quantized add/mul...
            vid = quantized_constant(g, data, x.XNNDatatype.xnn_datatype_qint8, scale, zp, None)
        else:  # read as float: the dequantized constant itself
            vid = g.constant((data.to(torch.float32) - zp) * torch.tensor(scale, dtype=torch.float32))
        g.put(node, vid)
        return
    if node.target in (DQ_CHANNEL,) or (node.target in (AFFINE_DQ, DQ_STATIC)
                                        and data is not None):
        return  # a weight: read by its linear/convolution
    if node in plan.implicit or node.target in (DQ_DYNAMIC, AFFINE_DQ):
        g.alias(node, src)  # the value already is quantized (or quantized dynamically)
        return
    quant = plan.values.get(node)
    if quant is not None and getattr(quant[1], "num_nonbatch_dims", 1) == 3:
        # Before a convolution: convert the NHWC copy. ExecuTorch declares the result with
        # the NCHW dims unless its source already was NHWC (XNNPACK reshapes at run time).
        was_nhwc = g.home(src)
        in_id = g.get(src, True)
        out = g.new_value(permuted(shape_of(node), was_nhwc), *quant)
        g.put(node, out, True)
        g.add(x.XNNConvert(in_id, out))
        return
    layout = g.home(src)
    g.add(x.XNNConvert(g.get(src, layout), g.out(node, layout)))


# ---- quantized linear and convolution ------------------------------------------------------------


def gemm_reason(node: Node, ep: ExportedProgram) -> str | None:
    """Why a linear/convolution whose weight is quantized cannot be lowered (None: it can)."""
    act, weight, bias = (node.args[i] if len(node.args) > i else None
                         for i in GEMM_ARGS[node.target])
    why = weight_reason(ep, weight)
    if why:
        return why
    if static_act_params(act) is None and not is_dynamic_act(act):
        return (f"its input %{getattr(act, 'name', act)} is not a quantized activation "
                "(XNNPACK multiplies a quantized weight with quantized inputs only)")
    if bias is not None and constant(ep, bias) is None:
        return "the bias is not a constant"
    if node.target == aten.convolution.default:
        w = weight_quant(ep, weight)
        if node.args[6] or w.data.dim() != 4 or w.group_size:
            return "a quantized transposed, 1-D or 4-bit convolution"
        if is_dynamic_act(act) and (node.args[8] != 1 or w.axis is None):
            return "a dynamically quantized grouped or per-tensor convolution"
    elif weight_quant(ep, weight).data.dim() != 2:
        return "a linear whose weight is not 2-D"
    return None


def gemm_statics(node: Node) -> list[Node]:
    """A quantized gemm's weight dequantize with its constant inputs, and its bias."""
    _, w, b = GEMM_ARGS[node.target]
    out = []
    weight = node.args[w]
    if isinstance(weight, Node):
        out.append(weight)
        if weight.op == "call_function":
            out += [a for a in weight.all_input_nodes if a.op == "placeholder"]
    if len(node.args) > b and isinstance(node.args[b], Node):
        out.append(node.args[b])
    return out


def emit_linear(g: Builder, node: Node, w: WeightQuant, fused_activation: Any) -> None:
    """Input, weight, bias, output, in the order ExecuTorch defines them."""
    inp = node.args[0]
    b_node = node.args[2] if len(node.args) > 2 else None
    tail, bounds = fused_activation(g, node)
    in_id = g.get(inp)
    w_id = weight_value(g, w)
    b_id = (bias_value(g, g.static(b_node), w, inp) if b_node is not None
            else x.XNN_INVALID_VALUE_ID)
    g.add(x.XNNFullyConnected(in_id, w_id, b_id, g.out(tail)), bounds)


def emit_conv(g: Builder, node: Node, w: WeightQuant, fused_activation: Any,
              params: dict) -> None:
    """A 2-D convolution on quantized values: filter ``[O, H, W, I]`` (depthwise
    ``[1, H, W, O]``, its channel axis then last), NHWC activations."""
    inp, b_node = node.args[0], node.args[2]
    tail, bounds = fused_activation(g, node)
    groups = params["groups"]
    o, group_in, kh, kw = w.data.shape
    depthwise = group_in == 1 and groups > 1
    filt = w.data.permute(1, 2, 3, 0) if depthwise else w.data.permute(0, 2, 3, 1)
    axis = None if w.axis is None else (3 if depthwise else 0)
    cls = x.XNNDepthwiseConv2d if depthwise else x.XNNConv2d
    src = g.get(inp, True)
    filt_id = weight_value(g, w, filt.contiguous(), axis)
    out = g.out(tail, True)
    bias_id = (bias_value(g, g.static(b_node), w, inp) if b_node is not None
               else x.XNN_INVALID_VALUE_ID)
    (pt, pl), (sh, sw), (dh, dw) = params["padding"], params["stride"], params["dilation"]
    g.add(cls(pt, pl, pt, pl, kh, kw, sh, sw, dh, dw, group_in, o // groups, groups, 0, 0,
              src, filt_id, bias_id, out), bounds)
