"""XNNPACK graph nodes -> NumPy callables, one rule per node type.

A rule takes the node's union member and the :class:`Ctx` of the graph being compiled and
returns ``(compute, output_slot)``: ``compute()`` reads its inputs from ``ctx.env`` and returns
the result array (it never writes into its inputs). Most rules return an :class:`Op` instead of
a closure: the same computation as a function of its input values, which ``plan.py`` compiles
into a straight-line function over preallocated buffers. ``lower`` wraps either with the output
min/max clamp of the node types that XNNPACK clamps (as ``XNNCompiler.cpp``'s
``getOutputMinMax`` callers do) and the store into the output slot. Semantics follow
``XNNCompiler.cpp`` and ``xnnpack.h``; ``kernels.py`` has the NHWC convolution and pooling.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....errors import ErrorCode, FormatError, InvalidProgramError, RegistrationError
from ....kernels import accel
from ....kernels import activation as act
from ....kernels.portable import special_accel
from ....kernels.portable.elementwise import erf
from .. import schema as x
from . import kernels_fused as KF

Compute = Callable[[], Any]
Step = Callable[[], None]

OUT, VIEW, CALL = "out", "view", "call"


class Op:
    """A node's computation as a function of its input values.

    ``kind`` OUT: ``fn(*inputs, *extra, out)`` writes the result into ``out`` and returns it;
    without ``out`` it returns a fresh array (ufuncs, ``np.matmul`` and the ``*_into``
    functions below follow this). VIEW: ``fn(*inputs, *extra)`` returns a view of its input
    (layout nodes). CALL: ``fn(*inputs, *extra)`` returns an array it owns or a fresh one.
    Called with no arguments it reads its inputs from the graph's environment, so an ``Op``
    is also a plain ``compute``. ``expand`` lists the ``extra`` arrays that combine
    elementwise with the output (a bias), which a plan may expand to the output's shape.
    """

    __slots__ = ("env", "fn", "ins", "extra", "kind", "expand")

    def __init__(self, env: list[Any], fn: Callable[..., Any], ins: tuple[int, ...],
                 extra: tuple[Any, ...] = (), kind: str = OUT, expand: tuple[int, ...] = ()
                 ) -> None:
        self.env, self.fn, self.ins, self.extra, self.kind = env, fn, ins, extra, kind
        self.expand = expand

    def __call__(self) -> Any:
        env = self.env
        return self.fn(*[env[s] for s in self.ins], *self.extra)


@dataclass
class Lowered:
    """One compiled node: ``step()`` runs it on the environment (the reference path, used
    for the first calls, traced calls and new shapes); ``op`` (None when the rule returned a
    closure) lets ``plan.py`` run it into a buffer of its own, followed by the output clamp
    ``lo``..``hi`` (infinite: none) of a result of ``dtype`` stored in slot ``out``."""

    step: Step
    op: Op | None
    out: int
    lo: float = -math.inf
    hi: float = math.inf
    dtype: np.dtype | None = None


class Ctx:
    """What a rule sees of the graph: value slots, their declared dims/dtypes and constants."""

    def __init__(self, env: list[Any], slots: dict[int, int], dims: list[tuple[int, ...]],
                 dtypes: list[np.dtype], consts: list[np.ndarray | None]) -> None:
        self.env = env
        self._slots = slots
        self._dims = dims
        self._dtypes = dtypes
        self._consts = consts
        self.node: x.XNode | None = None  # the node being lowered
        self.clamp_fused = False  # set by a rule whose compute applies the output clamp
        self.where = ""
        # Output slot -> its bytes in the graph's arena (``arena.plan_outputs``), and the
        # temporaries' memory the convolutions share (``nodes_nn``).
        self.out_plan: dict[int, np.ndarray] = {}
        self.conv_workspace: Any = None

    def slot(self, value_id: int, what: str = "value") -> int:
        s = self._slots.get(value_id)
        if s is None:
            raise FormatError(f"{self.where}: {what} id {value_id} is not one of the graph's "
                              "values; the blob is corrupted")
        return s

    def dims(self, slot: int) -> tuple[int, ...]:
        return self._dims[slot]

    def dtype(self, slot: int) -> np.dtype:
        return self._dtypes[slot]

    def const(self, slot: int) -> np.ndarray | None:
        return self._consts[slot]

    def fail(self, message: str) -> FormatError:
        """The error for a node whose attributes do not fit its values (a corrupted blob)."""
        return FormatError(f"{self.where}: {message}")


Rule = Callable[[Any, Ctx], tuple[Compute, int]]
NODE_RULES: dict[type, Rule] = {}

# Node types whose XNNPACK operator applies XNode.output_min_max (XNNCompiler.cpp).
CLAMPED = frozenset({
    x.XNNAdd, x.XNNSubtract, x.XNNMultiply, x.XNNDiv, x.XNNFullyConnected, x.XNNConv2d,
    x.XNNDepthwiseConv2d, x.XNNConvTranspose2d, x.XNNMaxPooling2d, x.XNNAvgPooling2d,
    x.XNNGlobalAvgPooling2d,
})


_ID_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # node kind -> names


def node_value_ids(u: Any) -> tuple[list[int], list[int]]:
    """(input value ids, output value ids) of a node's union member (its ``*_id`` fields,
    in declaration order; the field names are listed once per node kind)."""
    names = _ID_FIELDS.get(type(u))
    if names is None:
        ids = [k for k in vars(u) if k.endswith("_id") and k != "external_id"]
        names = _ID_FIELDS[type(u)] = (tuple(k for k in ids if not k.startswith("output")),
                                       tuple(k for k in ids if k.startswith("output")))
    d = u.__dict__
    invalid = x.XNN_INVALID_VALUE_ID
    return ([v for v in map(d.__getitem__, names[0]) if v != invalid],
            [v for v in map(d.__getitem__, names[1]) if v != invalid])


def rule(*classes: type) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        for cls in classes:
            if cls in NODE_RULES:
                raise RegistrationError(f"XNNPACK node {cls.__name__} already has a rule")
            NODE_RULES[cls] = fn
        return fn

    return deco


def output_range(node: x.XNode) -> tuple[float, float]:
    mm = node.output_min_max
    return (-math.inf, math.inf) if mm is None else (mm.output_min, mm.output_max)


def lower(node: x.XNode, ctx: Ctx) -> Lowered:
    """The compiled ``node``; raises at load time for nodes it cannot run."""
    u = node.xnode_union
    ctx.node = node
    fn = NODE_RULES.get(type(u))
    if fn is None:
        raise InvalidProgramError(
            f"{ctx.where}: XNNPACK node {type(u).__name__} is not supported by this runtime "
            "(ExecuTorch's XNNPACK runtime rejects it too)"
            if isinstance(u, x.XNNScaledDotProductAttention)
            else f"{ctx.where}: no NumPy implementation of XNNPACK node {type(u).__name__}; "
            f"supported: {', '.join(sorted(c.__name__ for c in NODE_RULES))}",
            code=ErrorCode.NotImplemented)
    ctx.clamp_fused = False
    compute, out = fn(u, ctx)
    op = compute if isinstance(compute, Op) else None
    if op is not None:
        compute = _direct(op)
    env = ctx.env
    dtype = ctx.dtype(out)
    clamped = type(u) in CLAMPED and not ctx.clamp_fused
    lo, hi = output_range(node) if clamped else (-math.inf, math.inf)
    if lo == -math.inf and hi == math.inf:
        def step() -> None:
            r = compute()
            env[out] = r if r.dtype == dtype else r.astype(dtype)
    else:
        lo_, hi_ = np.asarray(lo, dtype), np.asarray(hi, dtype)

        def step() -> None:
            r = compute()  # a fresh array or the node's own buffer: clamp it in place
            if r.dtype != dtype:
                r = r.astype(dtype)
            # one pass (maximum then minimum took two, 6x slower); the array's own method,
            # without np.clip's dispatch wrappers
            r.clip(lo_, hi_, out=r)
            env[out] = r
    return Lowered(step, op, out, lo, hi, dtype)


def _direct(op: Op) -> Compute:
    """``op`` as a closure over the environment (the usual arities without a splat)."""
    fn, env, ins = op.fn, op.env, op.ins
    if op.extra:
        return op
    if len(ins) == 1:
        i = ins[0]
        return lambda: fn(env[i])
    if len(ins) == 2:
        a, b = ins
        return lambda: fn(env[a], env[b])
    return op


# ---- elementwise ------------------------------------------------------------------------

_BINARY = {
    x.XNNAdd: np.add,
    x.XNNSubtract: np.subtract,
    x.XNNMultiply: np.multiply,
    x.XNNDiv: np.divide,
    x.XNNMinimum: np.minimum,
    x.XNNMaximum: np.maximum,
}


@rule(*_BINARY)
def _binary(n: x.XNNNode2x1, ctx: Ctx) -> tuple[Compute, int]:
    a, b = ctx.slot(n.input1_id, "input1"), ctx.slot(n.input2_id, "input2")
    # (floating-point warnings are silenced once per delegate call, in runtime.run)
    return Op(ctx.env, _BINARY[type(n)], (a, b)), ctx.slot(n.output_id, "output")


@rule(x.XNNPReLU)
def _prelu(n: x.XNNPReLU, ctx: Ctx) -> tuple[Compute, int]:
    """Slope (input2) broadcasts over the innermost (channel) dimension."""
    env = ctx.env
    a, s = ctx.slot(n.input1_id, "input"), ctx.slot(n.input2_id, "slope")
    return (lambda: np.where(env[a] >= 0, env[a], env[a] * env[s])), ctx.slot(n.output_id)


# Unary functions in the OUT form (see Op). With ``out`` they are only called on float32
# values into a float32 buffer (plan.py checks the result dtype), and they run the same
# operations in the same order as without it, so both give the same bits.
_HALF, _ONE, _THREE, _SIXTH = np.float32(0.5), np.float32(1), np.float32(3), np.float32(1 / 6)
_F32 = np.dtype(np.float32)


def _sigmoid(v, out=None):
    """``1 / (1 + exp(-x))``: with numba, the portable kernel's exp(-|x|) form in two compiled
    passes around NumPy's exp (float32 ``np.tanh`` is not vectorised: ~3 ns a value);
    otherwise ``tanh(x / 2) / 2 + 1 / 2`` in NumPy passes."""
    if v.dtype is _F32 and v.ndim and accel.available() and v.flags.c_contiguous and \
            (out is None or out.flags.c_contiguous and out.dtype is _F32 and out is not v):
        if out is None:
            out = np.empty(v.shape, _F32)
        special_accel.sigmoid_into(v.reshape(-1), out.reshape(-1))
        return out
    out = np.multiply(v, _HALF, out)
    np.tanh(out, out)
    np.multiply(out, _HALF, out)
    return np.add(out, _HALF, out)


def _rsqrt(v, out=None):
    return np.divide(_ONE, np.sqrt(v, out), out) if out is not None else _ONE / np.sqrt(v)


def _hardswish(v, out=None):
    t = np.add(v, _THREE, out)
    np.clip(t, 0, 6, out=t)
    np.multiply(v, t, t)
    return np.multiply(t, _SIXTH, t)


def _gelu(v):
    """Exact (erf) GELU, evaluated in float64 (erf to ~2e-11) and rounded back."""
    v64 = v.astype(np.float64)
    return (0.5 * v64 * (1.0 + erf(v64 * (1 / math.sqrt(2.0)), precise=False))).astype(v.dtype)


def _softmax(v):
    e = np.exp(v - np.max(v, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _same(v):
    return v


_UNARY: dict[type, Callable[..., Any]] = {
    x.XNNSigmoid: _sigmoid,
    x.XNNFloor: np.floor,
    x.XNNCeiling: np.ceil,
    x.XNNSquareRoot: np.sqrt,
    x.XNNReciprocalSquareRoot: _rsqrt,
    x.XNNExp: np.exp,
    x.XNNLog: np.log,
    x.XNNNegate: np.negative,
    x.XNNSquare: np.square,
    x.XNNAbs: np.abs,
    x.XNNSin: np.sin,
    x.XNNCos: np.cos,
    x.XNNTanh: np.tanh,
    x.XNNHardswish: _hardswish,
    x.XNNGelu: _gelu,
    x.XNNSoftmax: _softmax,  # over the innermost dimension, as xnn_define_softmax
    x.XNNCopy: _same,  # values are never written in place, so sharing is a copy
}
_NOT_OUT = {x.XNNGelu: CALL, x.XNNSoftmax: CALL, x.XNNCopy: VIEW}


@rule(*_UNARY)
def _unary(n: x.XNNNode1x1, ctx: Ctx) -> tuple[Compute, int]:
    fn, env, i = _UNARY[type(n)], ctx.env, ctx.slot(n.input_id, "input")
    o = ctx.slot(n.output_id, "output")
    if type(n) in (x.XNNGelu, x.XNNSoftmax) and ctx.dtype(i) == ctx.dtype(o) and \
            ctx.dtype(o) in _SHAPED:
        return Op(env, _shaped(type(n), ctx.dtype(o)), (i,), kind=CALL), o
    return Op(env, fn, (i,), kind=_NOT_OUT.get(type(n), OUT)), o


_SHAPED = (np.dtype(np.float32), np.dtype(np.float64))


def _shaped(kind: type, dtype: np.dtype) -> Callable[[Any], Any]:
    """GELU and softmax prepared per input shape (``kernels.activation``: buffers made once,
    fewer passes); a node that sees many shapes keeps its last few."""
    ready: dict[tuple[int, ...], Callable[[Any], Any]] = {}

    def compute(v):
        f = ready.get(v.shape)
        if f is None:
            if v.dtype != dtype:
                return _UNARY[kind](v)
            if len(ready) >= 8:
                ready.clear()
            if kind is x.XNNSoftmax:
                f = KF.prepare_softmax(v.shape, dtype)
            elif dtype == np.float32:
                f = act.prepare_gelu(v.shape)
            else:
                f = _gelu
            ready[v.shape] = f
        return f(v)
    compute.xnn_kind = kind  # type: ignore[attr-defined]  (fusion.py finds softmax nodes by it)
    return compute


def _convert_into(v, dtype, out=None):
    if out is None:
        return v.astype(dtype)
    np.copyto(out, v, casting="unsafe")
    return out


@rule(x.XNNConvert)
def _convert(n: x.XNNConvert, ctx: Ctx) -> tuple[Compute, int]:
    i, o = ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    return Op(ctx.env, _convert_into, (i,), (ctx.dtype(o),)), o


def _clamp_into(v, lo, hi, out=None):
    return np.minimum(np.maximum(v, lo, out=out), hi, out=out)


@rule(x.XNNClamp)
def _clamp(n: x.XNNClamp, ctx: Ctx) -> tuple[Compute, int]:
    i, o = ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    assert ctx.node is not None
    lo, hi = output_range(ctx.node)
    lo_, hi_ = np.asarray(lo, ctx.dtype(o)), np.asarray(hi, ctx.dtype(o))
    return Op(ctx.env, _clamp_into, (i,), (lo_, hi_)), o


@rule(x.XNNLeakyReLU)
def _leaky_relu(n: x.XNNLeakyReLU, ctx: Ctx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    slope = np.asarray(n.negative_slope, ctx.dtype(o))
    return (lambda: np.where(env[i] >= 0, env[i], env[i] * slope)), o


@rule(x.XNNELU)
def _elu(n: x.XNNELU, ctx: Ctx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    alpha = np.asarray(n.alpha, ctx.dtype(o))

    def compute():
        v = env[i]
        with np.errstate(over="ignore"):
            return np.where(v > 0, v, alpha * np.expm1(v))
    return compute, o


# ---- layout -----------------------------------------------------------------------------


@rule(x.XNNStaticTranspose)
def _transpose(n: x.XNNStaticTranspose, ctx: Ctx) -> tuple[Compute, int]:
    i, o = ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    perm = tuple(n.perm)
    if sorted(perm) != list(range(len(ctx.dims(i)))):
        raise ctx.fail(f"perm {list(perm)} is not a permutation of the input's "
                       f"{len(ctx.dims(i))} dimensions")
    # the method: no fromnumeric wrapper
    return Op(ctx.env, np.ndarray.transpose, (i,), (perm,), VIEW), o


@rule(x.XNNStaticReshape)
def _reshape(n: x.XNNStaticReshape, ctx: Ctx) -> tuple[Compute, int]:
    """A 0 in ``new_shape`` is the one dimension inferred from the element count."""
    i, o = ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    if sum(d == 0 for d in n.new_shape) > 1:
        raise ctx.fail(f"new_shape {list(n.new_shape)} has more than one inferred (0) dimension")
    shape = tuple(-1 if d == 0 else d for d in n.new_shape)
    return Op(ctx.env, np.ndarray.reshape, (i,), (shape,), VIEW), o


@rule(x.XNNStaticSlice)
def _slice(n: x.XNNStaticSlice, ctx: Ctx) -> tuple[Compute, int]:
    i, o = ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    if len(n.offsets) != len(n.sizes) or len(n.offsets) != len(ctx.dims(i)):
        raise ctx.fail(f"offsets {list(n.offsets)} and sizes {list(n.sizes)} do not match the "
                       f"input's {len(ctx.dims(i))} dimensions")
    index = tuple(slice(b, b + s) for b, s in zip(n.offsets, n.sizes))
    return Op(ctx.env, operator.getitem, (i,), (index,), VIEW), o


def _pad_into(v, widths, value, out=None):
    if out is None:
        return np.pad(v, widths, constant_values=value)
    out.fill(value)
    out[tuple(slice(b, b + d) for (b, _), d in zip(widths, v.shape))] = v
    return out


@rule(x.XNNStaticConstantPad)
def _pad(n: x.XNNStaticConstantPad, ctx: Ctx) -> tuple[Compute, int]:
    i, o = ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    rank = len(ctx.dims(i))
    if len(n.pre_paddings) < rank or len(n.post_paddings) < rank:
        raise ctx.fail(f"paddings {list(n.pre_paddings)} / {list(n.post_paddings)} do not "
                       f"cover the input's {rank} dimensions")
    widths = tuple(zip(n.pre_paddings[:rank], n.post_paddings[:rank]))
    return Op(ctx.env, _pad_into, (i,), (widths, n.padding_value)), o


_CAT_ARITY = {x.XNNConcatenate2: 2, x.XNNConcatenate3: 3, x.XNNConcatenate4: 4,
              x.XNNConcatenate5: 5}


def _cat2(a, b, axis, out=None):
    return np.concatenate((a, b), axis, out)


def _cat3(a, b, c, axis, out=None):
    return np.concatenate((a, b, c), axis, out)


def _cat4(a, b, c, d, axis, out=None):
    return np.concatenate((a, b, c, d), axis, out)


def _cat5(a, b, c, d, e, axis, out=None):
    return np.concatenate((a, b, c, d, e), axis, out)


_CONCAT = {2: _cat2, 3: _cat3, 4: _cat4, 5: _cat5}


@rule(*_CAT_ARITY)
def _concat(n: x.XNNCat, ctx: Ctx) -> tuple[Compute, int]:
    ids = (n.input1_id, n.input2_id, n.input3_id, n.input4_id, n.input5_id)
    arity = _CAT_ARITY[type(n)]
    ins = tuple(ctx.slot(v, f"input{k + 1}") for k, v in enumerate(ids[:arity]))
    if n.axis >= len(ctx.dims(ins[0])):
        raise ctx.fail(f"axis {n.axis} is out of range for rank {len(ctx.dims(ins[0]))}")
    return Op(ctx.env, _CONCAT[arity], ins, (n.axis,)), ctx.slot(n.output_id)
