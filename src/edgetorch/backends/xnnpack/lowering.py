"""XNNPACK graph nodes -> NumPy callables, one rule per node type.

A rule takes the node's union member and the :class:`Ctx` of the graph being compiled and
returns ``(compute, output_slot)``: ``compute()`` reads its inputs from ``ctx.env`` and returns
the result array (it never writes into its inputs). ``lower`` wraps it with the output min/max
clamp of the node types that XNNPACK clamps (as ``XNNCompiler.cpp``'s ``getOutputMinMax``
callers do) and the store into the output slot. Semantics follow ``XNNCompiler.cpp`` and
``xnnpack.h``; ``kernels.py`` has the NHWC convolution and pooling.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import ErrorCode, FormatError, InvalidProgramError, RegistrationError
from ...kernels import activation as act
from ...kernels.portable.elementwise import erf
from . import schema as x

try:
    from numpy._core.umath import clip as _clip  # what np.clip calls for an ndarray
except ImportError:  # pragma: no cover - other NumPy versions
    def _clip(a: np.ndarray, lo: np.ndarray, hi: np.ndarray, out: np.ndarray) -> np.ndarray:
        return np.clip(a, lo, hi, out=out)

Compute = Callable[[], Any]
Step = Callable[[], None]


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
RULES: dict[type, Rule] = {}

# Node types whose XNNPACK operator applies XNode.output_min_max (XNNCompiler.cpp).
CLAMPED = frozenset({
    x.XNNAdd, x.XNNSubtract, x.XNNMultiply, x.XNNDiv, x.XNNFullyConnected, x.XNNConv2d,
    x.XNNDepthwiseConv2d, x.XNNConvTranspose2d, x.XNNMaxPooling2d, x.XNNAvgPooling2d,
    x.XNNGlobalAvgPooling2d,
})


def rule(*classes: type) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        for cls in classes:
            if cls in RULES:
                raise RegistrationError(f"XNNPACK node {cls.__name__} already has a rule")
            RULES[cls] = fn
        return fn

    return deco


def output_range(node: x.XNode) -> tuple[float, float]:
    mm = node.output_min_max
    return (-math.inf, math.inf) if mm is None else (mm.output_min, mm.output_max)


def lower(node: x.XNode, ctx: Ctx) -> Step:
    """The callable that runs ``node``; raises at load time for nodes it cannot run."""
    u = node.xnode_union
    ctx.node = node
    fn = RULES.get(type(u))
    if fn is None:
        raise InvalidProgramError(
            f"{ctx.where}: XNNPACK node {type(u).__name__} is not supported by this runtime "
            "(ExecuTorch's XNNPACK runtime rejects it too)"
            if isinstance(u, x.XNNScaledDotProductAttention)
            else f"{ctx.where}: no NumPy implementation of XNNPACK node {type(u).__name__}; "
            f"supported: {', '.join(sorted(c.__name__ for c in RULES))}",
            code=ErrorCode.NotImplemented)
    ctx.clamp_fused = False
    compute, out = fn(u, ctx)
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
            # one pass (maximum then minimum took two, 6x slower); the ufunc np.clip ends in,
            # without its Python wrappers (1.9 -> 0.4 us a node)
            _clip(r, lo_, hi_, r)
            env[out] = r
    return step


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
    fn, env = _BINARY[type(n)], ctx.env
    a, b = ctx.slot(n.input1_id, "input1"), ctx.slot(n.input2_id, "input2")

    # (floating-point warnings are silenced once per delegate call, in runtime.run)
    return (lambda: fn(env[a], env[b])), ctx.slot(n.output_id, "output")


@rule(x.XNNPReLU)
def _prelu(n: x.XNNPReLU, ctx: Ctx) -> tuple[Compute, int]:
    """Slope (input2) broadcasts over the innermost (channel) dimension."""
    env = ctx.env
    a, s = ctx.slot(n.input1_id, "input"), ctx.slot(n.input2_id, "slope")
    return (lambda: np.where(env[a] >= 0, env[a], env[a] * env[s])), ctx.slot(n.output_id)


def _sigmoid(v):
    return np.float32(0.5) * np.tanh(np.float32(0.5) * v) + np.float32(0.5)


def _hardswish(v):
    return v * np.clip(v + np.float32(3), 0, 6) * np.float32(1 / 6)


def _gelu(v):
    """Exact (erf) GELU, evaluated in float64 (erf to ~2e-11) and rounded back."""
    v64 = v.astype(np.float64)
    return (0.5 * v64 * (1.0 + erf(v64 * (1 / math.sqrt(2.0)), precise=False))).astype(v.dtype)


def _softmax(v):
    e = np.exp(v - np.max(v, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


_UNARY: dict[type, Callable[[Any], Any]] = {
    x.XNNSigmoid: _sigmoid,
    x.XNNFloor: np.floor,
    x.XNNCeiling: np.ceil,
    x.XNNSquareRoot: np.sqrt,
    x.XNNReciprocalSquareRoot: lambda v: np.float32(1) / np.sqrt(v),
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
    x.XNNCopy: lambda v: v,  # values are never written in place, so sharing is a copy
}


@rule(*_UNARY)
def _unary(n: x.XNNNode1x1, ctx: Ctx) -> tuple[Compute, int]:
    fn, env, i = _UNARY[type(n)], ctx.env, ctx.slot(n.input_id, "input")
    o = ctx.slot(n.output_id, "output")
    if type(n) in (x.XNNGelu, x.XNNSoftmax) and ctx.dtype(i) == ctx.dtype(o) and \
            ctx.dtype(o) in _SHAPED:
        return _shaped(type(n), env, i, ctx.dtype(o)), o
    return (lambda: fn(env[i])), o


_SHAPED = (np.dtype(np.float32), np.dtype(np.float64))


def _shaped(kind: type, env: list[Any], i: int, dtype: np.dtype) -> Compute:
    """GELU and softmax prepared per input shape (``kernels.activation``: buffers made once,
    fewer passes); a node that sees many shapes keeps its last few."""
    ready: dict[tuple[int, ...], Callable[[Any], Any]] = {}

    def compute():
        v = env[i]
        f = ready.get(v.shape)
        if f is None:
            if v.dtype != dtype:
                return _UNARY[kind](v)
            if len(ready) >= 8:
                ready.clear()
            if kind is x.XNNSoftmax:
                f = act.prepare_softmax(v.shape, dtype)
            elif dtype == np.float32:
                f = act.prepare_gelu(v.shape)
            else:
                f = _gelu
            ready[v.shape] = f
        return f(v)
    return compute


@rule(x.XNNConvert)
def _convert(n: x.XNNConvert, ctx: Ctx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    dtype = ctx.dtype(o)
    return (lambda: env[i].astype(dtype)), o


@rule(x.XNNClamp)
def _clamp(n: x.XNNClamp, ctx: Ctx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    assert ctx.node is not None
    lo, hi = output_range(ctx.node)
    lo_, hi_ = np.asarray(lo, ctx.dtype(o)), np.asarray(hi, ctx.dtype(o))
    return (lambda: np.minimum(np.maximum(env[i], lo_), hi_)), o


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
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    perm = tuple(n.perm)
    if sorted(perm) != list(range(len(ctx.dims(i)))):
        raise ctx.fail(f"perm {list(perm)} is not a permutation of the input's "
                       f"{len(ctx.dims(i))} dimensions")
    return (lambda: env[i].transpose(perm)), o  # the method: no fromnumeric wrapper


@rule(x.XNNStaticReshape)
def _reshape(n: x.XNNStaticReshape, ctx: Ctx) -> tuple[Compute, int]:
    """A 0 in ``new_shape`` is the one dimension inferred from the element count."""
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    if sum(d == 0 for d in n.new_shape) > 1:
        raise ctx.fail(f"new_shape {list(n.new_shape)} has more than one inferred (0) dimension")
    shape = tuple(-1 if d == 0 else d for d in n.new_shape)
    return (lambda: env[i].reshape(shape)), o


@rule(x.XNNStaticSlice)
def _slice(n: x.XNNStaticSlice, ctx: Ctx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    if len(n.offsets) != len(n.sizes) or len(n.offsets) != len(ctx.dims(i)):
        raise ctx.fail(f"offsets {list(n.offsets)} and sizes {list(n.sizes)} do not match the "
                       f"input's {len(ctx.dims(i))} dimensions")
    index = tuple(slice(b, b + s) for b, s in zip(n.offsets, n.sizes))
    return (lambda: env[i][index]), o


@rule(x.XNNStaticConstantPad)
def _pad(n: x.XNNStaticConstantPad, ctx: Ctx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    rank = len(ctx.dims(i))
    if len(n.pre_paddings) < rank or len(n.post_paddings) < rank:
        raise ctx.fail(f"paddings {list(n.pre_paddings)} / {list(n.post_paddings)} do not "
                       f"cover the input's {rank} dimensions")
    widths = tuple(zip(n.pre_paddings[:rank], n.post_paddings[:rank]))
    value = n.padding_value
    return (lambda: np.pad(env[i], widths, constant_values=value)), o


_CAT_ARITY = {x.XNNConcatenate2: 2, x.XNNConcatenate3: 3, x.XNNConcatenate4: 4,
              x.XNNConcatenate5: 5}


@rule(*_CAT_ARITY)
def _concat(n: x.XNNCat, ctx: Ctx) -> tuple[Compute, int]:
    ids = (n.input1_id, n.input2_id, n.input3_id, n.input4_id, n.input5_id)
    ins = [ctx.slot(v, f"input{k + 1}") for k, v in enumerate(ids[: _CAT_ARITY[type(n)]])]
    env, axis = ctx.env, n.axis
    if axis >= len(ctx.dims(ins[0])):
        raise ctx.fail(f"axis {axis} is out of range for rank {len(ctx.dims(ins[0]))}")
    return (lambda: np.concatenate([env[s] for s in ins], axis=axis)), ctx.slot(n.output_id)
