"""Lower a float edge subgraph (float32 in, float32 out) to TOSA's FP profile, as ExecuTorch
1.5.1 emits it for a ``TOSA-1.0+FP`` spec.

The graph walk, the NHWC layout, the names and the order of operators and constants are the
INT lowering's (``lowering._Lowering``); only the operator rules differ, following what
ExecuTorch's passes make of a float graph:
- ``add``/``sub``/``mul``: ADD/SUB/MUL on float32 (MUL with its int8 shift 0);
  ``div``: RECIPROCAL of the divisor, then MUL (DecomposeDivPass).
- ``convolution``/``linear``: CONV2D/DEPTHWISE_CONV2D with float32 weights (OHWI/HWICM), the
  bias as is (a zero ``<conv>_bias`` when there is none), float32 zero points and a float32
  accumulator; no activation is folded: ReLU/ReLU6/hardtanh/clamp are a CLAMP with float32
  bounds (an open side: float32's limit).
- ``mean.dim``: one REDUCE_SUM per reduced axis, then MUL by ``1/N`` (DecomposeMeanDimPass;
  rank < 4 inputs are viewed as rank 4 first).
- ``softmax``: REDUCE_MAX, SUB, EXP, REDUCE_SUM, RECIPROCAL, MUL (DecomposeSoftmaxPass).
- ``gelu`` (exact): MUL by sqrt(1/2), ERF, ADD 1, MUL by 0.5, MUL by x (DecomposeGeluPass).
- ``bmm``/``mm`` (``matmul`` as torch decomposes it): MATMUL on float32, zero points 0.
- ``sum.dim_IntList``: one REDUCE_SUM per axis in the order given (DecomposeSumPass).
- ``layer_norm``: mean, SUB, square, variance, ADD eps, RSQRT, MUL, weight and bias
  (DecomposeLayerNormPass with DecomposeVarPass and DecomposeMeanDimPass).
- ``max_pool2d``/``avg_pool2d``: MAX_POOL2D/AVG_POOL2D on float32 (zero points 0.0).
- ``sigmoid``/``tanh``/``exp``/``reciprocal``/``rsqrt``/``erf``: the TOSA operator itself (no
  table).
"""

from __future__ import annotations

import math
import operator

import numpy as np
import torch
from torch.fx import Node

from ....errors import ExportError
from .lowering import _HANDLERS as INT_HANDLERS
from .lowering import Value, _Lowering
from .lowering_tensor import TensorRules
from .tosa_ir import TConst

aten = torch.ops.aten
FP32_MAX = float(np.finfo(np.float32).max)

# Element-wise functions that are one TOSA operator each under the FP profile.
UNARY_OPS = {
    aten.sigmoid.default: "SIGMOID",
    aten.tanh.default: "TANH",
    aten.exp.default: "EXP",
    aten.reciprocal.default: "RECIPROCAL",
    aten.rsqrt.default: "RSQRT",
    aten.erf.default: "ERF",
    aten.log.default: "LOG",
    aten.abs.default: "ABS",
}


class FloatLowering(_Lowering):
    """The FP-profile rules; see the module docstring."""

    NHWC_OPS = (aten.convolution.default, aten.avg_pool2d.default,
                aten.max_pool2d.default, aten.max_pool2d_with_indices.default)
    INPUT_DTYPES = {torch.float32: "FP32"}

    def __init__(self, ep, spec):
        super().__init__(ep, spec)
        self.views_before: dict[Node, int] = {}  # the model's view_copy nodes before each node
        views = 0
        for n in ep.graph_module.graph.nodes:
            self.views_before[n] = views
            views += n.target == aten.view_copy.default
        self.views_made = 0  # view_copy nodes ExecuTorch's decompositions add (for names)

    # -- operands ---------------------------------------------------------------------------

    def int8_input(self, node: Node) -> Value:
        """The float value of ``node`` (the INT rules' operand reader, reused by the shape
        rules); a constant placeholder becomes a float32 constant operand."""
        spec = self.specs.get(node.name)
        if node.op == "placeholder" and spec is not None and spec.kind.name != "USER_INPUT":
            return Value(self.const_operand(node), self.nhwc and self.tensor(node).dim() == 4)
        if node not in self.values:
            raise ExportError(f"TOSA lowering: %{node.name} is not lowered")
        value = self.values[node]
        if value.t.dtype != "FP32":
            raise ExportError(f"TOSA lowering: %{node.name} is {value.t.dtype}; the FP rules "
                              "take float32 tensors")
        return value

    def out_qparams(self, node: Node) -> None:
        return None

    def view_name(self, node: Node) -> str:
        """The name ExecuTorch gives the next view_copy its passes make before ``node``: view
        nodes are numbered in graph order, the model's own and the decompositions' ones."""
        k = self.views_before[node] + self.views_made
        self.views_made += 1
        return f"aten_view_copy_default{f'_{k}' if k else ''}"

    def ranked_const_name(self, node: Node) -> str:
        """ExecuTorch's MatchArgRanksPass views the constant, and FuseConstantArgsPass folds
        the view into ``<view>_fused_const``."""
        return f"{self.view_name(node)}_fused_const"

    def scalar_const(self, node: Node, value: float, rank: int) -> TConst:
        """A float scalar operand as ExecuTorch folds it: a ``[1]*rank`` float32 constant
        named after the view that matched its rank (``<view>_fused_const``), placed before
        the other constants."""
        const = TConst(self.ranked_const_name(node), [1] * rank, "FP32", np.full([1] * rank, value, np.float32))
        self.const_key[id(const)] = -1
        self.foldable.add(id(const))
        self.consts.append(const)
        return const

    # -- elementwise ------------------------------------------------------------------------

    def _binary(self, node: Node, op: str) -> None:
        if any(not isinstance(a, Node) for a in node.args[:2]) or node.kwargs.get("alpha", 1) != 1:
            raise ExportError(f"TOSA lowering: %{node.name} {op.lower()} with a scalar operand "
                              "or alpha is not lowered yet under the FP profile")
        a, b, nhwc = self.binary_operands(node)
        shape = [max(x, y) for x, y in zip(a.t.shape, b.t.shape)]
        t = self.op(op, f"tosa_{op.lower()}_default", [a.t, b.t], shape, "FP32")
        self.values[node] = Value(t, nhwc)

    def add(self, node: Node) -> None:
        self._binary(node, "ADD")

    def sub(self, node: Node) -> None:
        self._binary(node, "SUB")

    def mul(self, node: Node) -> None:
        self._binary(node, "MUL")

    def scalar_binary(self, node: Node) -> None:
        """``add``/``sub``/``mul`` ``.Scalar``: the scalar as a float32 constant of the
        input's rank (ReplaceScalarWithTensorByProfilePass, MatchArgRanksPass)."""
        op = {aten.add.Scalar: "ADD", aten.sub.Scalar: "SUB", aten.mul.Scalar: "MUL"}[node.target]
        if node.kwargs.get("alpha", 1) != 1 or not isinstance(node.args[1], (int, float)):
            raise ExportError(f"TOSA lowering: %{node.name} {node.target} with alpha or a "
                              "non-number operand is not lowered yet under the FP profile")
        x = self.int8_input(node.args[0])
        c = self.scalar_const(node, float(node.args[1]), len(x.t.shape))
        t = self.op(op, f"tosa_{op.lower()}_default", [x.t, c], x.t.shape, "FP32")
        self.values[node] = Value(t, x.nhwc, x.flat_of)

    def div(self, node: Node) -> None:
        """``a / b`` = ``a * reciprocal(b)`` (ExecuTorch's DecomposeDivPass)."""
        if node.kwargs.get("rounding_mode") is not None or not isinstance(node.args[1], Node):
            raise ExportError(f"TOSA lowering: %{node.name} div with a rounding mode or a "
                              "scalar divisor is not lowered yet under the FP profile")
        a, b, nhwc = self.binary_operands(node)
        r = self.op("RECIPROCAL", "tosa_reciprocal_default", [b.t], b.t.shape, "FP32")
        shape = [max(x, y) for x, y in zip(a.t.shape, b.t.shape)]
        t = self.op("MUL", "tosa_mul_default", [a.t, r], shape, "FP32")
        self.values[node] = Value(t, nhwc)

    def unary(self, node: Node) -> None:
        x = self.int8_input(node.args[0])
        op = UNARY_OPS[node.target]
        t = self.op(op, f"tosa_{op.lower()}_default", [x.t], x.t.shape, "FP32")
        self.values[node] = Value(t, x.nhwc, x.flat_of)

    def clamp(self, node: Node) -> None:
        """relu / hardtanh / clamp: CLAMP with float32 bounds (ConvertToClampPass)."""
        x = self.int8_input(node.args[0])
        if node.target == aten.relu.default:
            lo, hi = 0.0, None
        else:
            lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
            hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
        if isinstance(lo, Node) or isinstance(hi, Node):
            raise ExportError(f"TOSA lowering: %{node.name} clamp with tensor bounds is not "
                              "lowered yet")
        t = self.op("CLAMP", "tosa_clamp_default", [x.t], x.t.shape, "FP32",
                    min_val=-FP32_MAX if lo is None else float(lo),
                    max_val=FP32_MAX if hi is None else float(hi))
        self.values[node] = Value(t, x.nhwc, x.flat_of)

    # -- convolution ------------------------------------------------------------------------

    def _conv(self, node: Node, x: Value, w_node: Node, b_node: Node | None, stride, pad,
              dilation, groups: int, et_conv: str, linear: bool) -> None:
        if w_node.op != "placeholder" or (b_node is not None and b_node.op != "placeholder"):
            raise ExportError(f"TOSA lowering: %{node.name} a convolution whose weights are "
                              "computed in the graph is not lowered")
        w = self.tensor(w_node).detach().numpy()
        out_ch = w.shape[0]
        wc, op, base, depthwise = self.conv_weights(w, w_node, x, groups, et_conv, linear,
                                                    "FP32")
        if b_node is None:
            bc = TConst(f"{et_conv}_bias", [out_ch], "FP32", np.zeros(out_ch, np.float32))
            self.zero_biases += 1
            self.const_key[id(bc)] = -1 - self.zero_biases
            self.consts.append(bc)
        else:
            bc = self.const_operand(b_node)
        shape = self.conv_output_shape(x, wc, depthwise, stride, pad, dilation, out_ch)
        conv = self.op(op, base, [x.t, wc, bc], shape, "FP32", input_zp=0.0, weight_zp=[0.0],
                       pad=list(pad), stride=list(stride), dilation=list(dilation))
        self.values[node] = Value(conv, True)

    def const_operand(self, placeholder: Node) -> TConst:
        if self.tensor(placeholder).dtype != torch.float32:
            raise ExportError(f"TOSA lowering: constant %{placeholder.name} is "
                              f"{self.tensor(placeholder).dtype}; the FP rules take float32")
        return super().const_operand(placeholder)

    # -- reductions -------------------------------------------------------------------------

    def _reduce_sum(self, t, axes: list[int]):
        for axis in axes:
            shape = list(t.shape)
            shape[axis] = 1
            t = self.op("REDUCE_SUM", "tosa_reduce_sum_default", [t], shape, "FP32", axis=axis)
        return t

    def sum(self, node: Node) -> None:
        """One REDUCE_SUM per axis, in the order given; a RESHAPE drops them unless kept
        (DecomposeSumPass)."""
        x = self.int8_input(node.args[0])
        if x.flat_of is not None or (x.nhwc and not (len(node.args) > 2 and node.args[2])):
            x = Value(self.as_torch(x), False)
        rank = len(x.t.shape)
        axes: list[int] = []
        for d in node.args[1] or range(rank):
            if self._axis(x, d, rank) not in axes:
                axes.append(self._axis(x, d, rank))
        t = self._reduce_sum(x.t, axes)
        if not (len(node.args) > 2 and node.args[2]):
            t = self.reshape(t, self.shape(node))
        self.values[node] = Value(t, x.nhwc)

    def mean(self, node: Node) -> None:
        """REDUCE_SUM over each reduced axis (of size > 1), then MUL by ``1/N``; a rank < 4
        input is viewed as rank 4 first and the result viewed back (DecomposeMeanDimPass)."""
        x = self.int8_input(node.args[0])
        shape = self.shape(node.args[0])
        rank = len(shape)
        given = node.args[1] if len(node.args) > 1 and node.args[1] is not None else range(rank)
        dims = []  # in the order given: one REDUCE_SUM each, in that order (DecomposeSumPass)
        for d in given:
            if d % rank not in dims and shape[d % rank] != 1:
                dims.append(d % rank)
        count = math.prod(shape[d] for d in dims)
        if x.nhwc:
            t, axes = x.t, [_nhwc_axis(d) for d in dims]
        else:
            t = self.as_torch(x)
            if rank > 4:
                raise ExportError(f"TOSA lowering: %{node.name} mean of a rank-{rank} tensor "
                                  "is not lowered yet under the FP profile")
            axes = [d + 4 - rank for d in dims]
            if rank < 4:
                self.view_name(node)
                t = self.reshape(t, [1] * (4 - rank) + shape)
        if not axes:
            raise ExportError(f"TOSA lowering: %{node.name} a mean over size-1 axes only is "
                              "not lowered yet")
        s = self._reduce_sum(t, axes)
        m = self.op("MUL", "tosa_mul_default", [s, self.scalar_const(node, 1 / count, 4)],
                    s.shape, "FP32")
        out = self.shape(node)
        if x.nhwc:
            keep = len(out) == 4
            self.values[node] = Value(m, True, None if keep else Value(m, True))
            if not keep and out != [m.shape[0], m.shape[3]]:
                raise ExportError(f"TOSA lowering: %{node.name} a mean over other than the "
                                  "spatial axes of an NHWC map is not lowered yet")
            return
        if list(m.shape) != out:
            m = self.reshape(m, out)
        self.values[node] = Value(m, False)

    def _axis(self, x: Value, dim: int, rank: int) -> int:
        return _nhwc_axis(dim % rank) if x.nhwc else dim % rank

    def softmax(self, node: Node) -> None:
        """REDUCE_MAX, SUB, EXP, REDUCE_SUM, RECIPROCAL, MUL along ``dim`` (ExecuTorch's
        DecomposeSoftmaxPass, the max subtracted for range as torch does)."""
        x = self.int8_input(node.args[0])
        if x.flat_of is not None:
            x = Value(self.as_torch(x), False)
        t = x.t
        axis = self._axis(x, node.args[1], len(t.shape))
        reduced = list(t.shape)
        reduced[axis] = 1
        m = self.op("REDUCE_MAX", "tosa_reduce_max_default", [t], reduced, "FP32", axis=axis)
        d = self.op("SUB", "tosa_sub_default", [t, m], t.shape, "FP32")
        e = self.op("EXP", "tosa_exp_default", [d], t.shape, "FP32")
        s = self._reduce_sum(e, [axis])
        r = self.op("RECIPROCAL", "tosa_reciprocal_default", [s], s.shape, "FP32")
        out = self.op("MUL", "tosa_mul_default", [e, r], t.shape, "FP32")
        self.values[node] = Value(out, x.nhwc)

    def gelu(self, node: Node) -> None:
        """``x * (0.5 * (1 + erf(x * sqrt(1/2))))``: MUL, ERF, ADD, MUL, MUL with float32
        constants (ExecuTorch's DecomposeGeluPass for float graphs)."""
        approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1
                                      else "none")
        if approximate != "none":
            raise ExportError(f"TOSA lowering: %{node.name} gelu(approximate={approximate!r}) "
                              "is not lowered yet under the FP profile")
        x = self.int8_input(node.args[0])
        rank, shape = len(x.t.shape), x.t.shape
        m = self.op("MUL", "tosa_mul_default",
                    [x.t, self.scalar_const(node, 0.70710678118654752440, rank)], shape, "FP32")
        e = self.op("ERF", "tosa_erf_default", [m], shape, "FP32")
        a = self.op("ADD", "tosa_add_default", [e, self.scalar_const(node, 1.0, rank)], shape,
                    "FP32")
        h = self.op("MUL", "tosa_mul_default", [a, self.scalar_const(node, 0.5, rank)], shape,
                    "FP32")
        out = self.op("MUL", "tosa_mul_default", [x.t, h], shape, "FP32")
        self.values[node] = Value(out, x.nhwc, x.flat_of)

    def layer_norm(self, node: Node) -> None:
        """ExecuTorch's DecomposeLayerNormPass, DecomposeVarPass and DecomposeMeanDimPass:
        ``mean`` (RESHAPE to rank 4, REDUCE_SUM, MUL by 1/N, RESHAPE back), SUB, MUL (the
        square), REDUCE_SUM, MUL by 1/N (the variance; its own mean is the same one,
        FuseDuplicateUsersPass), ADD eps, RSQRT, MUL, then MUL by the weight and ADD the
        bias, each viewed to the input's rank. Output 0 only (mean/rstd outputs unused).

        Constant names: ExecuTorch's passes make nine view_copy nodes for one layer_norm
        of a rank-3 input (two per mean, the scalars', the weight's and the bias's) and
        fold the constant ones into ``<view>_fused_const``; the offsets below are where its
        numbering puts each (the two means' equal 1/N constants merged as ``_common``)."""
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            raise ExportError(f"TOSA lowering: %{node.name} layer_norm whose mean or rstd "
                              "output is used is not lowered yet")
        x = self.int8_input(node.args[0])
        args = list(node.args) + [None] * 3
        weight, bias, eps = args[2], args[3], float(args[4] if args[4] is not None else 1e-5)
        shape = list(x.t.shape)
        rank, n = len(shape), len(node.args[1])
        if x.nhwc or x.flat_of is not None or rank > 3 or \
                any(isinstance(a, Node) and a.op != "placeholder" for a in (weight, bias)):
            raise ExportError(f"TOSA lowering: %{node.name} layer_norm of a rank-{rank} or "
                              "NHWC tensor, or with computed weights, is not lowered yet")
        base = self.views_before[node] + self.views_made
        self.views_made += 9

        def const(offset: int, values: np.ndarray, suffix: str = "") -> TConst:
            k = base + offset
            c = TConst(f"aten_view_copy_default{f'_{k}' if k else ''}_fused_const{suffix}",
                       list(values.shape), "FP32", values.astype(np.float32))
            self.const_key[id(c)] = -1
            self.consts.append(c)
            return c
        axes4 = [d + 4 - rank for d in range(rank - n, rank)]
        axes = list(range(rank - n, rank))
        count = math.prod(shape[d] for d in axes)
        one = [1] * rank
        eps_c = const(6, np.full(one, eps))
        var_c = const(5, np.full(one, 1 / count))
        mean_c = const(3, np.full([1] * 4, 1 / count), "_common")
        x4 = self.reshape(x.t, [1] * (4 - rank) + shape)
        mean = self.op("MUL", "tosa_mul_default", [self._reduce_sum(x4, axes4), mean_c],
                       [1] * (4 - rank) + [1 if i in axes else d for i, d in enumerate(shape)],
                       "FP32")
        mean = self.reshape(mean, [1 if i in axes else d for i, d in enumerate(shape)])
        diff = self.op("SUB", "tosa_sub_default", [x.t, mean], shape, "FP32")
        sq = self.op("MUL", "tosa_mul_default", [diff, diff], shape, "FP32")
        total = self._reduce_sum(sq, axes)
        var = self.op("MUL", "tosa_mul_default", [total, var_c], total.shape, "FP32")
        r = self.op("RSQRT", "tosa_rsqrt_default",
                    [self.op("ADD", "tosa_add_default", [var, eps_c], var.shape, "FP32")],
                    var.shape, "FP32")
        out = self.op("MUL", "tosa_mul_default", [diff, r], shape, "FP32")
        w_shape = [1] * (rank - n) + shape[rank - n:]
        for offset, param, op in ((7, weight, "MUL"), (8, bias, "ADD")):
            if param is not None:
                values = self.tensor(param).detach().numpy().reshape(w_shape)
                out = self.op(op, f"tosa_{op.lower()}_default", [out, const(offset, values)],
                              shape, "FP32")
        self.values[node] = Value(out, False)


def _nhwc_axis(d: int) -> int:
    return [0, 3, 1, 2][d]


# The INT rules that apply to float values unchanged (layout, identity, getitem) come along;
# every arithmetic rule is replaced or dropped.
_SHARED = {target: rule for target, rule in INT_HANDLERS.items()
           if rule in (_Lowering.identity, _Lowering.getitem, _Lowering.convolution,
                       _Lowering.linear, _Lowering.max_pool2d, _Lowering.avg_pool2d, TensorRules.view_copy, TensorRules.permute_copy,
                       TensorRules.select_copy, TensorRules.slice_copy, TensorRules.cat,
                       TensorRules.expand_copy, TensorRules.bmm)}

FloatLowering.HANDLERS = {
    **_SHARED,
    **dict.fromkeys(UNARY_OPS, FloatLowering.unary),
    aten.add.Tensor: FloatLowering.add,
    aten.sub.Tensor: FloatLowering.sub,
    aten.mul.Tensor: FloatLowering.mul,
    aten.div.Tensor: FloatLowering.div,
    **dict.fromkeys((aten.add.Scalar, aten.sub.Scalar, aten.mul.Scalar),
                    FloatLowering.scalar_binary),
    aten.relu.default: FloatLowering.clamp,
    aten.hardtanh.default: FloatLowering.clamp,
    aten.clamp.default: FloatLowering.clamp,
    aten.mean.dim: FloatLowering.mean,
    aten.sum.dim_IntList: FloatLowering.sum,
    aten._softmax.default: FloatLowering.softmax,
    aten.gelu.default: FloatLowering.gelu,
    aten.native_layer_norm.default: FloatLowering.layer_norm,
}
