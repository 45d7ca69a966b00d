"""Lowering rules for tensors in torch's own dimension order (the transformer operators):
views and permutes, select/slice/cat, expand, batched matmul, reductions and constants.

A value produced by the NHWC (convolution) part of a graph is first brought back to torch's
order (``as_torch``). The rules follow what ExecuTorch 1.5.1's passes make of each operator:
views become RESHAPE (DecomposeSelect, ConvertSqueezesToView), permutes TRANSPOSE, ``bmm``
an int8 MATMUL with both zero points and a RESCALE by ``s_a * s_b / s_out`` (RewriteMatmul-
Pass; ``mm`` through rank 3, ConvertMmToBmmPass), ``amax`` a REDUCE_MAX on int8 (the
quantizer shares its input's qparams), ``full`` a quantized constant
(ComputeConstantOpsAOTPass).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.fx import Node

from ....errors import ExportError
from .tosa_ir import TConst

aten = torch.ops.aten
NCHW = [0, 3, 1, 2]


def _inverse(perm: list[int]) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


class TensorRules:
    """Mixed into the lowering (``lowering._Lowering``); uses its ``int8_input``, ``op``,
    ``rescale``, ``reshape``, ``out_qparams``, ``shape`` and ``values``."""

    # -- layout --------------------------------------------------------------------------------

    def as_torch(self, v) -> object:
        """``v``'s tensor in torch's dimension order (NHWC maps are transposed back once)."""
        if v.flat_of is not None:
            n, _, _, c = v.flat_of.t.shape
            return self.reshape(v.flat_of.t, [n, c])
        if not v.nhwc:
            return v.t
        cache = self.__dict__.setdefault("_torch_order", {})
        if id(v.t) not in cache:
            if isinstance(v.t, TConst):
                cache[id(v.t)] = self.derived_const(v.t, v.t.values.transpose(NCHW))
            else:
                cache[id(v.t)] = self.layout(v.t, NCHW)
        return cache[id(v.t)]

    def _torch_value(self, node: Node, t, qp) -> None:
        from .lowering import Value

        self.values[node] = Value(t, False, None, qp)

    # -- shape operators -------------------------------------------------------------------

    def view_copy(self, node: Node) -> None:
        """view / unsqueeze / squeeze: a RESHAPE (flattening a pooled NHWC map needs none)."""
        x = self.int8_input(node.args[0])
        shape = self.shape(node)
        if x.nhwc and x.t.shape[1:3] == [1, 1] and shape == [x.t.shape[0], x.t.shape[3]]:
            from .lowering import Value

            self.values[node] = Value(x.t, False, Value(x.t, True), x.qp)
            return
        if x.flat_of is not None and shape == list(x.t.shape[:1]) + [x.t.shape[3]]:
            self.values[node] = x
            return
        src = self.as_torch(x)
        if isinstance(src, TConst):  # ExecuTorch's ComputeConstantOpsAOTPass
            const = self.derived_const(src, src.values.reshape(shape),
                                       f"{self.local[node]}_fused_const")
            # The view node stays where it was until folded: what reads it (a RESCALE) is
            # placed there, not after the constants.
            self.anchors[id(const)] = self.op("ANCHOR", "", [], [], "")
            self._torch_value(node, const, x.qp)
            return
        view = self.reshape(src, shape)
        self.movable.add(id(view))  # a view of the model: ExecuTorch's passes move it
        self._torch_value(node, view, x.qp)

    def permute_copy(self, node: Node) -> None:
        x = self.int8_input(node.args[0])
        src = self.as_torch(x)
        rank = len(src.shape)
        perm = [d % rank for d in node.args[1]]
        if perm == list(range(rank)):
            self._torch_value(node, src, x.qp)
            return
        shape = [src.shape[p] for p in perm]
        t = self.op("TRANSPOSE", "tosa_transpose_default", [src], shape, src.dtype, perms=perm)
        self.movable.add(id(t))
        self._torch_value(node, t, x.qp)

    def _slice(self, src, start: list[int], size: list[int]):
        s = self.op("CONST_SHAPE", "tosa_const_shape_default", [], [len(start)], "SHAPE",
                    values=list(start))
        z = self.op("CONST_SHAPE", "tosa_const_shape_default", [], [len(size)], "SHAPE",
                    values=list(size))
        return self.op("SLICE", "tosa_slice_default", [src, s, z], list(size), src.dtype)

    def select_copy(self, node: Node) -> None:
        """SLICE of one index along ``dim``, then a RESHAPE dropping it (DecomposeSelect)."""
        x = self.int8_input(node.args[0])
        src = self.as_torch(x)
        rank = len(src.shape)
        dim = node.args[1] % rank
        index = node.args[2] % src.shape[dim]
        start = [0] * rank
        start[dim] = index
        size = list(src.shape)
        size[dim] = 1
        t = self._slice(src, start, size)
        self._torch_value(node, self.reshape(t, self.shape(node)), x.qp)

    def slice_copy(self, node: Node) -> None:
        x = self.int8_input(node.args[0])
        src = self.as_torch(x)
        rank = len(src.shape)
        args = list(node.args) + [None] * 4
        dim = (args[1] or 0) % rank
        length = src.shape[dim]
        start = 0 if args[2] is None else args[2]
        end = length if args[3] is None else args[3]
        step = args[4] or 1
        start = max(0, min(length, start + length if start < 0 else start))
        end = max(start, min(length, end + length if end < 0 else end))
        if step != 1:
            raise ExportError(f"TOSA lowering: %{node.name} a slice with step {step} is not "
                              "lowered yet")
        begin = [0] * rank
        begin[dim] = start
        size = list(src.shape)
        size[dim] = end - start
        if size == list(src.shape):
            self._torch_value(node, src, x.qp)
            return
        self._torch_value(node, self._slice(src, begin, size), x.qp)

    def cat(self, node: Node) -> None:
        """CONCAT of int8 tensors sharing one set of qparams (the quantizer shares them), or
        of float32 tensors."""
        xs = [self.int8_input(a) for a in node.args[0]]
        dtype = xs[0].t.dtype
        if len({(x.qp.scale, x.qp.zp) if x.qp else None for x in xs}) > 1:
            raise ExportError(f"TOSA lowering: %{node.name} a cat of inputs with different "
                              "quantization parameters is not lowered yet")
        out_qp = self.out_qparams(node)
        rank = len(self.shape(node))
        dim = (node.args[1] if len(node.args) > 1 else 0) % rank
        if all(x.nhwc for x in xs):
            from .lowering import NHWC, Value

            dim = NHWC.index(dim)
            shape = list(xs[0].t.shape)
            shape[dim] = sum(x.t.shape[dim] for x in xs)
            t = self.op("CONCAT", "tosa_concat_default", [x.t for x in xs], shape, dtype,
                        axis=dim)
            self.values[node] = Value(t, True, None, out_qp)
            return
        srcs = [self.as_torch(x) for x in xs]
        t = self.op("CONCAT", "tosa_concat_default", srcs, self.shape(node), dtype, axis=dim)
        self._torch_value(node, t, out_qp)

    def expand_copy(self, node: Node) -> None:
        """An expand that adds nothing is dropped; a real one is a TILE (ExecuTorch's
        ConvertExpandCopyToRepeatPass)."""
        x = self.int8_input(node.args[0])
        src = self.as_torch(x)
        shape = self.shape(node)
        if list(src.shape) == shape:
            self._torch_value(node, src, x.qp)
            return
        if len(src.shape) != len(shape):
            src = self.reshape(src, [1] * (len(shape) - len(src.shape)) + list(src.shape))
        multiples = [o // i if i != o else 1 for i, o in zip(src.shape, shape)]
        cs = self.const_shape(multiples)
        t = self.op("TILE", "tosa_tile_default", [src, cs], shape, src.dtype)
        self._torch_value(node, t, x.qp)

    # -- arithmetic ---------------------------------------------------------------------------

    def bmm(self, node: Node) -> None:
        """MATMUL of the int8 operands (zero points as its inputs), RESCALE to int8; or of
        float32 operands."""
        a, b = (self.int8_input(x) for x in node.args[:2])
        out_qp = self.out_qparams(node)
        ta, tb = self.as_torch(a), self.as_torch(b)
        rank = len(ta.shape)
        if rank == 2:  # ConvertMmToBmmPass
            ta = self.reshape(ta, [1, *ta.shape])
            tb = self.reshape(tb, [1, *tb.shape])
        shape = [ta.shape[0], ta.shape[1], tb.shape[2]]
        if a.qp is None:  # float32 operands (the FP profile): zero points 0, no RESCALE
            r = self.op("MATMUL", "tosa_matmul_default", [ta, tb], shape, "FP32", a_zp=0.0,
                        b_zp=0.0)
        else:
            m = self.op("MATMUL", "tosa_matmul_default", [ta, tb], shape, "INT32",
                        a_zp=a.qp.zp, b_zp=b.qp.zp)
            r = self.rescale(m, [a.qp.scale * b.qp.scale / out_qp.scale], 0, out_qp.zp, "INT8")
        if rank == 2:
            r = self.reshape(r, self.shape(node))
        self._torch_value(node, r, out_qp)

    def amax(self, node: Node) -> None:
        """REDUCE_MAX per axis on int8 (output qparams = input's), RESHAPE if not kept."""
        x = self.int8_input(node.args[0])
        out_qp = self.out_qparams(node)
        if (out_qp.scale, out_qp.zp) != (x.qp.scale, x.qp.zp):
            raise ExportError(f"TOSA lowering: %{node.name} an amax whose output is quantized "
                              "differently from its input is not lowered yet")
        t = self.as_torch(x)
        rank = len(t.shape)
        for axis in sorted({d % rank for d in node.args[1]}):
            shape = list(t.shape)
            shape[axis] = 1
            t = self.op("REDUCE_MAX", "tosa_reduce_max_default", [t], shape, "INT8",
                        axis=axis)
        if list(t.shape) != self.shape(node):
            t = self.reshape(t, self.shape(node))
        self._torch_value(node, t, out_qp)

    def full(self, node: Node) -> None:
        """A constant the quantize that follows turns into an int8 constant."""
        shape = self.shape(node)
        data = np.full(shape, float(node.args[1]), dtype=np.float32)
        self.float_consts[node] = data

    def quantized_constant(self, q: Node, data: np.ndarray) -> TConst:
        """``quantize_per_tensor`` of a constant computed ahead of time (ExecuTorch's
        ComputeConstantOpsAOTPass names it ``<producer>_pre_computed``)."""
        qd = torch.ops.quantized_decomposed.quantize_per_tensor.default
        values = qd(torch.from_numpy(data), float(q.args[1]), int(q.args[2]), int(q.args[3]),
                    int(q.args[4]), q.args[5]).numpy()
        src = q.args[0]
        const = TConst(f"{self.local[src]}_pre_computed", list(values.shape), "INT8", values)
        self.const_key[id(const)] = -1  # ExecuTorch's folded constants come first
        self.foldable.add(id(const))
        self.consts.append(const)
        return const


RULES = {
    aten.view_copy.default: TensorRules.view_copy,
    aten.unsqueeze_copy.default: TensorRules.view_copy,
    aten.squeeze_copy.dims: TensorRules.view_copy,
    aten.squeeze_copy.dim: TensorRules.view_copy,
    aten.permute_copy.default: TensorRules.permute_copy,
    aten.select_copy.int: TensorRules.select_copy,
    aten.slice_copy.Tensor: TensorRules.slice_copy,
    aten.cat.default: TensorRules.cat,
    aten.expand_copy.default: TensorRules.expand_copy,
    aten.bmm.default: TensorRules.bmm,
    aten.mm.default: TensorRules.bmm,
    aten.amax.default: TensorRules.amax,
    aten.full.default: TensorRules.full,
}
