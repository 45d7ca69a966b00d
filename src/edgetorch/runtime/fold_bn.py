"""BatchNorm folded into the convolution before it, at ``load_method`` (portable programs).

An inference BatchNorm (``_native_batch_norm_legit_no_training``) right after a convolution
is an affine map per output channel, so it can ride on the convolution's weights, as
ExecuTorch's XNNPACK backend folds it ahead of time (``FuseBatchNormWithConvPass``) and
``torch.ao``'s ``fuse_conv_bn_eval`` does: ``w' = w * g``, ``b' = (b - mean) * g + beta`` with
``g = gamma / sqrt(var + eps)``. The convolution then writes the BatchNorm's output directly
and the BatchNorm's instruction has nothing left to do: one pass over the activations less.

It applies only when the graph allows: the convolution's result is read by that BatchNorm
alone, every parameter is a constant of the program, the BatchNorm's statistics outputs are
read by nobody, and the tensors are static float32/float64. Folding changes rounding (like
ExecuTorch's folding pass): results agree with eager PyTorch within float tolerance, not bit
for bit, which is why the traced loop, one event per instruction, runs the two kernels.

A hardtanh (ReLU6) or relu right after the BatchNorm, reading nothing else, rides along too
(as XNNPACK fuses an output clamp into its convolution): the folded convolution writes the
activation's output and clamps it in its epilogue, with the very bits of the folded
convolution followed by the activation kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..kernels import accel
from ..kernels.portable import norm_accel
from ..kernels.portable._util import expand_param
from ..kernels.portable.nn import _conv as conv_nd
from ..kernels.registry import get_kernel
from .file_pages import release_file_pages

if TYPE_CHECKING:
    from .method import Method

CONV = "aten::convolution.out"
BATCH_NORMS = {"aten::_native_batch_norm_legit_no_training.out": 10}  # -> its argument count
HARDTANH = "aten::hardtanh.out"
ACTIVATIONS = {HARDTANH: 4, "aten::relu.out": 2}  # -> argument count, out included
FUSE_ACTIVATIONS = True  # tests switch it off to compare
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def readers(m: Method) -> dict[int, list[int]]:
    """Value -> the instructions that read it (not those that only write it), plus -1 for
    the caller when it is a method output."""
    out: dict[int, list[int]] = {int(i): [-1] for i in m._plan.outputs}
    for rec in m.records:
        for i in rec.args:
            if i in rec.outputs and rec.kind == "kernel":
                continue
            out.setdefault(i, []).append(rec.index)
            items = getattr(m._vals[i], "items", None) if 0 <= i < len(m._vals) else None
            if items is not None and not isinstance(m._vals[i], np.ndarray):
                for j in items:
                    out.setdefault(j, []).append(rec.index)
    return out


class Facts:
    """``readers(m)`` and ``spans(m)``, each listed once on first use: the load-time passes
    (folding, forwarded copies, unread outputs) ask about the same method, which none of them
    changes while the fast path is planned."""

    def __init__(self, m: Method) -> None:
        self.m = m
        self._reads: dict[int, list[int]] | None = None
        self._where: dict[int, tuple[int, int, int]] | None = None

    @property
    def reads(self) -> dict[int, list[int]]:
        if self._reads is None:
            self._reads = readers(self.m)
        return self._reads

    @property
    def where(self) -> dict[int, tuple[int, int, int]]:
        if self._where is None:
            self._where = spans(self.m)
        return self._where


def fold(m: Method, fixed: set[int], written: set[int], facts: Facts
         ) -> dict[int, list[Callable[[], Any]]]:
    """Instruction index -> its replacement steps, for each convolution + BatchNorm pair."""
    reads, where = facts.reads, facts.where
    producer = {rec.outputs[0]: rec for rec in m.records
                if rec.kind == "kernel" and len(rec.outputs) == 1}
    plan: dict[int, list[Callable[[], Any]]] = {}
    for bn in m.records:
        if bn.kind != "kernel" or BATCH_NORMS.get(bn.name) != len(bn.args):
            continue
        conv = producer.get(bn.args[0])
        if conv is None or conv.name != CONV or conv.index >= bn.index:
            continue
        act = _activation(m, bn, fixed, written, reads, where) if FUSE_ACTIVATIONS else None
        steps = _fold_pair(m, conv, bn, fixed, written, reads, where, act)
        if steps is None and act is not None:
            act = None
            steps = _fold_pair(m, conv, bn, fixed, written, reads, where, None)
        if steps is not None:
            plan[conv.index] = steps
            plan[bn.index] = []
            if act is not None:
                plan[act.rec.index] = []
    return plan


class _Act(NamedTuple):
    """The activation a folded convolution also applies: clamp to [lo, hi] with hardtanh's
    (``np.clip``) or relu's (``np.maximum``) semantics, written into ``out``."""

    rec: Any
    out: np.ndarray
    lo: float
    hi: float
    relu: bool


def _activation(m: Method, bn, fixed: set[int], written: set[int],
                reads: dict[int, list[int]], where: dict[int, tuple[int, int, int]]
                ) -> _Act | None:
    """The hardtanh (ReLU6) or relu right after the BatchNorm, when it is the BatchNorm
    output's only reader, writes a static tensor of its shape, and nothing runs in between
    (the convolution then writes the activation's memory earlier than the program did)."""
    y = bn.args[7]
    rs = reads.get(y)
    if not rs or len(rs) != 1 or rs[0] != bn.index + 1:
        return None
    act = m.records[rs[0]]
    if act.kind != "kernel" or ACTIVATIONS.get(act.name) != len(act.args) or act.args[0] != y:
        return None
    vals = m._vals
    if act.name == HARDTANH:
        if act.args[1] in written or act.args[2] in written:
            return None
        lo, hi = vals[act.args[1]], vals[act.args[2]]
        if type(lo) not in (int, float) or type(hi) not in (int, float) or not lo <= hi:
            return None
    else:
        lo, hi = 0, math.inf
    out_i = act.args[-1]
    out, src = vals[out_i], vals[y]
    if out_i not in fixed or type(out) is not np.ndarray or out.shape != src.shape \
            or out.dtype != src.dtype or not out.flags.c_contiguous:
        return None
    if alias_read(m, y, bn.index, where):
        return None
    return _Act(act, out, float(lo), float(hi), act.name != HARDTANH)


def _span(m: Method, i: int) -> tuple[int, int, int] | None:
    slot = m._slots.get(i)
    if slot is None or slot.buffer is None:
        return None
    return id(slot.buffer), slot.offset, slot.offset + slot.capacity * slot.dtype.itemsize


def spans(m: Method) -> dict[int, tuple[int, int, int]]:
    """Value -> (buffer, first byte, end byte) of every planned tensor (for ``alias_read``)."""
    out = {}
    for i in m._slots:
        s = _span(m, i)
        if s is not None:
            out[i] = s
    return out


def alias_read(m: Method, y: int, start: int,
               where: dict[int, tuple[int, int, int]] | None = None) -> bool:
    """Whether another value sharing y's bytes (a view the emitter left as a value of its
    own) is read after instruction ``start`` before anything writes those bytes: it would
    read the convolution's result, which folding no longer writes. ``where``: ``spans(m)``,
    when the caller asks about many values."""
    where = spans(m) if where is None else where
    ys = where.get(y)
    if ys is None:
        return True
    written: list[tuple[int, int, int]] = []  # bytes written since (by any value's writer)

    def overlaps(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
        return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

    for rec in m.records[start + 1:]:
        for i in rec.args:
            if i == y or (i in rec.outputs and rec.kind == "kernel"):
                continue
            s = where.get(i)
            if s is not None and overlaps(s, ys) and not any(overlaps(s, w) for w in written):
                return True
        for i in rec.outputs if rec.kind != "delegate" else rec.args:
            s = where.get(i)
            if s is not None:
                if s[0] == ys[0] and s[1] <= ys[1] and ys[2] <= s[2]:
                    return False  # all of y's bytes rewritten: nothing later reads its value
                written.append(s)
    return False


def touched(m: Method, values, span: tuple[int, int, int] | None,
            where: dict[int, tuple[int, int, int]]) -> bool:
    """Whether any of ``values`` (or the tensors of a list among them) has bytes in ``span``
    (None: unknown, True)."""
    if span is None:
        return True
    for i in values:
        v = m._vals[i] if 0 <= i < len(m._vals) else None
        items = getattr(v, "items", None) if type(v) is not np.ndarray else None
        for j in (i, *(items or ())):
            s = where.get(j)
            if s is not None and s[0] == span[0] and s[1] < span[2] and span[1] < s[2]:
                return True
    return False


def io(records) -> list[int]:
    """The values ``records`` read or write."""
    return [i for r in records for i in (*r.args, *r.outputs)]


def _constant(m: Method, i: int, fixed: set[int]) -> np.ndarray | None:
    v = m._vals[i]
    if type(v) is np.ndarray and i in fixed and i not in m._slots and v.dtype in _FLOATS:
        return v
    return None


def _fold_pair(m: Method, conv, bn, fixed: set[int], written: set[int],
               reads: dict[int, list[int]], where: dict[int, tuple[int, int, int]],
               act: _Act | None) -> list[Callable[[], Any]] | None:
    x_i, w_i, b_i, *params_i, y_i = conv.args  # y: the convolution's result
    if reads.get(y_i) != [bn.index] or any(i in written for i in params_i):
        return None
    if alias_read(m, y_i, conv.index, where):
        return None
    _, g_i, beta_i, mean_i, var_i, _, eps_i, out_i, s1, s2 = bn.args
    if reads.get(s1) or reads.get(s2) or eps_i in written:
        return None
    vals = m._vals
    transposed = vals[params_i[3]]
    x, out, w = vals[x_i], vals[out_i], _constant(m, w_i, fixed)
    if transposed or w is None or x_i not in fixed or out_i not in fixed:
        return None
    mean, var = _constant(m, mean_i, fixed), _constant(m, var_i, fixed)
    if mean is None or var is None or x.dtype != w.dtype or out.dtype != w.dtype:
        return None
    opt = {}
    for name, i in (("b", b_i), ("gamma", g_i), ("beta", beta_i)):
        opt[name] = None if vals[i] is None else _constant(m, i, fixed)
        if vals[i] is not None and opt[name] is None:
            return None
    cout = w.shape[0]
    if any(a is not None and a.shape != (cout,) for a in (mean, var, *opt.values())):
        return None
    if vals[y_i].shape != out.shape:
        return None
    # The per-channel factors in float64, rounded once; the weights scaled in their own
    # dtype (torch's fuse_conv_bn_weights scales in float32 too).
    g = 1.0 / np.sqrt(var.astype(np.float64) + float(vals[eps_i]))
    if opt["gamma"] is not None:
        g = g * opt["gamma"]
    b = np.zeros(cout) if opt["b"] is None else opt["b"].astype(np.float64)
    b = (b - mean) * g + (0.0 if opt["beta"] is None else opt["beta"])
    scale = g.astype(w.dtype).reshape((-1,) + (1,) * (w.ndim - 1))
    params = [vals[i] for i in params_i]
    shared = any(w_i in r.args for r in m.records if r.index != conv.index)
    if act is not None and (np.may_share_memory(act.out, x) or w.ndim != 4 or touched(
            m, io(m.records[conv.index + 1:bn.index]), where.get(act.rec.args[-1]), where)):
        return None  # (the activation's output is now written at the convolution's place)
    compiled = accel.available()  # decided at load, as the preparers do

    def build() -> Callable[[], Any]:
        w2 = _frozen(w.shape, w.dtype, lambda a: np.multiply(w, scale, out=a))
        b2 = _frozen(b.shape, w.dtype, lambda a: np.copyto(a, b, casting="unsafe"))
        if not shared:
            release_file_pages(w)  # only the folded copy is read from now on
        if act is not None:
            return _with_activation(x, w2, b2, params, act, compiled)
        entry = get_kernel(CONV)
        args = [x, w2, b2, *params, out]
        steps = entry.prepare(*args) if entry.prepare is not None else None
        if steps is None:
            return partial(_call, entry.fn, args, out)
        return steps[0] if len(steps) == 1 else partial(_chain, list(steps))
    return [_Once(build)]


def _with_activation(x: np.ndarray, w: np.ndarray, b: np.ndarray, params: list[Any],
                     act: _Act, compiled: bool) -> Callable[[], Any]:
    """The folded convolution written straight into the activation's output, the clamp in
    its epilogue: the GEMM paths leave the bias to one compiled pass that adds it and clamps
    (the kernel adds it last too: the same bits); depthwise convolution adds the bias in its
    own loop, then one in-place clamp. One pass over the activations less than convolution,
    then hardtanh, and no BatchNorm-sized intermediate."""
    stride, padding, dilation = (expand_param(p, 2, n) for p, n in
                                 zip(params[:3], ("stride", "padding", "dilation")))
    groups, out = params[5], act.out
    dt = out.dtype.type
    if act.relu:
        clamp = partial(np.maximum, out, dt(0), out=out)
    else:
        clamp = partial(np.clip, out, dt(act.lo), dt(act.hi), out=out)
    if w.shape[1] == 1 and groups > 1 and w.shape[0] == groups:  # depthwise
        return partial(_chain, [partial(_conv_into, x, w, stride, padding, dilation, groups, b,
                                        out), clamp])
    conv = partial(_conv_into, x, w, stride, padding, dilation, groups, None, out)
    if compiled:
        flat = out.reshape(out.shape[0], out.shape[1], -1)
        epilogue = [partial(norm_accel.channel_bias_clamp, flat, b, dt(act.lo), dt(act.hi),
                            act.relu)]
    else:
        epilogue = [partial(np.add, out, b.reshape(-1, 1, 1), out=out), clamp]
    return partial(_chain, [conv, *epilogue])


def _conv_into(x, w, stride, padding, dilation, groups, bias, out) -> None:
    res = conv_nd(x, w, stride, padding, dilation, groups, bias, out)
    if res is not out:
        np.copyto(out, res)


class _Once:
    """A step built on its first call: load_method stays a matter of milliseconds and leaves
    the file's weights unread; the first execute folds them (reading them anyway)."""

    __slots__ = ("_build", "_run")

    def __init__(self, build: Callable[[], Callable[[], Any]]) -> None:
        self._build, self._run = build, None

    def __call__(self) -> None:
        if self._run is None:
            self._run = self._build()
        self._run()


def _chain(steps: list[Callable[[], Any]]) -> None:
    for step in steps:
        step()


def _frozen(shape: tuple[int, ...], dtype: np.dtype,
            fill: Callable[[np.ndarray], Any]) -> np.ndarray:
    """A new constant: filled once, then read-only down to its memory (a read-only
    memoryview of a buffer nothing else holds), so kernels treat it as they treat the
    program's own constants (e.g. pack it once: ``winograd.constant_cache``)."""
    raw = bytearray(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    fill(np.frombuffer(raw, dtype).reshape(shape))
    return np.frombuffer(memoryview(raw).toreadonly(), dtype).reshape(shape)


def _call(fn: Callable[..., Any], args: list[Any], out: np.ndarray) -> None:
    res = fn(*args)
    if res is not out:
        np.copyto(out, res, casting="unsafe")
