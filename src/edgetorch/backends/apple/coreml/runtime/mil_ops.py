"""What each Core ML (MIL) operation computes, in NumPy, for the ML program interpreter.

A handler takes the operation's inputs by name (constants and computed values alike; a
missing optional input is absent) and returns its output(s). Inputs arrive as float32 when
the program stores them as float16, and the interpreter rounds each output to the dtype the
program declares for it, which is where Core ML's fp16 programs round. Semantics are those
of coremltools' MIL op definitions (``coremltools.converters.mil.mil.ops.defs``), which the
Core ML framework implements; convolutions and pooling use edgetorch's portable kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .....errors import FormatError, KernelError
from .....kernels import KERNELS

MilOp = Callable[..., Any]
MIL_OPS: dict[str, MilOp] = {}

NP_DTYPES = {"bool": np.bool_, "fp16": np.float16, "fp32": np.float32, "fp64": np.float64,
             "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
             "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}


def mil_op(*names: str) -> Callable[[MilOp], MilOp]:
    def deco(fn: MilOp) -> MilOp:
        for name in names:
            if name in MIL_OPS:
                raise ValueError(f"MIL operation {name!r} is registered twice")
            MIL_OPS[name] = fn
        return fn
    return deco


def unpack_bits(raw: bytes | np.ndarray, bits: int, signed: bool, count: int) -> np.ndarray:
    """``count`` ``bits``-bit integers packed low bits first (Core ML's sub-byte storage)."""
    b = np.frombuffer(bytes(raw), np.uint8)
    if b.size * 8 < count * bits:
        raise FormatError(f"Core ML: {b.size} bytes hold fewer than {count} {bits}-bit values")
    if bits == 8:
        return b[:count].view(np.int8) if signed else b[:count].copy()
    vals = np.unpackbits(b, bitorder="little")[:count * bits].reshape(count, bits)
    ints = (vals.astype(np.int16) << np.arange(bits, dtype=np.int16)).sum(axis=1)
    if signed:
        ints = np.where(ints >= 1 << (bits - 1), ints - (1 << bits), ints)
    return ints.astype(np.int8 if signed else np.uint8)


def _f32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _ints(x: Any) -> list[int]:
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _axis(a: int, rank: int) -> int:
    a = int(a)
    return a + rank if a < 0 else a


# ---- elementwise -------------------------------------------------------------------------

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "real_div": np.true_divide,
           "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
           "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
           "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
           "logical_and": np.logical_and, "logical_or": np.logical_or,
           "logical_xor": np.logical_xor}
for _n, _f in _BINARY.items():
    mil_op(_n)(lambda x, y, _f=_f: _f(np.asarray(x), np.asarray(y)))


@mil_op("floor_div")
def _floor_div(x, y):
    return np.floor_divide(x, y)


@mil_op("mod")
def _mod(x, y):
    return np.mod(x, y)


_UNARY = {"abs": np.abs, "ceil": np.ceil, "floor": np.floor, "round": np.round, "sign": np.sign,
          "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "exp": np.exp,
          "exp2": np.exp2, "sqrt": np.sqrt, "square": np.square, "logical_not": np.logical_not,
          "identity": lambda x: x, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
          "sinh": np.sinh, "cosh": np.cosh, "atanh": np.arctanh}
for _n, _f in _UNARY.items():
    mil_op(_n)(lambda x, _f=_f: _f(np.asarray(x)))


@mil_op("log")
def _log(x, epsilon=1e-45):
    return np.log(_f32(x) + np.float32(epsilon))


@mil_op("rsqrt")
def _rsqrt(x, epsilon=1e-12):
    return 1.0 / np.sqrt(_f32(x) + np.float32(epsilon))


@mil_op("inverse")
def _inverse(x, epsilon=1e-4):
    return 1.0 / (_f32(x) + np.float32(epsilon))


@mil_op("relu")
def _relu(x):
    return np.maximum(x, np.zeros((), np.asarray(x).dtype))


@mil_op("relu6")
def _relu6(x):
    return np.clip(x, 0, 6)


@mil_op("leaky_relu")
def _leaky_relu(x, alpha=0.01):
    x = _f32(x)
    return np.where(x >= 0, x, x * np.float32(alpha))


@mil_op("clip")
def _clip(x, alpha, beta):
    return np.minimum(np.maximum(x, np.float32(alpha)), np.float32(beta))


@mil_op("sigmoid")
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-_f32(x)))


@mil_op("silu")
def _silu(x):
    x = _f32(x)
    return x / (1.0 + np.exp(-x))


@mil_op("erf")
def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(_f32(x)).astype(np.float32)


@mil_op("gelu")
def _gelu(x, mode="EXACT"):
    x = _f32(x).astype(np.float64)
    if mode == "TANH_APPROXIMATION":
        y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    elif mode == "SIGMOID_APPROXIMATION":
        y = x / (1 + np.exp(-1.702 * x))
    else:
        y = 0.5 * x * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))
    return y.astype(np.float32)


@mil_op("softplus")
def _softplus(x):
    return np.logaddexp(0, _f32(x))


@mil_op("cast")
def _cast(x, dtype):
    if dtype not in NP_DTYPES:
        raise KernelError(f"Core ML cast: unknown dtype {dtype!r}")
    return np.asarray(x).astype(NP_DTYPES[dtype])


@mil_op("select")
def _select(cond, a, b):
    return np.where(np.asarray(cond).astype(bool), a, b)


# ---- reductions and normalisations ---------------------------------------------------------

def _reduce(fn: Callable, x: Any, axes: Any, keep_dims: bool) -> np.ndarray:
    x = np.asarray(x)
    ax = None if axes is None else tuple(_axis(a, x.ndim) for a in _ints(axes))
    return fn(x, axis=ax, keepdims=bool(keep_dims))


for _n, _f in {"reduce_mean": np.mean, "reduce_sum": np.sum, "reduce_max": np.max,
               "reduce_min": np.min, "reduce_prod": np.prod}.items():
    mil_op(_n)(lambda x, axes=None, keep_dims=False, _f=_f: _reduce(_f, x, axes, keep_dims))


@mil_op("reduce_sum_square")
def _reduce_sum_square(x, axes=None, keep_dims=False):
    return _reduce(np.sum, _f32(x) ** 2, axes, keep_dims)


@mil_op("reduce_l2_norm")
def _reduce_l2(x, axes=None, keep_dims=False):
    return np.sqrt(_reduce(np.sum, _f32(x) ** 2, axes, keep_dims))


def _arg(fn: Callable) -> MilOp:
    def run(x, axis=-1, keep_dims=False, output_dtype="int32"):
        x = np.asarray(x)
        a = _axis(axis, x.ndim)
        r = fn(x, axis=a)
        return np.expand_dims(r, a) if keep_dims else r
    return run


mil_op("reduce_argmax")(_arg(np.argmax))
mil_op("reduce_argmin")(_arg(np.argmin))


@mil_op("softmax")
def _softmax(x, axis=-1):
    x = _f32(x)
    e = np.exp(x - np.max(x, axis=int(axis), keepdims=True))
    return e / np.sum(e, axis=int(axis), keepdims=True)


@mil_op("layer_norm")
def _layer_norm(x, axes=None, gamma=None, beta=None, epsilon=1e-5):
    x = _f32(x)
    ax = tuple(_axis(a, x.ndim) for a in _ints(axes)) if axes is not None else tuple(
        range(x.ndim))
    mean = np.mean(x, axis=ax, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=ax, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.float32(epsilon))
    if gamma is not None:
        y = y * _f32(gamma)
    if beta is not None:
        y = y + _f32(beta)
    return y


@mil_op("batch_norm")
def _batch_norm(x, mean, variance, gamma=None, beta=None, epsilon=1e-5):
    x = _f32(x)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - _f32(mean).reshape(shape)) / np.sqrt(_f32(variance).reshape(shape)
                                                  + np.float32(epsilon))
    if gamma is not None:
        y = y * _f32(gamma).reshape(shape)
    if beta is not None:
        y = y + _f32(beta).reshape(shape)
    return y


@mil_op("instance_norm")
def _instance_norm(x, gamma=None, beta=None, epsilon=1e-5):
    x = _f32(x)
    ax = tuple(range(2, x.ndim))
    mean = np.mean(x, axis=ax, keepdims=True)
    y = (x - mean) / np.sqrt(np.mean((x - mean) ** 2, axis=ax, keepdims=True)
                             + np.float32(epsilon))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if gamma is not None:
        y = y * _f32(gamma).reshape(shape)
    if beta is not None:
        y = y + _f32(beta).reshape(shape)
    return y


# ---- linear algebra ------------------------------------------------------------------------

@mil_op("linear")
def _linear(x, weight, bias=None):
    y = _f32(x) @ _f32(weight).T
    return y if bias is None else y + _f32(bias)


@mil_op("matmul")
def _matmul(x, y, transpose_x=False, transpose_y=False):
    a, b = _f32(x), _f32(y)
    if transpose_x:
        a = np.swapaxes(a, -1, -2)
    if transpose_y:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


@mil_op("einsum")
def _einsum(values, equation):
    return np.einsum(str(equation), *[_f32(v) for v in values])


@mil_op("scaled_dot_product_attention")
def _sdpa(query, key, value, attn_mask=None):
    q, k, v = _f32(query), _f32(key), _f32(value)
    s = q @ np.swapaxes(k, -1, -2) / np.float32(math.sqrt(q.shape[-1]))
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        s = np.where(m, s, -np.inf) if m.dtype == np.bool_ else s + _f32(m)
    return _softmax(s, -1) @ v


# ---- convolution and pooling ---------------------------------------------------------------

def _pads(x: np.ndarray, kernel: list[int], strides: list[int], dilations: list[int],
          pad_type: str, pad: Any) -> list[tuple[int, int]]:
    """(begin, end) per spatial dim for MIL's pad types."""
    n = len(kernel)
    if pad_type == "custom":
        p = _ints(pad) if pad is not None else [0] * (2 * n)
        return [(p[2 * i], p[2 * i + 1]) for i in range(n)]
    if pad_type == "valid":
        return [(0, 0)] * n
    out = []
    for i in range(n):
        size = x.shape[2 + i]
        eff = (kernel[i] - 1) * dilations[i] + 1
        total = max((math.ceil(size / strides[i]) - 1) * strides[i] + eff - size, 0)
        lo = total // 2 if pad_type == "same" else total - total // 2
        out.append((lo, total - lo))
    return out


@mil_op("conv")
def _conv(x, weight, bias=None, strides=None, pad_type="valid", pad=None, dilations=None,
          groups=1):
    x, w = _f32(x), _f32(weight)
    n = w.ndim - 2
    strides = _ints(strides) if strides is not None else [1] * n
    dilations = _ints(dilations) if dilations is not None else [1] * n
    pads = _pads(x, list(w.shape[2:]), strides, dilations, pad_type, pad)
    if any(lo != hi for lo, hi in pads):  # asymmetric: pad explicitly, then convolve
        x = np.pad(x, [(0, 0), (0, 0)] + pads)
        pads = [(0, 0)] * n
    shape = [x.shape[0], w.shape[0]] + [
        (x.shape[2 + i] + 2 * pads[i][0] - dilations[i] * (w.shape[2 + i] - 1) - 1)
        // strides[i] + 1 for i in range(n)]
    out = np.empty(shape, np.float32)
    return KERNELS["aten::convolution.out"].fn(
        x, w, None if bias is None else _f32(bias), strides, [p[0] for p in pads], dilations,
        False, [0] * n, int(groups), out)


def _pool(kernel_name: str, x, kernel_sizes, strides, pad_type, pad, ceil_mode, extra):
    x = _f32(x)
    k, s = _ints(kernel_sizes), _ints(strides) if strides is not None else None
    s = s or [1] * len(k)
    pads = _pads(x, k, s, [1] * len(k), pad_type, pad)
    fill = -np.inf if "max" in kernel_name else 0.0
    if any(lo != hi for lo, hi in pads):
        x = np.pad(x, [(0, 0), (0, 0)] + pads, constant_values=fill)
        pads = [(0, 0)] * len(k)
    return x, k, s, [p[0] for p in pads], bool(ceil_mode)


@mil_op("max_pool")
def _max_pool(x, kernel_sizes, strides=None, pad_type="valid", pad=None, ceil_mode=False):
    x, k, s, p, ceil = _pool("max", x, kernel_sizes, strides, pad_type, pad, ceil_mode, None)
    out = np.empty(1, np.float32)
    idx = np.empty(1, np.int64)
    y, _ = KERNELS["aten::max_pool2d_with_indices.out"].fn(x, k, s, p, [1, 1], ceil, out, idx)
    return y


@mil_op("avg_pool")
def _avg_pool(x, kernel_sizes, strides=None, pad_type="valid", pad=None,
              exclude_padding_from_average=False, ceil_mode=False):
    x, k, s, p, ceil = _pool("avg", x, kernel_sizes, strides, pad_type, pad, ceil_mode, None)
    out = np.empty(1, np.float32)
    return KERNELS["aten::avg_pool2d.out"].fn(x, k, s, p, ceil,
                                             not bool(exclude_padding_from_average), None, out)


# ---- shapes and data movement -----------------------------------------------------------------

@mil_op("reshape")
def _reshape(x, shape):
    x = np.asarray(x)
    dims = _ints(shape)
    dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]  # 0 keeps the dim
    return np.reshape(x, dims)


@mil_op("transpose")
def _transpose(x, perm):
    return np.transpose(x, _ints(perm))


@mil_op("expand_dims")
def _expand_dims(x, axes):
    x = np.asarray(x)
    out_rank = x.ndim + len(_ints(axes))
    return np.expand_dims(x, tuple(_axis(a, out_rank) for a in _ints(axes)))


@mil_op("squeeze")
def _squeeze(x, axes=None):
    x = np.asarray(x)
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, tuple(_axis(a, x.ndim) for a in _ints(axes)))


@mil_op("concat")
def _concat(values, axis, interleave=False):
    vals = [np.asarray(v) for v in values]
    a = _axis(axis, vals[0].ndim)
    if interleave:
        stacked = np.stack(vals, axis=a + 1)
        shape = list(vals[0].shape)
        shape[a] *= len(vals)
        return stacked.reshape(shape)
    return np.concatenate(vals, axis=a)


@mil_op("stack")
def _stack(values, axis):
    return np.stack([np.asarray(v) for v in values], axis=int(axis))


@mil_op("split")
def _split(x, axis, num_splits=None, split_sizes=None):
    x = np.asarray(x)
    a = _axis(axis, x.ndim)
    if split_sizes is not None:
        bounds = np.cumsum(_ints(split_sizes))[:-1]
        return tuple(np.split(x, bounds, axis=a))
    return tuple(np.split(x, int(num_splits), axis=a))


def _mask(m: Any, rank: int) -> list[bool]:
    return [bool(v) for v in np.asarray(m).reshape(-1)] if m is not None else [False] * rank


@mil_op("slice_by_index")
def _slice_by_index(x, begin, end, stride=None, begin_mask=None, end_mask=None,
                    squeeze_mask=None):
    x = np.asarray(x)
    r = x.ndim
    b, e = _ints(begin), _ints(end)
    s = _ints(stride) if stride is not None else [1] * r
    bm, em, sm = _mask(begin_mask, r), _mask(end_mask, r), _mask(squeeze_mask, r)
    index = []
    for i in range(r):
        if sm[i]:
            index.append(b[i])
            continue
        start = None if bm[i] else b[i]
        stop = None if em[i] else e[i]
        index.append(slice(start, stop, s[i]))
    return np.asarray(x[tuple(index)])


@mil_op("slice_by_size")
def _slice_by_size(x, begin, size):
    x = np.asarray(x)
    index = tuple(slice(b, None if n == -1 else b + n) for b, n in zip(_ints(begin), _ints(size)))
    return x[index]


@mil_op("gather")
def _gather(x, indices, axis=0, batch_dims=0, validate_indices=False):
    x, idx = np.asarray(x), np.asarray(indices).astype(np.int64)
    a = _axis(axis, x.ndim)
    if int(batch_dims):
        raise KernelError("Core ML gather with batch_dims > 0 is not supported by this "
                          "interpreter")
    idx = np.where(idx < 0, idx + x.shape[a], idx)
    if np.any(idx < 0) or np.any(idx >= x.shape[a]):
        raise KernelError(f"Core ML gather: an index is outside [0, {x.shape[a]})")
    return np.take(x, idx, axis=a)


@mil_op("gather_along_axis")
def _gather_along_axis(x, indices, axis=0, validate_indices=False):
    x = np.asarray(x)
    a = _axis(axis, x.ndim)
    idx = np.asarray(indices).astype(np.int64)
    idx = np.where(idx < 0, idx + x.shape[a], idx)
    if np.any(idx < 0) or np.any(idx >= x.shape[a]):
        raise KernelError(f"Core ML gather_along_axis: an index is outside [0, {x.shape[a]})")
    return np.take_along_axis(x, idx, axis=a)


@mil_op("tile")
def _tile(x, reps):
    return np.tile(x, _ints(reps))


@mil_op("pad")
def _pad(x, pad, mode="constant", constant_val=0.0):
    x = np.asarray(x)
    p = _ints(pad)
    n = len(p) // 2
    pairs = [(0, 0)] * (x.ndim - n) + [(p[2 * i], p[2 * i + 1]) for i in range(n)]
    if mode == "constant":
        return np.pad(x, pairs, constant_values=constant_val)
    return np.pad(x, pairs, mode={"reflect": "reflect", "replicate": "edge"}[mode])


@mil_op("fill")
def _fill(shape, value=0.0):
    return np.full(_ints(shape), value, dtype=np.float32)


@mil_op("fill_like")
def _fill_like(ref_tensor, value=0.0):
    return np.full(np.asarray(ref_tensor).shape, value)


@mil_op("shape")
def _shape(x):
    return np.asarray(np.asarray(x).shape, np.int32)


@mil_op("range_1d")
def _range_1d(end, start, step):
    return np.arange(start, end, step)


@mil_op("band_part")
def _band_part(x, lower=-1, upper=-1):
    x = np.asarray(x)
    m, n = x.shape[-2], x.shape[-1]
    i = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    keep = ((int(lower) < 0) | (i - j <= int(lower))) & ((int(upper) < 0) | (j - i <= int(upper)))
    return np.where(keep, x, np.zeros((), x.dtype))


@mil_op("cumsum")
def _cumsum(x, axis=0, exclusive=False, reverse=False):
    x = np.asarray(x)
    a = _axis(axis, x.ndim)
    if reverse:
        x = np.flip(x, a)
    y = np.cumsum(x, axis=a)
    if exclusive:
        y = y - x
    return np.flip(y, a) if reverse else y


@mil_op("topk")
def _topk(x, k=1, axis=-1, ascending=False, sort=True, return_indices=True):
    x = np.asarray(x)
    a = _axis(axis, x.ndim)
    order = np.argsort(x if ascending else -x, axis=a, kind="stable")
    idx = np.take(order, np.arange(int(k)), axis=a)
    return np.take_along_axis(x, idx, axis=a), idx.astype(np.int32)


@mil_op("argsort")
def _argsort(x, axis=-1, ascending=False):
    x = np.asarray(x)
    return np.argsort(x if ascending else -x, axis=int(axis), kind="stable").astype(np.int32)


@mil_op("upsample_nearest_neighbor")
def _upsample_nearest(x, scale_factor_height=1, scale_factor_width=1):
    x = np.asarray(x)
    return np.repeat(np.repeat(x, int(scale_factor_height), axis=-2),
                     int(scale_factor_width), axis=-1)


# ---- constant-expression (compressed weight) ops ---------------------------------------------

@mil_op("constexpr_affine_dequantize")
def _constexpr_affine_dequantize(quantized_data, zero_point, scale, axis):
    q = np.asarray(quantized_data).astype(np.float32)
    a = _axis(axis, q.ndim)
    shape = [1] * q.ndim
    zp, s = np.asarray(zero_point, np.float32), np.asarray(scale, np.float32)
    if zp.ndim:
        shape[a] = -1
        zp = zp.reshape(shape)
    if s.ndim:
        shape[a] = -1
        s = s.reshape(shape)
    return (q - zp) * s


@mil_op("constexpr_blockwise_shift_scale")
def _constexpr_blockwise_shift_scale(data, scale, offset=None):
    d = np.asarray(data).astype(np.float32)
    s = np.asarray(scale, np.float32)
    reps = _block_sizes(d.shape, s.shape)
    if offset is not None:
        d = d - _expand_blocks(np.asarray(offset, np.float32), reps)
    return d * _expand_blocks(s, reps)


def _block_sizes(shape: tuple, blocks: tuple) -> list[int]:
    """How many elements of ``shape`` each entry of a per-block tensor covers, per axis."""
    if len(shape) != len(blocks) or any(b <= 0 or n % b for n, b in zip(shape, blocks)):
        raise ValueError(f"per-block shape {list(blocks)} does not tile {list(shape)}")
    return [n // b for n, b in zip(shape, blocks)]


def _expand_blocks(a: np.ndarray, reps: list[int]) -> np.ndarray:
    for axis, r in enumerate(reps):
        a = np.repeat(a, r, axis=axis)
    return a


@mil_op("constexpr_cast")
def _constexpr_cast(source_val, output_dtype):
    return _cast(source_val, output_dtype)


@mil_op("constexpr_lut_to_dense")
def _constexpr_lut_to_dense(indices, lut, shape=None, vector_axis=None):
    """Palettized weights: each index picks an entry of its look-up table. iOS 16 form
    (``shape`` given): one table, indices packed ``log2(len(lut))`` bits each, low bits first.
    iOS 18 form: indices already unpacked in the output's shape, ``lut`` of shape
    ``blocks + [palettes, vector]`` (one table per block of indices; a vector of ``vector``
    values per entry, laid out along ``vector_axis``)."""
    lut = np.asarray(lut)
    if shape is not None:
        dims = _ints(shape)
        bits = int(lut.size).bit_length() - 1
        if lut.ndim != 1 or lut.size != 1 << bits or not 1 <= bits <= 8:
            raise ValueError(f"an iOS 16 look-up table has 2, 4, 16, 64 or 256 entries, not "
                             f"{lut.shape}")
        count = math.prod(dims)
        return lut[unpack_bits(np.asarray(indices, np.uint8), bits, False, count)].reshape(dims)
    idx = np.asarray(indices).astype(np.intp)
    if lut.ndim != idx.ndim + 2:
        raise ValueError(f"a look-up table of rank {lut.ndim} for indices of rank {idx.ndim} "
                         "(it needs two more dimensions)")
    reps = _block_sizes(idx.shape, lut.shape[:idx.ndim])
    blocks = np.ix_(*[np.arange(n) // r for n, r in zip(idx.shape, reps)])
    picked = lut[(*blocks, idx)]  # indices' shape + [vector]
    if lut.shape[-1] == 1:
        return picked[..., 0]
    axis = _axis(vector_axis, idx.ndim)
    out_shape = list(idx.shape)
    out_shape[axis] *= lut.shape[-1]
    return np.moveaxis(picked, -1, axis + 1).reshape(out_shape)


@mil_op("constexpr_sparse_to_dense")
def _constexpr_sparse_to_dense(nonzero_data, mask, shape=None):
    """Pruned weights: zeros except where the mask is set, filled in order from
    ``nonzero_data``. iOS 16: the mask is bytes of bits (low first) and ``shape`` is given;
    iOS 18: the mask is a uint1 tensor of the output's shape."""
    data = np.asarray(nonzero_data)
    if shape is not None:
        dims = _ints(shape)
        set_bits = unpack_bits(np.asarray(mask, np.uint8), 1, False, math.prod(dims))
        set_bits = set_bits.reshape(dims)
    else:
        set_bits = np.asarray(mask)
    out = np.zeros(set_bits.shape, data.dtype)
    out[set_bits != 0] = data  # a count mismatch raises ValueError
    return out


@mil_op("constexpr_lut_to_sparse")
def _constexpr_lut_to_sparse(indices_mask, indices_nonzero_data, lut, vector_axis=None):
    """Palettized and pruned: (the output's mask, its non-zero values in order)."""
    indices = _constexpr_sparse_to_dense(indices_nonzero_data, indices_mask)
    dense = _constexpr_lut_to_dense(indices, lut, vector_axis=vector_axis)
    mask = np.asarray(indices_mask)
    if vector_axis is not None and np.asarray(lut).shape[-1] > 1:
        mask = np.repeat(mask, np.asarray(lut).shape[-1], axis=_axis(vector_axis, mask.ndim))
    return mask, dense[mask != 0]


@mil_op("constexpr_sparse_blockwise_shift_scale")
def _constexpr_sparse_blockwise_shift_scale(data_mask, nonzero_data, scale, offset=None):
    """Quantized and pruned: (the mask, the dequantized non-zero values in order)."""
    mask = np.asarray(data_mask)
    dense = _constexpr_blockwise_shift_scale(_constexpr_sparse_to_dense(nonzero_data, mask),
                                             scale, offset)
    return mask, dense[mask != 0]


@mil_op("dequantize")
def _dequantize(input, scale, zero_point=None, axis=None):
    q = np.asarray(input).astype(np.float32)
    s = np.asarray(scale, np.float32)
    zp = np.zeros((), np.float32) if zero_point is None else np.asarray(zero_point, np.float32)
    if axis is not None and s.ndim:
        shape = [1] * q.ndim
        shape[_axis(axis, q.ndim)] = -1
        s, zp = s.reshape(shape), zp.reshape(shape) if zp.ndim else zp
    return (q - zp) * s


@mil_op("quantize")
def _quantize(input, scale, zero_point=None, axis=None, output_dtype="int8"):
    x = _f32(input)
    s = np.asarray(scale, np.float32)
    zp = np.zeros((), np.float32) if zero_point is None else np.asarray(zero_point, np.float32)
    if axis is not None and s.ndim:
        shape = [1] * x.ndim
        shape[_axis(axis, x.ndim)] = -1
        s, zp = s.reshape(shape), zp.reshape(shape) if zp.ndim else zp
    dt = NP_DTYPES[output_dtype]
    info = np.iinfo(dt)
    return np.clip(np.round(x / s + zp), info.min, info.max).astype(dt)
