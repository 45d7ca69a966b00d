"""Weight-only quantized embeddings: ``embedding_byte``, ``embedding_4bit``, ``embedding_2bit``
(and their ``dtype_out`` variants), as ExecuTorch's quantized library computes them."""

from __future__ import annotations

import numpy as np

from ..portable._util import FLOAT32, INT64, finish
from ..registry import kernel
from ._common import dtype_of, require

_FLOATS = ("float32", "float16", "bfloat16")


def unpack(weight: np.ndarray, nbit: int) -> np.ndarray:
    """Packed uint8 rows -> int values: 4-bit puts the even column in the high nibble, 2-bit
    puts column 4k+i in bits 2i..2i+1; both store ``value + 2**(nbit-1)``."""
    if nbit == 8:
        return weight.astype(np.int32)
    w = weight.astype(np.int32)
    if nbit == 4:
        parts = [(w >> 4) & 0xF, w & 0xF]
    else:
        parts = [(w >> (2 * i)) & 0x3 for i in range(4)]
    return np.stack(parts, axis=-1).reshape(w.shape[0], -1) - (1 << (nbit - 1))


def _embedding(op: str, nbit: int, weight, scales, zero_points, qmin, qmax, indices,
               out_dtype, out, params_follow_out: bool):
    require(weight.ndim == 2, f"{op}: weight must be 2-D, got {weight.ndim}-D")
    require(scales.ndim in (1, 2), f"{op}: weight_scales must be 1-D or 2-D, got {scales.ndim}-D")
    require(scales.shape[0] == weight.shape[0],
            f"{op}: {scales.shape[0]} rows of scales for {weight.shape[0]} weight rows")
    allowed = ("uint8", "int8") if nbit == 8 else ("uint8",)
    require(weight.dtype.name in allowed, f"{op}: weight must be {' or '.join(allowed)}, got "
            f"{weight.dtype}")
    require(out.dtype.name in _FLOATS, f"{op}: out must be float32, float16 or bfloat16, got "
            f"{out.dtype}")
    require(scales.dtype.name in _FLOATS, f"{op}: weight_scales must be float32, float16 or "
            f"bfloat16, got {scales.dtype}")
    if params_follow_out:  # the plain .out variant reads the scales in out's dtype
        require(scales.dtype == out.dtype, f"{op}: weight_scales ({scales.dtype}) must have "
                f"out's dtype ({out.dtype}); use the dtype_out variant to mix them")
    if zero_points is not None:
        require(zero_points.shape == scales.shape, f"{op}: weight_zero_points "
                f"{list(zero_points.shape)} must have weight_scales' shape {list(scales.shape)}")
        require(zero_points.dtype == out.dtype, f"{op}: weight_zero_points ({zero_points.dtype})"
                f" must have out's dtype ({out.dtype})")
    index_types = (INT64,) if nbit == 8 else (INT64, np.dtype(np.int32))
    require(indices.dtype in index_types, f"{op}: indices must be "
            f"{' or '.join(str(t) for t in index_types)}, got {indices.dtype}")
    require(qmin <= qmax, f"{op}: weight_quant_min {qmin} > weight_quant_max {qmax}")
    want = dtype_of(out_dtype, op)
    require(want is None or want == out.dtype, f"{op}: out is {out.dtype} but dtype says {want}")
    values = unpack(weight, nbit)
    rows, dim = values.shape
    groups = scales.shape[1] if scales.ndim == 2 else 1
    require(dim % groups == 0, f"{op}: {groups} groups do not divide embedding dim {dim}")
    idx = indices.astype(np.int64)
    require(idx.size == 0 or (idx.min() >= 0 and idx.max() < rows),
            f"{op}: index out of range for a table of {rows} rows")
    group_of = np.arange(dim) // (dim // groups)
    s = scales.reshape(rows, groups).astype(FLOAT32)[:, group_of]
    zp = (np.zeros((rows, dim), FLOAT32) if zero_points is None
          else zero_points.reshape(rows, groups).astype(FLOAT32)[:, group_of])
    table = (values.astype(FLOAT32) - zp) * s  # float32, as ExecuTorch's kernel
    return finish(table[idx].astype(out.dtype), out)


def _register(name: str, nbit: int) -> None:
    base = f"quantized_decomposed::{name}"

    def out_variant(weight, weight_scales, weight_zero_points, weight_quant_min,
                    weight_quant_max, indices, out):
        return _embedding(f"{base}.out", nbit, weight, weight_scales, weight_zero_points,
                          weight_quant_min, weight_quant_max, indices, None, out, True)

    def dtype_out_variant(weight, weight_scales, weight_zero_points, weight_quant_min,
                          weight_quant_max, indices, dtype, out):
        return _embedding(f"{base}.dtype_out", nbit, weight, weight_scales, weight_zero_points,
                          weight_quant_min, weight_quant_max, indices, dtype, out, False)

    out_variant.__name__ = out_variant.__qualname__ = f"{name}_out"
    dtype_out_variant.__name__ = dtype_out_variant.__qualname__ = f"{name}_dtype_out"
    kernel(f"{base}.out")(out_variant)
    kernel(f"{base}.dtype_out")(dtype_out_variant)


_register("embedding_byte", 8)
_register("embedding_4bit", 4)
_register("embedding_2bit", 2)
