"""Lower a quantized edge subgraph (int8 in, int8 out) to TOSA, as ExecuTorch 1.5.1 emits it.

The rules, per edge operator (Q/DQ pairs fold into the operators' quantization parameters):
- ``add``: each int8 input is RESCALEd to int32 at scale ``2*max(s_a, s_b) / 2**20``, ADD,
  then RESCALE to the output's int8 qparams (4 RESCALE-free ops become 3 RESCALE + ADD).
- ``convolution``/``linear``: CONV2D (DEPTHWISE_CONV2D when ``groups == in_channels > 1``)
  with int8 weights pre-permuted to OHWI (depthwise HWICM), the int32 bias as is, and a
  per-channel RESCALE ``s_in * s_w[c] / s_out``; a following ReLU, or ReLU6 whose 6.0
  quantizes to the int8 maximum, folds into that RESCALE's saturation. ``linear`` is a 1x1
  CONV2D on ``[N, 1, 1, C]`` followed by a RESHAPE.
- ``mean.dim`` over H, W / adaptive average pooling to 1x1: AVG_POOL2D.
- Graphs with a convolution or pooling work in NHWC: a TRANSPOSE follows each rank-4 input and
  precedes each rank-4 output; the delegate's I/O stay in torch (NCHW) order.
Float graphs under the FP profile reuse this walk with other rules (``lowering_float``).
Operators are ordered as in ExecuTorch's final FX graph (a RESCALE right after the node
producing its input) and named ``tosa_<op>_default[_N]`` in that order (``tosa_ir``).
"""

from __future__ import annotations

import functools
import operator
import re
from dataclasses import dataclass

import numpy as np
import torch
from torch.export import ExportedProgram
from torch.fx import Node

from ....errors import ExportError, LoweringRefusedError
from .lowering_tensor import RULES as TENSOR_RULES
from .lowering_tensor import TensorRules
from .operator_support import DQ_OPS, IDENTITY_NAMES, Q_OPS
from .propagation import propagate_data_movement
from .specification import TosaSpecification
from .tosa_ir import TConst, TInput, TOp, assign_names, serialize

aten = torch.ops.aten
NHWC = [0, 2, 3, 1]
NCHW = [0, 3, 1, 2]
INT8_MAX = 127
# Operators ExecuTorch's permute passes see as elementwise: the INT profile's, and the FP
# profile's functions that the INT profile makes TABLEs (InsertTableOpsPass's table ops).
FP_UNARY = frozenset({"SIGMOID", "TANH", "EXP", "RECIPROCAL", "RSQRT", "ERF", "LOG"})
ELEMENTWISE = {"RESCALE", "TABLE", "MUL", "ADD", "SUB", "CLAMP", *FP_UNARY}
ADD_SHIFT_BITS = 20  # int8 operands of ADD are shifted 20 bits up (ExecuTorch's choice)

_DTYPES = {torch.int8: "INT8", torch.int16: "INT16", torch.int32: "INT32", torch.bool: "BOOL"}
# Our edge node names drop the namespace and overload; ExecuTorch's keep them.
_ET_BASES = {
    "quantize_per_tensor": "quantized_decomposed_quantize_per_tensor_default",
    "dequantize_per_tensor": "quantized_decomposed_dequantize_per_tensor_default",
    "convolution": "aten_convolution_default",
    "add": "aten_add_tensor",
}


def et_op_name(node: Node, index: int) -> str:
    """ExecuTorch's edge name for the ``index``-th node of an aten op in a graph:
    ``aten_<op>_<overload>[_<index>]`` (``aten_hardswish_default_1``)."""
    parts = str(node.target).split("::")[-1].split(".")
    op, overload = (parts[-2], parts[-1]) if len(parts) >= 2 else (parts[0], "default")
    return f"aten_{op}_{overload.lower()}{f'_{index}' if index else ''}"


# Unary functions ExecuTorch's INT profile lowers as an int8 TABLE (InsertTableOpsPass).
TABLE_FUNCTIONS = {
    aten.sigmoid.default: torch.sigmoid,
    aten.tanh.default: torch.tanh,
    aten.hardsigmoid.default: torch.nn.functional.hardsigmoid,
    aten.hardswish.default: torch.nn.functional.hardswish,
    aten.silu.default: torch.nn.functional.silu,
    aten.exp.default: torch.exp,
    aten.log.default: torch.log,
    aten.rsqrt.default: torch.rsqrt,
    aten.reciprocal.default: torch.reciprocal,
    aten.erf.default: torch.erf,
    aten.gelu.default: torch.nn.functional.gelu,
}


def int8_table(fn, in_qp: QParams, out_qp: QParams) -> np.ndarray:
    """The 256 int8 outputs for the int8 inputs -128..127: dequantize, ``fn``, quantize --
    with the quantized_decomposed ops, so the rounding is the quantized eager model's."""
    qd = torch.ops.quantized_decomposed
    codes = torch.arange(-128, 128, dtype=torch.int8)
    x = qd.dequantize_per_tensor.default(codes, in_qp.scale, in_qp.zp, -128, 127, torch.int8)
    y = qd.quantize_per_tensor.default(fn(x), out_qp.scale, out_qp.zp, -128, 127, torch.int8)
    return y.numpy()


def et_name(name: str) -> str:
    """ExecuTorch's edge name for one of our node names (``quantize_per_tensor_1`` ->
    ``quantized_decomposed_quantize_per_tensor_default_1``)."""
    m = re.fullmatch(r"(.*?)(_\d+)?", name)
    base, suffix = m.group(1), m.group(2) or ""
    return _ET_BASES[base] + suffix if base in _ET_BASES else name


@dataclass
class QParams:
    scale: float | list[float]
    zp: int | list[int]


@dataclass
class Value:
    """What an FX node is in TOSA: a tensor, its layout, and (int8 values) its qparams."""

    t: TInput | TConst | TOp
    nhwc: bool = False                 # a rank-4 torch tensor stored NHWC
    flat_of: Value | None = None       # a [N, C] view of an NHWC [N, 1, 1, C] tensor
    qp: QParams | None = None


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    return [max(x, y) for x, y in zip(a, b)]


def _per_tensor(node: Node) -> QParams:
    return QParams(float(node.args[1]), int(node.args[2]))


class _Lowering(TensorRules):
    # Operators that make ExecuTorch lay the whole graph out NHWC.
    NHWC_OPS = (aten.convolution.default, aten.mean.dim, aten.avg_pool2d.default,
                aten._adaptive_avg_pool2d.default)
    INPUT_DTYPES = _DTYPES  # what a delegate input may be (the INT profile: integers)

    def __init__(self, ep: ExportedProgram, spec: TosaSpecification):
        self.ep = ep
        self.spec = spec
        self.order: list = []
        self.consts: list[TConst] = []
        self.values: dict[Node, Value] = {}
        self.float_consts: dict[Node, np.ndarray] = {}  # folded ahead of time (``full``)
        self.foldable: set[int] = set()  # ids of constants folded ahead of time
        self.pool_count = 0
        self.zero_biases = 0
        self.tables = 0
        gm = ep.graph_module
        self.nhwc = any(n.target in self.NHWC_OPS for n in gm.graph.nodes)
        self.specs = {s.arg.name: s for s in ep.graph_signature.input_specs
                      if hasattr(s.arg, "name")}
        self.const_key: dict[int, float] = {}
        self.attached: dict[int, list[TOp]] = {}  # ops ExecuTorch places right after a constant
        self.common = self._equal_constants()
        # ExecuTorch re-traces each delegated subgraph, so its operator nodes are numbered
        # within the partition (the first convolution of every delegate is
        # ``aten_convolution_default``); placeholders keep the names of the whole graph.
        self.duplicate_of = self._duplicates()
        self.const_shapes: dict[tuple[int, ...], TOp] = {}
        self.movable: set[int] = set()  # RESHAPE/TRANSPOSE of the model's views and permutes
        self.anchors: dict[int, TOp] = {}  # a folded view-of-constant -> where the view was
        self.local: dict[Node, str] = {}
        self.nchw_tail: set[int] = set()
        seen: dict[object, int] = {}
        for n in gm.graph.nodes:
            if n.op == "call_function" and n not in self.duplicate_of:
                # ExecuTorch decomposes linear into a convolution before numbering them
                target = aten.convolution.default if n.target == aten.linear.default \
                    else n.target
                k = seen.get(target, 0)
                seen[target] = k + 1
                self.local[n] = et_op_name(n, k) if target is n.target else \
                    f"aten_convolution_default{f'_{k}' if k else ''}"

    # -- helpers ----------------------------------------------------------------------------

    def _duplicates(self) -> dict[Node, Node]:
        """ExecuTorch's FuseDuplicateUsersPass (after Q/DQ folding): an operator with the
        same target and arguments as an earlier one -- arguments compared through their
        quantize/dequantize, i.e. the int8 values they read -- is that earlier one (the
        mean that layer_norm and its var both compute). Maps each duplicate to it; equal
        output qparams are required so a fused value is read as it was quantized."""
        duplicate_of: dict[Node, Node] = {}

        def source(a: Node) -> Node:
            for _ in range(len(self.ep.graph_module.graph.nodes)):  # bounded walk
                if a.target not in Q_OPS and a.target not in DQ_OPS:
                    break
                a = a.args[0]
            return duplicate_of.get(a, a)

        def key(value):
            if isinstance(value, Node):
                return ("node", source(value).name)
            if isinstance(value, (list, tuple)):
                return tuple(key(v) for v in value)
            if isinstance(value, dict):
                return tuple(sorted((k, key(v)) for k, v in value.items()))
            return repr(value)

        def out_q(n: Node):
            return tuple((u.args[1], u.args[2]) for u in n.users if u.target in Q_OPS)

        first: dict[tuple, Node] = {}
        for n in self.ep.graph_module.graph.nodes:
            if n.op != "call_function" or n.target in Q_OPS or n.target in DQ_OPS or \
                    not any(isinstance(a, Node) for a in n.all_input_nodes):
                continue
            sig = (str(n.target), key(n.args), key(n.kwargs))
            rep = first.setdefault(sig, n)
            if rep is not n and out_q(rep) == out_q(n):
                duplicate_of[n] = rep
        return duplicate_of

    def _equal_constants(self) -> dict[str, tuple[str, int]]:
        """ExecuTorch merges equal constant placeholders (same dtype, shape and bytes) into one named ``<first>_common`` where the first one was; a zero bias
        can so take the name of a zero-point buffer. Maps a placeholder name to (the name the
        TOSA constant gets, its position among the placeholders)."""
        groups: dict[tuple, list[tuple[str, int]]] = {}
        position = 0
        for node in self.ep.graph_module.graph.nodes:
            if node.op != "placeholder":
                continue
            position += 1
            spec = self.specs.get(node.name)
            if spec is None or spec.kind.name == "USER_INPUT":
                continue
            t = self.tensor(node).detach()
            key = (str(t.dtype), tuple(t.shape), t.contiguous().numpy().tobytes())
            groups.setdefault(key, []).append((node.name, position))
        out: dict[str, tuple[str, int]] = {}
        for members in groups.values():
            first, pos = members[0]
            for name, own in members:
                out[name] = (f"{first}_common", pos) if len(members) > 1 else (name, own)
        return out

    def tensor(self, node: Node) -> torch.Tensor:
        spec = self.specs[node.name]
        if spec.target in self.ep.state_dict:
            return self.ep.state_dict[spec.target]
        return self.ep.constants[spec.target]

    def insert_after(self, anchor, new) -> None:
        if isinstance(anchor, TConst) and id(anchor) in self.anchors:
            anchor = self.anchors[id(anchor)]  # a folded view: where the view node was
        elif isinstance(anchor, TConst):  # e.g. the RESCALE of a constant operand
            self.attached.setdefault(id(anchor), []).append(new)
            return
        self.order.insert(self.order.index(anchor) + 1, new)

    def op(self, op: str, base: str, inputs: list, shape: list[int], dtype: str,
           after=None, **attrs) -> TOp:
        t = TOp(op, base, inputs, list(shape), dtype, attrs)
        if after is None:
            self.order.append(t)
        else:
            self.insert_after(after, t)
        return t

    def rescale(self, src, scales: list[float], in_zp: int, out_zp: int, dtype: str,
                after=None) -> TOp:
        return self.op("RESCALE", "tosa_rescale_default", [src], src.shape, dtype,
                       after=after if after is not None else src, scales=scales,
                       input_zp=in_zp, output_zp=out_zp)

    def _nchw_tail(self, outputs: list[TOp]) -> set[int]:
        """The elementwise operators ExecuTorch computes in NCHW: those whose results only
        reach rank-4 outputs through other such operators. Its RemovePermutesAroundElementwise-
        Ops moves the output TRANSPOSE above them (int8->int32 RESCALEs, TABLE, MUL, ADD, SUB,
        CLAMP and the RESCALE back to int8 after them; not the RESCALE of a conv or sum)."""
        ops = [o for o in self.order if isinstance(o, TOp)]
        users: dict[int, list[TOp]] = {}
        for o in ops:
            for i in o.inputs:
                users.setdefault(id(i), []).append(o)
        is_out = {id(o) for o in outputs}

        def eligible(o: TOp) -> bool:
            if o.op not in ELEMENTWISE or len(o.shape) != 4:
                return False
            operands = o.inputs[:1] if o.op == "TABLE" else o.inputs  # not the table itself
            if any(isinstance(i, TConst) and any(d != 1 for d in i.shape) for i in operands):
                return False
            if o.op == "RESCALE" and o.dtype != "INT32":
                src = o.inputs[0]
                return isinstance(src, TOp) and src.op in ELEMENTWISE
            return True
        tail = {id(o) for o in ops if eligible(o)}
        changed = True
        while changed:
            changed = False
            for o in ops:
                if id(o) in tail and (
                        any(id(u) not in tail for u in users.get(id(o), []))
                        or (not users.get(id(o)) and id(o) not in is_out)):
                    tail.discard(id(o))
                    changed = True
        # Moving the TRANSPOSE up pays only if it does not add TRANSPOSEs: the NHWC tensors
        # entering the tail (other than outputs converted anyway) must not outnumber the
        # outputs it produces (``a * b`` of two conv results stays NHWC).
        entering = {id(i) for o in ops if id(o) in tail for i in o.inputs
                    if isinstance(i, TOp) and id(i) not in tail and id(i) not in is_out
                    and any(d != 1 for d in i.shape)
                    and not (i.op in ("TRANSPOSE", "RESHAPE") and isinstance(i.inputs[0], TInput))}
        if len(entering) > len(is_out & tail):
            return set()
        return tail

    def _to_nchw_outputs(self, values: list[Value]) -> list:
        outs = [v.t for v in values]
        tail = self._nchw_tail([t for v, t in zip(values, outs) if v.nhwc])
        self.nchw_tail = tail  # rank-4 results these ops now hold in NCHW (value_map)
        converted: dict[int, TOp] = {}

        def nchw(src):
            if isinstance(src, TOp) and src.op in ("TRANSPOSE", "RESHAPE") and \
                    isinstance(src.inputs[0], TInput):
                return src.inputs[0]  # the delegate's NCHW input itself
            if id(src) not in converted:
                anchor = len(self.order)
                converted[id(src)] = self.layout(src, NCHW)
                moved = self.order[anchor:]
                del self.order[anchor:]
                at = self.order.index(src) + 1
                self.order[at:at] = moved
            return converted[id(src)]
        for o in [o for o in self.order if isinstance(o, TOp) and id(o) in tail]:
            if True:
                # constants (and a constant's RESCALE) are [1, 1, 1, 1]: no layout
                o.inputs = [i if isinstance(i, TConst) or id(i) in tail
                            or all(d == 1 for d in i.shape) else nchw(i) for i in o.inputs]
                o.shape = [o.shape[k] for k in NCHW]
        return [t if not v.nhwc or id(t) in tail else nchw(t) for v, t in zip(values, outs)]

    def layout(self, t, perm: list[int]) -> TOp:
        """NCHW <-> NHWC at the delegate boundary: a TRANSPOSE, or -- when only size-1 axes
        move, e.g. [1, 1, 1, C] -> [1, C, 1, 1] -- a RESHAPE, as ExecuTorch canonicalises
        such permutes to views."""
        shape = [t.shape[i] for i in perm]
        if [i for i in perm if t.shape[i] != 1] == [i for i, d in enumerate(t.shape) if d != 1]:
            return self.reshape(t, shape)
        return self.op("TRANSPOSE", "tosa_transpose_default", [t], shape, t.dtype, perms=perm)

    def int8_input(self, node: Node) -> Value:
        """The int8 value and qparams behind a dequantize argument."""
        if node.target not in DQ_OPS and node in self.values and self.values[node].qp is not None:
            return self.values[node]  # int8 data movement chained without a quantize between
        if node.target not in DQ_OPS:
            raise ExportError(f"TOSA lowering: %{node.name} ({node.target}) should be a "
                              "dequantize; quantize the model with TOSAQuantizer first")
        src = node.args[0]
        if src.op == "placeholder" and self.specs[src.name].kind.name != "USER_INPUT":
            return Value(self.const_operand(src), self.nhwc and self.tensor(src).dim() == 4,
                         None, _per_tensor(node))
        value = self.values[src]
        return Value(value.t, value.nhwc, value.flat_of, _per_tensor(node))

    def const_operand(self, placeholder: Node) -> TConst:
        """A quantized constant used as an operand (``mul(x, 1/N)``): stored as is, NHWC-
        permuted when rank 4, under the name ExecuTorch gives it."""
        name, _ = self.common.get(placeholder.name, (placeholder.name, 0))
        for c in self.consts:
            if c.name == name:
                return c
        t = self.tensor(placeholder).detach()
        if self.nhwc and t.dim() == 4:
            t = t.permute(*NHWC)
        dtype = self.INPUT_DTYPES[t.dtype]
        const = TConst(name, list(t.shape), dtype, np.ascontiguousarray(t.numpy()))
        self._place_const(placeholder, const)
        return const

    def out_qparams(self, node: Node) -> QParams:
        users = list(node.users)
        if len(users) != 1 or users[0].target not in Q_OPS:
            raise ExportError(f"TOSA lowering: %{node.name} ({node.target}) must feed exactly "
                              "one quantize; quantize the model with TOSAQuantizer first")
        return _per_tensor(users[0])

    def shape(self, node: Node) -> list[int]:
        return [int(d) for d in node.meta["val"].shape]

    def tosa_shape(self, node: Node) -> list[int]:
        shape = self.shape(node)
        return [shape[i] for i in NHWC] if self.nhwc and len(shape) == 4 else shape

    # -- graph walk ---------------------------------------------------------------------------

    def run(self) -> tuple[list, list]:
        gm = self.ep.graph_module
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                self.placeholder(node)
            elif node.op == "call_function":
                self.call(node)
        results = list(gm.graph.output_node().args[0])
        outputs = self._to_nchw_outputs([self.values[o] for o in results])
        for node, out in zip(results, outputs):
            if not isinstance(out, TOp):  # Vela refuses an output tensor no operator writes
                raise LoweringRefusedError(
                    f"TOSA lowering: %{node.name} passes a delegate input (or constant) "
                    "through unchanged; a delegate output must be computed", node.name)
        propagate_data_movement(self.order, outputs, self.movable)
        self._finish_order()
        used = {id(i) for op in [*self.order, *(a for v in self.attached.values() for a in v)]
                for i in getattr(op, "inputs", ())}
        consts = sorted((c for c in self.consts if id(c) in used),  # constants a rule replaced
                        key=lambda c: self.const_key.get(id(c), 0))  # (reshaped...) go
        consts = self._merge_equal(consts)
        nodes = [n for c in consts for n in (c, *self.attached.get(id(c), ()))] + self.order
        assign_names(nodes)
        return nodes, outputs

    def _finish_order(self) -> None:
        """Drop the anchors of folded views; put each shared CONST_SHAPE right before its
        first reader (ExecuTorch creates it there), after any reordering."""
        self.order = [o for o in self.order if not (isinstance(o, TOp) and o.op == "ANCHOR")]
        for cs in self.const_shapes.values():
            if cs not in self.order:
                continue
            self.order.remove(cs)
            first = next(i for i, o in enumerate(self.order)
                         if isinstance(o, TOp) and any(x is cs for x in o.inputs))
            self.order.insert(first, cs)

    def placeholder(self, node: Node) -> None:
        spec = self.specs.get(node.name)
        if spec is not None and spec.kind.name != "USER_INPUT":
            self.values[node] = Value(TConst(node.name, [], "", np.zeros(0)))  # used via users
            return
        val = node.meta["val"]
        dtype = self.INPUT_DTYPES.get(val.dtype)
        if dtype is None:
            user = next(iter(node.users), None)
            raise LoweringRefusedError(
                f"TOSA lowering: delegate input %{node.name} is {val.dtype}; this profile "
                f"takes {'/'.join(self.INPUT_DTYPES.values()).lower()} tensors",
                user.name if user is not None else None)
        t = TInput(et_name(node.name), self.shape(node), dtype)
        self.order.append(t)
        value = Value(t)
        if self.nhwc and val.dim() == 4:
            value = Value(self.layout(t, NHWC), nhwc=True)
        self.values[node] = value

    @classmethod
    def rule(cls, node: Node):
        """The method lowering ``node``'s operator, or None."""
        handler = cls.HANDLERS.get(node.target)
        if handler is None and str(node.target) in IDENTITY_NAMES:
            handler = _Lowering.identity
        return handler

    def call(self, node: Node) -> None:
        target = node.target
        if target in DQ_OPS:
            return  # folded into the users' input qparams
        if target in Q_OPS:
            src = node.args[0]
            if src in self.float_consts:
                const = self.quantized_constant(node, self.float_consts[src])
                self.values[node] = Value(const, False, None, _per_tensor(node))
                return
            self.values[node] = self.values[src]
            return
        if node in self.duplicate_of:
            self.values[node] = self.values[self.duplicate_of[node]]
            return
        handler = self.rule(node)
        if handler is None:
            raise LoweringRefusedError(f"edgetorch's TOSA lowering has no rule for {target}",
                                       node.name)
        try:
            handler(self, node)
        except LoweringRefusedError:
            raise
        except ExportError as e:  # the partitioner leaves this node on the CPU
            raise LoweringRefusedError(e.args[0], node.name) from e

    # -- operators ----------------------------------------------------------------------------

    def binary_operands(self, node: Node) -> tuple[Value, Value, bool]:
        """The two int8 operands in one layout and rank (TOSA broadcasts only equal ranks:
        the lower-rank one gets leading 1s, ExecuTorch's MatchArgRanksPass); True if the
        result is NHWC."""
        a, b = (self.int8_input(x) for x in node.args[:2])
        ta, tb = a.t, b.t
        nhwc = a.nhwc and (b.nhwc or all(d == 1 for d in b.t.shape))
        nhwc = nhwc or (b.nhwc and all(d == 1 for d in a.t.shape))
        if not nhwc or a.flat_of is not None or b.flat_of is not None:
            nhwc = False
            ta, tb = self.as_torch(a), self.as_torch(b)
        rank = max(len(ta.shape), len(tb.shape))
        ta, tb = (self._rank(t, rank, node) for t in (ta, tb))
        return Value(ta, nhwc, None, a.qp), Value(tb, nhwc, None, b.qp), nhwc

    def ranked_const_name(self, node: Node) -> str | None:
        """The name of a constant operand of ``node`` given leading 1s (None: its own)."""
        return None

    def _rank(self, t, rank: int, node: Node):
        if len(t.shape) == rank:
            return t
        shape = [1] * (rank - len(t.shape)) + list(t.shape)
        if isinstance(t, TConst):
            return self.derived_const(t, t.values.reshape(shape), self.ranked_const_name(node))
        return self.reshape(t, shape)

    def derived_const(self, src: TConst, values: np.ndarray, name: str | None = None) -> TConst:
        """A constant computed from ``src`` ahead of time (reshaped, permuted), where ``src``
        was; ``src`` is dropped if nothing else reads it. A new ``name`` marks a constant
        ExecuTorch folds into a placeholder of its own (``<node>_fused_const``): equal ones
        are merged at the end (``_merge_equal``)."""
        const = TConst(name or src.name, list(values.shape), src.dtype,
                       np.ascontiguousarray(values))
        self.const_key[id(const)] = self.const_key.get(id(src), 0)
        if name is not None:
            self.foldable.add(id(const))
        self.consts.append(const)
        return const

    def _merge_equal(self, consts: list[TConst]) -> list[TConst]:
        """Folded constants with equal dtype, shape and bytes become one, named after the
        first with ``_common`` (ExecuTorch's FuseEqualPlaceholdersPass); its readers are
        pointed at it."""
        groups: dict[tuple, list[TConst]] = {}
        for c in consts:
            if id(c) in self.foldable:
                key = (c.dtype, tuple(c.shape), np.ascontiguousarray(c.values).tobytes())
                groups.setdefault(key, []).append(c)
        replace: dict[int, TConst] = {}
        for members in groups.values():
            if len(members) > 1:
                members[0].name += "_common"
                replace.update((id(m), members[0]) for m in members[1:])
        if not replace:
            return consts
        for op in [*self.order, *(a for v in self.attached.values() for a in v)]:
            if isinstance(op, TOp):
                op.inputs = [replace.get(id(i), i) for i in op.inputs]
        for dropped, kept in replace.items():
            self.attached.setdefault(id(kept), []).extend(self.attached.pop(dropped, []))
        return [c for c in consts if id(c) not in replace]

    def add(self, node: Node, op: str = "ADD") -> None:
        """add/sub: both int8 operands RESCALEd to int32 at ``2*max(s_a, s_b) / 2**20``."""
        a, b, nhwc = self.binary_operands(node)
        out_qp = self.out_qparams(node)
        scale = 2 * max(a.qp.scale, b.qp.scale) / (1 << ADD_SHIFT_BITS)
        ra = self.rescale(a.t, [a.qp.scale / scale], a.qp.zp, 0, "INT32")
        rb = self.rescale(b.t, [b.qp.scale / scale], b.qp.zp, 0, "INT32") \
            if node.args[1] is not node.args[0] else ra
        s = self.op(op, f"tosa_{op.lower()}_default", [ra, rb],
                    _broadcast(ra.shape, rb.shape), "INT32")
        r = self.rescale(s, [scale / out_qp.scale], 0, out_qp.zp, "INT8")
        self.values[node] = Value(r, nhwc, None, out_qp)

    def sub(self, node: Node) -> None:
        self.add(node, "SUB")

    def max_pool2d(self, node: Node) -> None:
        """MAX_POOL2D on int8 (input and output share qparams); the trailing padding is
        adjusted, or the input SLICEd, so the output size is exact (as for convolutions)."""
        x = self.int8_input(node.args[0])
        args = list(node.args) + [None] * 6
        if args[4] not in (None, 1, [1, 1], (1, 1)) or args[5]:
            raise ExportError(f"TOSA lowering: %{node.name} max_pool2d with dilation or "
                              "ceil_mode is not lowered yet")
        if any(u.target is operator.getitem and u.args[1] != 0 for u in node.users):
            raise ExportError(f"TOSA lowering: %{node.name} max_pool2d whose indices are used "
                              "is not lowered yet")
        kernel = list(args[1])
        stride = list(args[2] or kernel)
        padding = list(args[3] or [0, 0])
        size = list(x.t.shape[1:3])
        crop = list(size)
        for axis in range(2):
            rem = (size[axis] + 2 * padding[axis] - kernel[axis]) % stride[axis]
            if rem > padding[axis]:
                crop[axis] -= rem - padding[axis]
        if crop != size:
            x = self._slice_spatial(x, crop)
        pad = []
        for axis in range(2):
            out = (crop[axis] - kernel[axis] + 2 * padding[axis]) // stride[axis] + 1
            pad += [padding[axis],
                    (out - 1) * stride[axis] - crop[axis] + kernel[axis] - padding[axis]]
        n, h, w, c = x.t.shape
        oh = (h + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
        ow = (w + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
        t = self.op("MAX_POOL2D", "tosa_max_pool2d_default", [x.t], [n, oh, ow, c], x.t.dtype,
                    kernel=kernel, stride=stride, pad=pad)
        self.values[node] = Value(t, True, None, x.qp)

    def clamp(self, node: Node) -> None:
        """clamp / a ReLU or ReLU6 not folded into a convolution: CLAMP with the bounds
        quantized with the output's qparams (unbounded sides: the int8 limits)."""
        if node in self.values:  # a fused one was set by its convolution
            return
        x = self.int8_input(node.args[0])
        out_qp = self.out_qparams(node)
        if node.target == aten.relu.default:
            lo, hi = 0.0, None
        else:
            lo = node.args[1] if len(node.args) > 1 else None
            hi = node.args[2] if len(node.args) > 2 else None
        qd = torch.ops.quantized_decomposed.quantize_per_tensor.default

        def q(v, default):
            if v is None:
                return default
            return int(qd(torch.tensor([float(v)]), out_qp.scale, out_qp.zp, -128, 127,
                          torch.int8).item())
        t = self.op("CLAMP", "tosa_clamp_default", [x.t], x.t.shape, "INT8",
                    min_val=q(lo, -128), max_val=q(hi, 127))
        self.values[node] = Value(t, x.nhwc, x.flat_of, out_qp)

    def mul(self, node: Node) -> None:
        """Both int8 operands RESCALEd to int32 at scale 1 (zero points removed), MUL with
        shift 0, RESCALE by ``s_a * s_b / s_out`` to int8 (ExecuTorch's INT mul)."""
        a, b, nhwc = self.binary_operands(node)
        out_qp = self.out_qparams(node)
        ra = self.rescale(a.t, [1.0], a.qp.zp, 0, "INT32")
        rb = self.rescale(b.t, [1.0], b.qp.zp, 0, "INT32") \
            if node.args[1] is not node.args[0] else ra
        shape = _broadcast(ra.shape, rb.shape)
        m = self.op("MUL", "tosa_mul_default", [ra, rb], shape, "INT32")
        r = self.rescale(m, [a.qp.scale * b.qp.scale / out_qp.scale], 0, out_qp.zp, "INT8")
        self.values[node] = Value(r, nhwc, None, out_qp)

    def table(self, node: Node) -> None:
        """An elementwise function as a 256-entry int8 TABLE; the table is a constant
        ``b_<node>_table_constant`` that ExecuTorch places before every other constant."""
        x = self.int8_input(node.args[0])
        out_qp = self.out_qparams(node)
        fn = TABLE_FUNCTIONS[node.target]
        if node.target == aten.gelu.default:
            approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1
                                          else "none")
            fn = functools.partial(fn, approximate=approximate)
        values = int8_table(fn, x.qp, out_qp)
        table = TConst(f"b_{self.local[node]}_table_constant", [256], "INT8", values)
        self.tables += 1
        # ExecuTorch puts each new table constant before every placeholder: the last first
        self.const_key[id(table)] = -1000 - self.tables
        self.consts.append(table)
        t = self.op("TABLE", "tosa_table_default", [x.t, table], x.t.shape, "INT8")
        self.values[node] = Value(t, x.nhwc, x.flat_of, out_qp)

    def sum(self, node: Node) -> None:
        """RESCALE int8 -> int32 (scale 1), one REDUCE_SUM per reduced axis (in TOSA's
        layout, ascending), RESCALE by ``s_in / s_out`` to int8."""
        x = self.int8_input(node.args[0])
        keep = len(node.args) > 2 and node.args[2]
        if not keep or x.flat_of is not None:
            x = Value(self.as_torch(x), False, None, x.qp)
        out_qp = self.out_qparams(node)
        rank = len(x.t.shape)
        dims = sorted({d % rank for d in node.args[1]})
        if x.nhwc:
            dims = sorted(NHWC.index(d) for d in dims)
        t = self.rescale(x.t, [1.0], x.qp.zp, 0, "INT32")
        for axis in dims:
            shape = list(t.shape)
            shape[axis] = 1
            t = self.op("REDUCE_SUM", "tosa_reduce_sum_default", [t], shape, "INT32", axis=axis)
        r = self.rescale(t, [x.qp.scale / out_qp.scale], 0, out_qp.zp, "INT8")
        if not keep:
            r = self.reshape(r, self.shape(node))
        self.values[node] = Value(r, x.nhwc, None, out_qp)

    def _weights(self, dq: Node) -> tuple[np.ndarray, list[float]]:
        w = self.tensor(dq.args[0]).detach().numpy()
        scales = dq.args[1]
        if isinstance(scales, Node):
            scales = self.tensor(scales).tolist()
        elif not isinstance(scales, (list, tuple)):
            scales = [float(scales)]
        return w, [float(s) for s in scales]

    def _fused_activation(self, node: Node) -> tuple[Node, QParams]:
        """The node whose quantize gives the conv's output qparams: the conv itself, or a
        ReLU/ReLU6 following it that the int8 saturation makes redundant."""
        users = list(node.users)
        if len(users) == 1 and users[0].target in (aten.relu.default, aten.hardtanh.default):
            act = users[0]
            qp = self.out_qparams(act)
            if act.target == aten.hardtanh.default:
                if act.args[1] != 0:
                    raise ExportError(f"TOSA lowering: %{act.name} hardtanh with min "
                                      f"{act.args[1]} after a conv is not supported yet")
                top = round(float(act.args[2]) / qp.scale) + qp.zp
                if min(top, INT8_MAX) != INT8_MAX:
                    raise ExportError(f"TOSA lowering: %{act.name} clamps below the int8 "
                                      "range (CLAMP after CONV2D is not lowered yet)")
            return act, qp
        return node, self.out_qparams(node)

    def conv_weights(self, w: np.ndarray, placeholder: Node, x: Value, groups: int,
                     et_conv: str, linear: bool, dtype: str) -> tuple[TConst, str, str, bool]:
        """The weight constant in TOSA's layout (OHWI; HWICM for a depthwise convolution,
        ``groups == in_channels > 1``), placed where ``placeholder`` was; with the operator
        and its FX name base, and whether it is depthwise."""
        out_ch = w.shape[0]
        depthwise = not linear and groups > 1 and groups == x.t.shape[-1]
        if depthwise:
            c, m = groups, out_ch // groups
            w_t = w.reshape(c, m, *w.shape[2:]).transpose(2, 3, 0, 1)
            w_name, op, base = f"{et_conv}_weight_hwicm", "DEPTHWISE_CONV2D", \
                "tosa_depthwise_conv2d_default"
        else:
            w_t = w.transpose(0, 2, 3, 1) if w.ndim == 4 else w.reshape(out_ch, 1, 1, -1)
            w_name, op, base = f"{et_conv}_weight_ohwi", "CONV2D", "tosa_conv2d_default"
        wc = TConst(w_name, list(w_t.shape), dtype, np.ascontiguousarray(w_t))
        self._place_const(placeholder, wc)
        return wc, op, base, depthwise

    @staticmethod
    def conv_output_shape(x, w_t: TConst, depthwise: bool, stride, pad, dilation,
                          out_ch: int) -> list[int]:
        n, h, wd, _ = x.t.shape
        kh, kw = w_t.shape[0:2] if depthwise else w_t.shape[1:3]
        oh = (h + pad[0] + pad[1] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        ow = (wd + pad[2] + pad[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        return [n, oh, ow, out_ch]

    def _conv(self, node: Node, x: Value, w_dq: Node, b_node: Node | None, stride, pad,
              dilation, groups: int, et_conv: str, linear: bool) -> None:
        w, w_scales = self._weights(w_dq)
        out_ch = w.shape[0]
        wc, op, base, depthwise = self.conv_weights(w, w_dq.args[0], x, groups, et_conv,
                                                    linear, "INT8")
        if b_node is None:
            # ExecuTorch adds a zero int32 bias ``<conv>_bias`` before the first placeholder.
            bc = TConst(f"{et_conv}_bias", [out_ch], "INT32", np.zeros(out_ch, np.int32))
            self.zero_biases += 1
            self.const_key[id(bc)] = -1 - self.zero_biases
            self.consts.append(bc)
        else:
            bias_ph = b_node.args[0] if b_node.target in DQ_OPS else b_node
            bias = self.tensor(bias_ph).detach().numpy().astype(np.int32)
            bias_name, _ = self.common.get(bias_ph.name, (bias_ph.name, 0))
            bc = TConst(bias_name, list(bias.shape), "INT32", bias)
            self._place_const(bias_ph, bc)
        act, out_qp = self._fused_activation(node)
        shape = self.conv_output_shape(x, wc, depthwise, stride, pad, dilation, out_ch)
        conv = self.op(op, base, [x.t, wc, bc], shape, "INT32",
                       input_zp=x.qp.zp, weight_zp=[0] * out_ch, pad=list(pad),
                       stride=list(stride), dilation=list(dilation))
        scales = [(x.qp.scale * ws) / out_qp.scale for ws in w_scales]
        r = self.rescale(conv, scales, 0, out_qp.zp, "INT8")
        self.values[act] = Value(r, True, None, out_qp)
        if act is not node:
            self.values[node] = self.values[act]

    def _place_const(self, placeholder: Node, const: TConst) -> None:
        """Weights sit where their placeholder was (placeholders precede the operators)."""
        if any(c.name == const.name for c in self.consts):
            return  # a merged (``_common``) constant is emitted once
        self.const_key[id(const)] = self.common.get(placeholder.name, (None, 0))[1]
        self.consts.append(const)

    def convolution(self, node: Node) -> None:
        x = self.int8_input(node.args[0])
        stride, padding, dilation = node.args[3], node.args[4], node.args[5]
        if node.args[6] or len(stride) != 2:
            raise ExportError(f"TOSA lowering: %{node.name} is a transposed or non-2D "
                              "convolution, not lowered yet")
        # TOSA needs (in + pads - dilation*(k-1) - 1) to divide by the stride exactly. Like
        # ExecuTorch: when the remainder exceeds the padding, SLICE the input's trailing
        # rows/columns the kernel never reaches (SizeAdjustInputPass); then trim the trailing
        # (bottom/right) padding by what remains (RewriteConvPass).
        size = self.shape(node.args[0])[2:]
        kh, kw = self.shape(node.args[1])[2:]
        pad = [padding[0], padding[0], padding[1], padding[1]]
        crop = list(size)
        for axis, k in enumerate((kh, kw)):
            rem = (size[axis] + 2 * padding[axis] - dilation[axis] * (k - 1) - 1) % stride[axis]
            if rem > padding[axis]:
                crop[axis] -= rem - padding[axis]
                rem = padding[axis]
            pad[2 * axis + 1] -= rem
        if crop != size:
            x = self._slice_spatial(x, crop)
        self._conv(node, x, node.args[1], node.args[2], list(stride), pad, list(dilation),
                   int(node.args[8]), self.local[node], linear=False)

    def _slice_spatial(self, x: Value, hw: list[int]) -> Value:
        """SLICE an NHWC tensor to its first ``hw`` rows and columns (one op for both)."""
        n, _, _, c = x.t.shape
        size = [n, hw[0], hw[1], c]
        start = self.op("CONST_SHAPE", "tosa_const_shape_default", [], [4], "SHAPE",
                        values=[0, 0, 0, 0])
        length = self.op("CONST_SHAPE", "tosa_const_shape_default", [], [4], "SHAPE",
                         values=size)
        t = self.op("SLICE", "tosa_slice_default", [x.t, start, length], size, x.t.dtype)
        return Value(t, True, None, x.qp)

    def linear(self, node: Node) -> None:
        """ExecuTorch's DecomposeLinearPass: the input viewed as ``[B, Ci, 1, 1]`` (NHWC
        ``[B, 1, 1, Ci]``: one RESHAPE, or none after a pooled map), a 1x1 CONV2D and a
        RESHAPE to the output shape."""
        x = self.int8_input(node.args[0])
        if x.flat_of is not None:
            x4 = Value(x.flat_of.t, True, None, x.qp)
        elif x.nhwc:
            raise ExportError(f"TOSA lowering: %{node.name} linear over the W axis of an NHWC "
                              "map is not lowered yet")
        else:
            shape = list(x.t.shape)
            x4 = Value(self.reshape(x.t, [int(np.prod(shape[:-1])), 1, 1, shape[-1]]), True,
                       None, x.qp)
        self._conv(node, x4, node.args[1], node.args[2] if len(node.args) > 2 else None,
                   [1, 1], [0, 0, 0, 0], [1, 1], 1, self.local[node], linear=True)
        act = next((a for a, v in self.values.items() if v is self.values[node] and a is not node),
                   node)
        out = self.values[node]
        value = Value(self.reshape(out.t, self.shape(node)), False, None, out.qp)
        self.values[node] = self.values[act] = value

    def const_shape(self, values: list[int]) -> TOp:
        """The CONST_SHAPE of a RESHAPE or TILE: one per distinct shape, as ExecuTorch's
        InsertConstShapesPass caches them (placed before its first reader)."""
        key = tuple(int(v) for v in values)
        if key not in self.const_shapes:
            self.const_shapes[key] = self.op("CONST_SHAPE", "tosa_const_shape_default", [],
                                             [len(key)], "SHAPE", values=list(key))
        return self.const_shapes[key]

    def reshape(self, t, shape: list[int]) -> TOp:
        cs = self.const_shape(shape)
        return self.op("RESHAPE", "tosa_reshape_default", [t, cs], list(shape), t.dtype)

    def mean(self, node: Node) -> None:
        x = self.int8_input(node.args[0])
        dims = sorted(d % 4 for d in node.args[1])
        keep = node.args[2] if len(node.args) > 2 else False
        if dims != [2, 3] or not x.nhwc:
            raise ExportError(f"TOSA lowering: %{node.name} mean over {node.args[1]} is not "
                              "lowered yet (only the spatial mean, i.e. global pooling)")
        n, h, w, c = x.t.shape
        self._avg_pool(node, x, [h, w], [h, w], [0, 0, 0, 0])
        if not keep:
            self.values[node] = Value(self.values[node].t, True, self.values[node], x.qp)

    def adaptive_avg_pool2d(self, node: Node) -> None:
        x = self.int8_input(node.args[0])
        if list(node.args[1]) != [1, 1]:
            raise ExportError(f"TOSA lowering: %{node.name} adaptive pooling to "
                              f"{list(node.args[1])} is not lowered yet (only to 1x1)")
        n, h, w, c = x.t.shape
        self._avg_pool(node, x, [h, w], [h, w], [0, 0, 0, 0])

    def avg_pool2d(self, node: Node) -> None:
        x = self.int8_input(node.args[0])
        args = list(node.args) + [None] * 7
        kernel = list(args[1])
        stride = list(args[2] or kernel)
        padding = list(args[3] or [0, 0])
        if args[4] or (args[5] is False and any(padding)) or args[6] is not None:
            raise ExportError(f"TOSA lowering: %{node.name} avg_pool2d with ceil_mode, "
                              "count_include_pad=False or divisor_override is not lowered yet")
        n, h, w, c = x.t.shape
        self._avg_pool(node, x, kernel, stride, [padding[0], padding[0], padding[1], padding[1]])

    def _avg_pool(self, node: Node, x: Value, kernel, stride, pad) -> None:
        out_qp = self.out_qparams(node)
        zp_name = f"aten_full_default_{2 * self.pool_count + 1}_pre_computed_common"
        self.pool_count += 1
        if x.qp is None:  # float32 (the FP profile): zero points 0.0
            zp = TConst(zp_name, [1], "FP32", np.zeros(1, np.float32))
        else:
            zp = TConst(zp_name, [1], "INT8", np.array([x.qp.zp], dtype=np.int8))
        if not any(c.name == zp_name for c in self.consts):
            self.const_key[id(zp)] = -1  # ExecuTorch's folded constants come first
            self.consts.append(zp)
        n, h, w, c = x.t.shape
        oh = (h + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
        ow = (w + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
        t = self.op("AVG_POOL2D", "tosa_avg_pool2d_default", [x.t, zp, zp], [n, oh, ow, c],
                    x.t.dtype, kernel=kernel, stride=stride, pad=pad)
        self.values[node] = Value(t, True, None, out_qp)

    def identity(self, node: Node) -> None:
        """clone / alias / dropout(train=False): the int8 value passes through unchanged
        (their quantize/dequantize share one set of qparams)."""
        x = self.int8_input(node.args[0])
        self.values[node] = x

    def getitem(self, node: Node) -> None:
        if node.args[0] not in self.values:
            raise ExportError(f"TOSA lowering: %{node.name} reads an output of "
                              f"%{node.args[0].name}, which is not lowered")
        self.values[node] = self.values[node.args[0]]


_HANDLERS = {
    **dict.fromkeys(TABLE_FUNCTIONS, _Lowering.table),
    aten.add.Tensor: _Lowering.add,
    aten.mul.Tensor: _Lowering.mul,
    aten.sub.Tensor: _Lowering.sub,
    aten.max_pool2d_with_indices.default: _Lowering.max_pool2d,
    aten.max_pool2d.default: _Lowering.max_pool2d,
    aten.clamp.default: _Lowering.clamp,
    aten.sum.dim_IntList: _Lowering.sum,
    aten.convolution.default: _Lowering.convolution,
    aten.linear.default: _Lowering.linear,
    aten.mean.dim: _Lowering.mean,
    aten._adaptive_avg_pool2d.default: _Lowering.adaptive_avg_pool2d,
    aten.avg_pool2d.default: _Lowering.avg_pool2d,
    aten.relu.default: _Lowering.clamp,
    aten.hardtanh.default: _Lowering.clamp,
    aten.clone.default: _Lowering.identity,
    aten.alias_copy.default: _Lowering.identity,
    aten.dropout.default: _Lowering.identity,
    operator.getitem: _Lowering.getitem,
    **TENSOR_RULES,
}


_Lowering.HANDLERS = _HANDLERS



def _lowering_for(quantized: bool, spec: TosaSpecification) -> type[_Lowering] | None:
    """The rules for a quantized or a float graph under ``spec``: the INT profile's for
    quantized graphs, the FP profile's (``lowering_float``, imported here: it builds on this
    module) for float ones; None when ``spec`` lacks that profile."""
    if quantized:
        return _Lowering if spec.support_integer() else None
    if not spec.support_float():
        return None
    from .lowering_float import FloatLowering

    return FloatLowering


def has_rule(node: Node, spec: TosaSpecification) -> bool:
    """Whether the lowering has a rule for ``node``'s operator under ``spec`` (it may still
    refuse the node for its arguments: ``lower_to_tosa`` then raises
    ``LoweringRefusedError``). A float node needs an FP profile, a quantized one INT."""
    if node.target in DQ_OPS or node.target in Q_OPS:
        return spec.support_integer()
    quantized = any(a.target in DQ_OPS for a in node.all_input_nodes) or \
        any(u.target in Q_OPS for u in node.users)
    rules = _lowering_for(quantized or not spec.support_float(), spec)
    return rules is not None and rules.rule(node) is not None


def lower_to_tosa(ep: ExportedProgram, spec: TosaSpecification) -> bytes:
    """The TOSA flatbuffer for a delegated subgraph ``ep``: a graph with quantize/dequantize
    nodes under the INT profile, a float one under the FP profile."""
    quantized = any(n.target in DQ_OPS or n.target in Q_OPS for n in ep.graph_module.graph.nodes)
    rules = _lowering_for(quantized, spec)
    if rules is None:
        raise ExportError(f"TOSA lowering: {spec} has no {'INT' if quantized else 'FP'} "
                          f"profile for this {'quantized' if quantized else 'float'} graph -- "
                          f"use a TOSA-1.0+{'INT' if quantized else 'FP'} spec"
                          + ("" if quantized else ", or quantize the model first"))
    nodes, outputs = rules(ep, spec).run()
    return serialize(nodes, outputs)
