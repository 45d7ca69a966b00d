"""NumPy kernels with XNNPACK's quantized numerics (int8 activations, int8 / int4 weights).

Pure functions of arrays and quantization parameters; ``nodes_quant.py`` binds them to nodes.
Numerics follow XNNPACK (the commit ExecuTorch 1.5.1 pins), read from its sources:

* quantize (``f32-qs8-vcvt``): ``q = clamp(rint(x * (1/scale)) + zp)``, the reciprocal taken
  in float32, rounding half to even;
* dequantize: ``(q - zp) * scale`` in float32;
* requantization of a static GEMM / convolution (``requantization.h``, "fp32"):
  ``q = clamp(rint(float32(acc) * (in_scale * w_scale / out_scale)) + zp)``, with ``acc`` the
  exact int32 sum of ``(x - x_zp) * w`` plus the int32 bias;
* add (``xnn_init_qs8_add_minmax_scalar_params``): fixed point, 20-bit multipliers, a shift and
  round-half-up; multiply: float32 product scale, as the GEMM;
* mean (``reduce-nd.c``): int32 sum, then ``rint(sum * s + zp')`` with
  ``s = (in_scale / out_scale) * (1/n)`` and ``zp' = out_zp - n * in_zp * s``;
* dynamic quantization (``quantization.h``, ``xnn_qd8_asymmetric_quantization_params``): per
  row, the range widened to include 0, ``255 / (max - min)`` as the multiplier, the zero point
  from the side with the smaller error.

Integer sums of static int8 convolutions and fully connected layers are float32 BLAS
products of integer-valued arrays: exact while every partial sum stays below ``2**24`` in
magnitude, whatever order BLAS adds in. That is checked per layer at load from the weights and
the input's int8 range (:func:`exact_splits`); a layer whose bound is larger splits its
reduction into chunks that each fit, summed in float64. Other integer sums are float64
products (exact while ``|acc| < 2**53``). Deviations from XNNPACK are noted per function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....kernels import accel, blas_accel
from ....kernels.conv import compiled, dispatch, nhwc
from . import kernels as K

F32 = np.float32
QMIN, QMAX = -128, 127


def quantize(x: np.ndarray, scale: float, zero_point: int, qmin: int = QMIN,
             qmax: int = QMAX) -> np.ndarray:
    """float32 -> int8 as XNNPACK's convert: multiply by the float32 reciprocal, round."""
    inv = F32(1) / F32(scale)
    v = np.rint(np.asarray(x, F32) * inv)
    return np.clip(v + F32(zero_point), qmin, qmax).astype(np.int8)


@accel.jit
def _quantize_loop(x, inv, zp, out):  # pragma: no cover - compiled
    """:func:`quantize` of the flat float32 ``x`` into int8 ``out``, each value's float32
    operations as NumPy's passes make them; False at a NaN (NumPy's cast of it is the
    platform's: the NumPy path decides)."""
    for j in range(x.size):
        v = np.rint(x[j] * inv)
        if v != v:
            return False
        out[j] = np.int8(min(max(v + zp, np.float32(-128)), np.float32(127)))
    return True


class Quantizer:
    """float32 -> static int8 (``xnn_define_convert``), prepared at load: ``quantize(x,
    out=None)`` is :func:`quantize` with the reciprocal taken once; with the ``accel`` extra
    one compiled pass instead of five NumPy ones (the same bytes)."""

    def __init__(self, scale: float, zero_point: int) -> None:
        self.scale, self.zero_point = scale, zero_point
        self.inv, self.zp = F32(1) / F32(scale), F32(zero_point)

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(x.shape, np.int8)
        if x.dtype == F32 and x.flags.c_contiguous and out.flags.c_contiguous and \
                accel.available() and _quantize_loop(x.reshape(-1), self.inv, self.zp,
                                                     out.reshape(-1)):
            return out
        np.copyto(out, quantize(x, self.scale, self.zero_point))
        return out


class Dequantizer:
    """static int8 -> float (``xnn_define_convert``): ``(q - zp) * scale`` in float32 (then
    ``dtype``), into ``out`` when given: the operations of :func:`dequantize`, without its
    temporaries."""

    def __init__(self, scale: float, zero_point: int, dtype: np.dtype) -> None:
        self.scale, self.zp, self.dtype = F32(scale), F32(zero_point), np.dtype(dtype)

    def __call__(self, q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if self.dtype != F32:
            r = dequantize(q, self.scale, self.zp).astype(self.dtype, copy=False)
            if out is None:
                return r
            np.copyto(out, r)
            return out
        out = np.subtract(q, self.zp, out=out, dtype=F32)
        return np.multiply(out, self.scale, out=out)


def quantize_reference(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """XNNPACK's reference quantize (quantized unary ops, requantizing converts):
    ``rint(x * (1/scale) + zp)`` (XNNPACK's compiler may fuse the multiply-add; we do not)."""
    v = np.asarray(x, F32) * (F32(1) / F32(scale)) + F32(zero_point)
    return np.clip(np.rint(np.nan_to_num(v)), QMIN, QMAX).astype(np.int8)


def dequantize(q: np.ndarray, scale, zero_point) -> np.ndarray:
    return (q.astype(F32) - np.asarray(zero_point, F32)) * np.asarray(scale, F32)


def output_bounds(lo: float, hi: float, scale: float, zero_point: int) -> tuple[int, int]:
    """A node's float output range in the int8 domain (``xnn_qs8_quantize``: a division)."""
    def q(v: float) -> int:
        with np.errstate(over="ignore"):
            t = F32(v) / F32(scale) + F32(zero_point)
        return int(np.rint(np.clip(t, QMIN, QMAX)))
    return q(lo), q(hi)


def requantize(acc: np.ndarray, scale, zero_point: int, lo: int = QMIN,
               hi: int = QMAX) -> np.ndarray:
    """int32 accumulators (any integer-valued array) -> int8: fp32 scale, round half even."""
    f = acc.astype(F32) * np.asarray(scale, F32)
    f = np.clip(f, F32(lo - zero_point), F32(hi - zero_point))
    return (np.rint(f) + zero_point).astype(np.int8)


def requantize_f32(acc: np.ndarray, scale: np.ndarray, zero_point: int, lo: int, hi: int,
                   out: np.ndarray) -> np.ndarray:
    """:func:`requantize` of a float32 array of exact integers, overwriting ``acc`` and
    writing the int8 result into ``out`` (same operations, same order: no extra passes)."""
    np.multiply(acc, scale, out=acc)
    np.clip(acc, F32(lo - zero_point), F32(hi - zero_point), out=acc)
    np.rint(acc, out=acc)
    return np.add(acc, F32(zero_point), out=out, casting="unsafe")


def requant_scale(in_scale: float, w_scale, out_scale: float) -> np.ndarray:
    """``in_scale * w_scale / out_scale`` in float32, in XNNPACK's order."""
    return (F32(in_scale) * np.asarray(w_scale, F32)) / F32(out_scale)


# ---- dynamic (per-token) quantization ------------------------------------------------------


@dataclass
class DynQ:
    """A dynamically quantized (qdint8) tensor: int8 values, one scale / zero point per row.

    ``scale`` and ``zero_point`` have the shape of ``q`` with its ``num_nonbatch_dims`` inner
    dimensions dropped."""

    q: np.ndarray
    scale: np.ndarray  # float32, the dequantization scale
    zero_point: np.ndarray  # int32
    num_nonbatch_dims: int
    qc: np.ndarray | None = None  # float32 ``q - zero_point`` when the producer has it

    @property
    def dtype(self) -> np.dtype:
        return self.q.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.q.shape

    def centered(self) -> np.ndarray:
        """``q - zero_point`` as float64 (exact integers)."""
        zp = self.zero_point.reshape(self.zero_point.shape + (1,) * self.num_nonbatch_dims)
        return self.q.astype(np.float64) - zp

    def row_scale(self, rank: int) -> np.ndarray:
        """The per-row scale shaped to broadcast against an output of ``rank`` dims."""
        return self.scale.reshape(self.scale.shape + (1,) * (rank - self.scale.ndim))


def qd8_params(rmin: np.ndarray, rmax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(quantization multiplier, zero point) per row, in float32 as XNNPACK computes them."""
    rmin = np.minimum(F32(0), rmin.astype(F32))
    rmax = np.maximum(F32(0), rmax.astype(F32))
    # an all-zero row gets multiplier 1 (and no division by zero)
    scale = F32(255) / np.where(rmin == rmax, F32(255), rmax - rmin).astype(F32)
    dmin, dmax = rmin * scale, rmax * scale
    from_min = F32(QMIN) + dmin
    from_max = F32(QMAX) + dmax
    zp = np.where(from_min + from_max > 0, F32(QMIN) - dmin, F32(QMAX) - dmax).astype(F32)
    zp = np.rint(np.clip(zp, QMIN, QMAX)).astype(np.int32)
    return scale, zp


@accel.jit
def _qd8_rows(x, q, qc, scale, zp):  # pragma: no cover - compiled
    """:func:`quantize_dynamic` of ``x`` ``[rows, n]`` in one pass per row, every float32
    operation as the NumPy path does it; False (nothing usable written) when a value is not
    finite, which the NumPy path handles."""
    rows, n = x.shape
    f = np.float32
    for r in range(rows):
        lo, hi = f(0), f(0)
        for k in range(n):
            v = x[r, k]
            if not np.isfinite(v):
                return False
            lo = min(lo, v)
            hi = max(hi, v)
        mult = f(f(255) / (f(255) if lo == hi else f(hi - lo)))
        dmin, dmax = f(lo * mult), f(hi * mult)
        if f(f(f(-128) + dmin) + f(f(127) + dmax)) > 0:
            z = f(f(-128) - dmin)
        else:
            z = f(f(127) - dmax)
        z = np.rint(min(max(z, f(-128)), f(127)))
        zp[r] = np.int32(z)
        scale[r] = f(f(1) / mult)
        qlo, qhi = f(f(-128) - z), f(f(127) - z)
        for k in range(n):
            v = np.rint(min(max(f(x[r, k] * mult), qlo), qhi))
            qc[r, k] = v
            q[r, k] = np.int8(v + z)
    return True


def quantize_dynamic(x: np.ndarray, num_nonbatch_dims: int) -> DynQ:
    """fp32 -> qdint8: one (scale, zero point) per row of the ``num_nonbatch_dims`` inner dims."""
    x = np.asarray(x, F32)
    axes = tuple(range(x.ndim - num_nonbatch_dims, x.ndim))
    if x.size == 0:
        rows = x.shape[: x.ndim - num_nonbatch_dims]
        return DynQ(x.astype(np.int8), np.ones(rows, F32), np.zeros(rows, np.int32),
                    num_nonbatch_dims)
    if accel.available():  # one compiled pass instead of ~15 NumPy passes (per-token LLMs)
        lead = x.shape[: x.ndim - num_nonbatch_dims]
        x2 = np.ascontiguousarray(x).reshape(math.prod(lead), -1)
        q, qc = np.empty(x2.shape, np.int8), np.empty(x2.shape, F32)
        scale, zp = np.empty(x2.shape[0], F32), np.empty(x2.shape[0], np.int32)
        if _qd8_rows(x2, q, qc, scale, zp):
            return DynQ(q.reshape(x.shape), scale.reshape(lead), zp.reshape(lead),
                        num_nonbatch_dims, qc.reshape(x.shape))
    mult, zp = qd8_params(x.min(axis=axes), x.max(axis=axes))
    shape = mult.shape + (1,) * num_nonbatch_dims
    m, z = mult.reshape(shape), zp.reshape(shape).astype(F32)
    v = x * m
    np.clip(v, F32(QMIN) - z, F32(QMAX) - z, out=v)
    np.rint(v, out=v)  # q - zero_point, exact in float32
    q = (v + z).astype(np.int8)
    return DynQ(q, F32(1) / mult, zp, num_nonbatch_dims, v)


# ---- weights -------------------------------------------------------------------------------


def unpack_int4(packed: np.ndarray, rows: int, cols: int, zero_point: int = 8) -> np.ndarray:
    """``[rows, ceil(cols/2)]`` bytes -> int8 ``[rows, cols]``: the low nibble holds the even
    column, the high nibble the odd one; values are ``nibble - zero_point`` (ExecuTorch's
    ``convert_to_qc4w`` writes ``q + 8``)."""
    b = packed.reshape(rows, -1)
    out = np.empty((rows, b.shape[1] * 2), np.int8)
    out[:, 0::2] = (b & 0x0F).astype(np.int8)
    out[:, 1::2] = (b >> 4).astype(np.int8)
    return out[:, :cols] - np.int8(zero_point)


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(F32)


# ---- GEMM and convolution ------------------------------------------------------------------

EXACT_F32 = float(1 << 24)  # integers up to this magnitude (and sums staying below) are exact


def input_absmax(zero_point: int) -> int:
    """The largest ``|x - zero_point|`` of an int8 input."""
    return max(zero_point - QMIN, QMAX - zero_point)


def exact_splits(w: np.ndarray, x_absmax: int, bias: np.ndarray | None) -> list[int]:
    """Bounds ``[0, k1, ..., K]`` along the reduction (first) axis of ``w`` (``[K, O]``,
    centered integer weights) such that a float32 product of inputs with ``|x| <= x_absmax``
    by each chunk is exact: ``x_absmax * sum |w[chunk, o]| < 2**24`` for every column (plus
    ``|bias|`` when there is one chunk, as the bias is added in float32 then)."""
    a = np.abs(w, dtype=np.float64)
    k = a.shape[0]
    b = 0.0 if bias is None else float(np.max(np.abs(bias), initial=0.0))
    if x_absmax * float(a.sum(axis=0).max(initial=0.0)) + b < EXACT_F32:
        return [0, k]
    for n in range(2, k + 1):
        bounds = [k * j // n for j in range(n + 1)]
        # per-chunk row sums (integers, exact): row-vectorised, several times faster than
        # np.add.reduceat along axis 0 on these [K, O] matrices
        worst = max(float(a[k0:k1].sum(axis=0).max(initial=0.0))
                    for k0, k1 in zip(bounds[:-1], bounds[1:]))
        if x_absmax * worst < EXACT_F32:
            return bounds
    raise ValueError("no float32-exact split")  # unreachable: one row is < 256 * 255 < 2**24


def centered_f32(x: np.ndarray, zero_point: int, out: np.ndarray) -> np.ndarray:
    """``x - zero_point`` as float32 (exact) into ``out``, in one pass."""
    return np.subtract(x, F32(zero_point), out=out, casting="unsafe")


def matmul_split(a: np.ndarray, w: np.ndarray, bounds: list[int],
                 scratch: nhwc.Scratch) -> np.ndarray:
    """Exact ``a @ w`` of float32 integers as float64: one float32 GEMM per chunk of the
    reduction (each exact, :func:`exact_splits`), summed in float64."""
    m, o = a.shape[0], w.shape[1]
    part = scratch.get("part", (m, o), np.dtype(F32))
    acc = scratch.get("acc64", (m, o), np.dtype(np.float64))
    for j, (k0, k1) in enumerate(zip(bounds[:-1], bounds[1:])):
        np.matmul(a[:, k0:k1], w[k0:k1], out=part)
        if j == 0:
            np.copyto(acc, part)
        else:
            np.add(acc, part, out=acc)
    return acc



def static_fc(x: np.ndarray, x_zp: int, w: np.ndarray, bias: np.ndarray | None,
              bounds: list[int], scale: np.ndarray, out_zp: int, lo: int, hi: int,
              scratch: nhwc.Scratch, out: np.ndarray | None = None) -> np.ndarray:
    """qint8 ``[..., K]`` x ``w`` (float32 ``[K, O]``, centered integer weights) -> qint8
    (into ``out`` when given, else the node's buffer in ``scratch``).

    ``bounds`` from :func:`exact_splits`: one chunk (the common case) is one float32 GEMM
    into the node's buffer with the bias added in float32, all exact."""
    xc = centered_f32(x, x_zp, scratch.get("xc", x.shape, np.dtype(F32)))
    shape = x.shape[:-1] + w.shape[1:]
    if out is None:
        out = scratch.get("q", shape, np.dtype(np.int8))
    if len(bounds) > 2:
        acc64 = matmul_split(xc.reshape(-1, w.shape[0]), w, bounds, scratch).reshape(shape)
        if bias is not None:
            acc64 += bias
        np.copyto(out, requantize(acc64, scale, out_zp, lo, hi))
        return out
    acc = np.matmul(xc, w, out=scratch.get("acc", shape, np.dtype(F32)))
    return _bias_requantize(acc, bias, scale, out_zp, lo, hi, out)


class StaticFC:
    """A static int8 fully connected node, prepared at load: ``fc(x, out=None)`` is
    :func:`static_fc` of its weights (the reference), or with the ``accel`` extra one compiled
    call (``blas_accel.q8_fc``: centering, bias, GEMM and requantization) when the reduction
    is float32-exact in one chunk -- the same bytes. Its arguments (contiguous float32 bias
    and scales, float32 scalars) are made here, once; ``flatten`` is
    XNN_FLAG_TENSORFLOW_RESHAPE_2D (the input as ``[-1, K]`` rows)."""

    def __init__(self, w: np.ndarray, bias: np.ndarray | None, bounds: list[int],
                 scale: np.ndarray, x_zp: int, out_zp: int, lo: int, hi: int,
                 flatten: bool) -> None:
        self.w, self.bias, self.bounds, self.scale = w, bias, bounds, scale
        self.x_zp, self.out_zp, self.lo, self.hi, self.flatten = x_zp, out_zp, lo, hi, flatten
        self.scratch = nhwc.Scratch()
        k, o = w.shape
        self.k = k
        self.one_chunk = len(bounds) == 2 and w.dtype == F32 and w.flags.c_contiguous
        self.args = (F32(x_zp), w, np.zeros(o, F32) if bias is None else
                     np.ascontiguousarray(bias, F32),
                     np.ascontiguousarray(np.broadcast_to(np.asarray(scale, F32), (o,))),
                     F32(out_zp), F32(lo - out_zp), F32(hi - out_zp))
        self.shape: tuple[int, ...] | None = None  # the last input shape, and its buffers
        self.bufs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if self.flatten:
            x = x.reshape(-1, self.k)
        if self.one_chunk and x.dtype == np.int8 and blas_accel.ready():
            return self._compiled(x, out)
        return static_fc(x, self.x_zp, self.w, self.bias, self.bounds, self.scale,
                         self.out_zp, self.lo, self.hi, self.scratch, out)

    def _compiled(self, x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        if x.shape != self.shape or self.bufs is None:  # (a node sees one shape per plan)
            m = math.prod(x.shape[:-1])
            o = self.w.shape[1]
            self.bufs = (np.empty((m, self.k), F32), np.empty((m, o), F32),
                         np.empty(x.shape[:-1] + (o,), np.int8))
            self.shape = x.shape
        xc, acc, q = self.bufs
        if out is None:
            out = q
        if not (x.flags.c_contiguous and out.flags.c_contiguous):
            return static_fc(x, self.x_zp, self.w, self.bias, self.bounds, self.scale,
                             self.out_zp, self.lo, self.hi, self.scratch, out)
        x2 = x.reshape(-1, self.k) if x.ndim != 2 else x
        o2 = out.reshape(-1, out.shape[-1]) if out.ndim != 2 else out
        x_zp, w, b, scale, out_zp, lo, hi = self.args
        blas_accel.q8_fc(x2, x_zp, w, b, scale, out_zp, lo, hi, xc, acc, o2)
        return out


def _bias_requantize(acc: np.ndarray, bias: np.ndarray | None, scale: np.ndarray,
                     out_zp: int, lo: int, hi: int, out: np.ndarray) -> np.ndarray:
    """``acc += bias`` then :func:`requantize_f32` (float32 exact integers, bias included);
    one compiled pass with the ``accel`` extra, the same bytes either way."""
    if accel.available() and acc.dtype == F32 and acc.flags.c_contiguous and \
            (bias is None or bias.dtype == F32):
        return compiled.bias_requantize(acc, bias, scale, out_zp, lo, hi, out)
    if bias is not None:
        acc += bias
    return requantize_f32(acc, scale, out_zp, lo, hi, out)


def static_conv(x: np.ndarray, x_zp: int, kind: str, w: np.ndarray, win: nhwc.Window,
                groups: int, extra: tuple[int, ...], bias: np.ndarray | None,
                bounds: list[int], scale: np.ndarray, out_zp: int, lo: int, hi: int,
                scratch: nhwc.Scratch, out: np.ndarray | None = None) -> np.ndarray:
    """qint8 NHWC convolution (``kind`` "conv" or "dwconv", ``w`` float32 centered integers
    as :func:`conv_acc` expects) -> qint8 (into ``out`` when given, else the node's buffer
    in ``scratch``), exact in float32 (``bounds`` as for :func:`static_fc`; several chunks
    only for an ungrouped "conv").

    The centered input is written straight into the interior of the node's zero-bordered
    buffer (XNNPACK pads with the input zero point, i.e. a centered 0). With the ``accel``
    extra a depthwise convolution is one compiled loop from int8 to int8 instead."""
    n, h, wd, c = x.shape
    f32 = np.dtype(F32)
    if kind == "dwconv" and extra[0] == 1 and len(bounds) <= 2 and accel.available() and \
            w.dtype == f32 and (bias is None or bias.dtype == f32):
        oh, ow = win.out_size(h, wd)
        nhwc._check_out(oh, ow, "depthwise convolution", x.shape)
        if out is None:
            out = scratch.get("q", (n, oh, ow, c), np.dtype(np.int8))
        return compiled.depthwise_q8_nhwc(x, x_zp, w[0], bias, scale, out_zp, lo, hi, out,
                                            (win.pad_top, win.pad_left), (win.sh, win.sw),
                                            (win.dh, win.dw))
    if kind == "conv" and groups == 1 and len(bounds) == 2 and w.dtype == f32 and \
            w.flags.c_contiguous and x.dtype == np.int8 and blas_accel.ready():
        return _compiled_conv(x, x_zp, w, win, bias, scale, out_zp, lo, hi, scratch, out)
    if nhwc._padded(win):
        shape = (n, h + win.pad_top + win.pad_bottom, wd + win.pad_left + win.pad_right, c)
        xp = scratch.get("qpad", shape, f32, 0.0)
        centered_f32(x, x_zp, xp[:, win.pad_top : win.pad_top + h,
                                 win.pad_left : win.pad_left + wd])
        win = nhwc.Window(win.kh, win.kw, win.sh, win.sw, win.dh, win.dw)
    else:
        xp = centered_f32(x, x_zp, scratch.get("xc", x.shape, f32))
    if len(bounds) > 2:
        oh, ow = win.out_size(xp.shape[1], xp.shape[2])
        nhwc._check_out(oh, ow, "convolution", x.shape)
        if win.kh == win.kw == win.sh == win.sw == 1:
            cols = xp.reshape(-1, c)
        else:
            cols = nhwc._im2col(xp, win, oh, ow, scratch)
        acc64 = matmul_split(cols, w, bounds, scratch)
        if bias is not None:
            acc64 += bias
        r = requantize(acc64, scale, out_zp, lo, hi).reshape(n, oh, ow, -1)
        if out is None:
            return r
        np.copyto(out, r)
        return out
    acc = conv_acc(xp, kind, w, win, groups, extra, scratch)
    if out is None:
        out = scratch.get("q", acc.shape, np.dtype(np.int8))
    return _bias_requantize(acc, bias, scale, out_zp, lo, hi, out)


def _compiled_conv(x: np.ndarray, x_zp: int, w: np.ndarray, win: nhwc.Window,
                   bias: np.ndarray | None, scale: np.ndarray, out_zp: int, lo: int, hi: int,
                   scratch: nhwc.Scratch, out: np.ndarray | None) -> np.ndarray:
    """:func:`static_conv` of one group in one float32-exact chunk as one compiled call
    (``blas_accel.q8_conv``: patches, bias, GEMM and requantization, in blocks of output
    rows that stay in cache, as ``nhwc.conv2d`` blocks its GEMMs)."""
    n, h, wd, c = x.shape
    oh, ow = win.out_size(h, wd)
    nhwc._check_out(oh, ow, "convolution", x.shape)
    k, o = w.shape
    if out is None:
        out = scratch.get("q", (n, oh, ow, o), np.dtype(np.int8))
    block = dispatch.THRESHOLDS.gemm_block_bytes
    rows = min(oh, max(1, block // max(1, ow * (o + k) * 4)))
    f32 = np.dtype(F32)
    cols = scratch.get("qcols", (rows * ow, k), f32)
    acc = scratch.get("qacc", (rows * ow, o), f32)
    blas_accel.q8_conv(x, F32(x_zp), w, compiled.per_channel(bias, o, 0),
                       compiled.per_channel(scale, o, 1), F32(out_zp), F32(lo - out_zp),
                       F32(hi - out_zp), cols, acc, out,
                       (win.kh, win.kw, win.sh, win.sw, win.dh, win.dw, win.pad_top,
                        win.pad_left), rows)
    return out


def dynamic_fc(x: DynQ, w_t: np.ndarray, w_scale: np.ndarray, bias: np.ndarray | None,
               ) -> np.ndarray:
    """qdint8 x per-channel int8 weights -> float32 (``qd8-f32-qc8w-gemm``):
    ``float(acc) * in_scale * w_scale + bias``."""
    acc = x.centered() @ w_t
    out = acc.astype(F32) * x.row_scale(acc.ndim) * w_scale
    if bias is not None:
        out += bias
    return out


def conv_acc(xc: np.ndarray, kind: str, w: np.ndarray, win: nhwc.Window, groups: int,
             extra: tuple[int, ...] = (), scratch: nhwc.Scratch | None = None) -> np.ndarray:
    """Exact integer accumulators of a convolution of centered inputs (float64, padding
    contributes 0 as XNNPACK pads with the input zero point). ``w`` is prepared as the float
    kernel of the same ``kind`` expects; ``scratch`` holds the node's reused buffers (the
    result may be one of them: the caller consumes it before the node runs again)."""
    if kind == "conv":
        return nhwc.conv2d(xc, w, None, win, groups, scratch)
    if kind == "dwconv":
        return nhwc.depthwise_conv2d(xc, w, None, win, extra[0], scratch, constant_filter=True)
    return nhwc.deconv2d(xc, w, None, win, groups, extra[0], extra[1])


# ---- elementwise ---------------------------------------------------------------------------


def add(a: np.ndarray, b: np.ndarray, a_scale: float, a_zp: int, b_scale: float, b_zp: int,
        out_scale: float, out_zp: int, lo: int = QMIN, hi: int = QMAX,
        out: np.ndarray | None = None) -> np.ndarray:
    """XNNPACK's fixed-point int8 add (``qs8-vadd``), clipped to ``lo``..``hi`` (the clamp
    node XNNPACK inserts for a min/max), into ``out`` when given. With the ``accel`` extra,
    same-shaped inputs take one compiled pass (the same integer operations: the same bytes)."""
    ma, mb, bias, shift, t = _add_params(a_scale, a_zp, b_scale, b_zp, out_scale)
    if a.shape == b.shape and a.dtype == b.dtype == np.int8 and a.flags.c_contiguous and \
            b.flags.c_contiguous and accel.available() and \
            (out is None or out.flags.c_contiguous):
        if out is None:
            out = np.empty(a.shape, np.int8)
        _add_loop(a.reshape(-1), b.reshape(-1), ma, mb, bias, shift, out_zp, max(lo, QMIN),
                  min(hi, QMAX), out.reshape(-1))
        return out
    acc = np.add(np.multiply(a, t(ma), dtype=t), np.multiply(b, t(mb), dtype=t))
    acc += t(bias)
    acc >>= shift
    acc += t(out_zp)
    r = np.clip(np.clip(acc, QMIN, QMAX).astype(np.int8), lo, hi)
    if out is None:
        return r
    np.copyto(out, r)
    return out


@accel.jit
def _add_loop(a, b, ma, mb, bias, shift, out_zp, lo, hi, out):  # pragma: no cover - compiled
    """:func:`add` of flat int8 ``a`` and ``b`` into ``out``: its integer operations in
    64 bits (the int32 sums of the NumPy path never overflow: :func:`_add_params`)."""
    for j in range(a.size):
        v = ((np.int64(a[j]) * ma + np.int64(b[j]) * mb + bias) >> shift) + out_zp
        out[j] = np.int8(min(max(v, lo), hi))


def _add_params(a_scale: float, a_zp: int, b_scale: float, b_zp: int, out_scale: float
                ) -> tuple[int, int, int, int, type]:
    """(a's multiplier, b's, the bias, the shift, the accumulator type) of :func:`add`."""
    sa = F32(a_scale) / F32(out_scale)
    sb = F32(b_scale) / F32(out_scale)
    top = max(abs(sa), abs(sb))
    exponent = int((np.array(top, F32).view(np.uint32) >> 23) & 0xFF) - 127
    shift = 20 - exponent
    ma = int(np.rint(np.float64(abs(sa)) * 2.0**shift)) * (-1 if sa < 0 else 1)
    mb = int(np.rint(np.float64(abs(sb)) * 2.0**shift)) * (-1 if sb < 0 else 1)
    bias = (1 << (shift - 1)) - ma * a_zp - mb * b_zp
    # XNNPACK sums in int32 (so do we: half the memory traffic of int64); parameters that do
    # not fit int32 keep int64
    t = np.int32 if shift < 31 and -(2**31) <= bias < 2**31 else np.int64
    return ma, mb, bias, shift, t


def multiply(a: np.ndarray, b: np.ndarray, a_scale: float, a_zp: int, b_scale: float,
             b_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """XNNPACK's int8 multiply (``qs8-vmul`` fp32): ``(a - a_zp) * (b - b_zp)`` requantized."""
    scale = (F32(a_scale) * F32(b_scale)) / F32(out_scale)
    acc = (a.astype(np.int32) - a_zp) * (b.astype(np.int32) - b_zp)
    return requantize(acc, scale, out_zp)


def mean(q: np.ndarray, axes: tuple[int, ...], in_scale: float, in_zp: int, out_scale: float,
         out_zp: int, keepdims: bool, lo: int = QMIN, hi: int = QMAX) -> np.ndarray:
    """int8 mean over ``axes`` (XNNPACK's reduce: int32 sum, one float32 rescale), clipped
    to the node's bounds ``lo``..``hi``. With the ``accel`` extra, the mean over the middle
    axes of an NHWC tensor (global average pooling) is one compiled pass (the same bytes)."""
    n = int(np.prod([q.shape[a] for a in axes]))
    s = (F32(in_scale) / F32(out_scale)) * (F32(1) / F32(n))
    zp = F32(out_zp) - F32(n * in_zp) * s
    if q.ndim == 4 and axes == (1, 2) and q.dtype == np.int8 and accel.available():
        out = np.empty((q.shape[0], 1, 1, q.shape[3]), np.int8)
        _mean_hw(np.ascontiguousarray(q), s, zp, F32(max(lo, QMIN)), F32(min(hi, QMAX)),
                 out.reshape(q.shape[0], q.shape[3]))
        return out if keepdims else out.reshape(q.shape[0], q.shape[3])
    total = q.astype(np.int64).sum(axis=axes, keepdims=keepdims)
    v = total.astype(F32) * s + zp
    return np.clip(np.clip(np.rint(v), QMIN, QMAX).astype(np.int8), lo, hi)


@accel.jit
def _mean_hw(q, s, zp, lo, hi, out):  # pragma: no cover - compiled
    """:func:`mean` of int8 ``q`` [N, H, W, C] over H and W into ``out`` [N, C]: exact
    integer sums, then the float32 operations of the NumPy path in its order."""
    nb, h, w, c = q.shape
    total = np.zeros(c, np.int64)
    for n in range(nb):
        total[:] = 0
        for y in range(h):
            for x in range(w):
                for ch in range(c):
                    total[ch] += q[n, y, x, ch]
        for ch in range(c):
            v = np.rint(np.float32(total[ch]) * s + zp)
            out[n, ch] = np.int8(min(max(v, lo), hi))


def max_pool2d(q: np.ndarray, win: nhwc.Window, out: np.ndarray | None = None) -> np.ndarray:
    """Max pooling of integers: padded cells hold the type's minimum, so they never win."""
    return K.max_pool2d(q, win, out=out)
