"""Quantized XNNPACK values: decoding ``XNNQuantizedTensorValue`` (``XNNCompiler.cpp``'s
``defineTensor``) into a storage dtype, constant data and :class:`QParams`.

* ``PerTensorQuant`` (qint8 / quint8 / qint32): scale and zero point inline;
* ``PerChannelQuant`` (qcint8 / qcint32 / qcint4, symmetric): the scales inline or, as
  ExecuTorch 1.5 writes them, float32 in constant ``scale_buffer_idx`` (named data
  ``"scale_" + sha256``); XNNPACK reads ``dims[channel_dim]`` of them;
* ``PerChannelGroupQuant`` (qbint4 ``[O, K]``): int4 packed two per byte, the even column in
  the low nibble, zero point 8; bf16 block scales ``[O, K / group_size]`` in constant
  ``scale_buffer_idx``, or float32 inline (rounded to bf16, as ExecuTorch does);
* ``PerTokenDynamicQuant`` (qdint8): no data; quantized at run time, one scale and zero point
  per row of the ``num_nonbatch_dims`` inner dimensions.

Constant per-channel int4 weights are unpacked to int8 once, at load; blockwise ones (the
8da4w LLM layers) stay packed as uint8 ``[O, K/2]`` for ``kernels_qb4w``. Parameters that do not fit their
value raise ``FormatError`` (or ``InvalidProgramError`` for combinations ExecuTorch never
writes) before anything runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....errors import ErrorCode, FormatError, InvalidProgramError
from .. import schema as x
from . import kernels_quant as Q

D = x.XNNDatatype
_STORAGE = {
    D.xnn_datatype_qint8: np.int8, D.xnn_datatype_quint8: np.uint8,
    D.xnn_datatype_qint32: np.int32, D.xnn_datatype_qcint8: np.int8,
    D.xnn_datatype_qcint32: np.int32, D.xnn_datatype_qdint8: np.int8,
    D.xnn_datatype_qcint4: np.int8,  # unpacked at load
    D.xnn_datatype_qbint4: np.uint8,  # kept packed, two a byte (kernels_qb4w)
}
_ALLOWED = {
    x.PerTensorQuant: (D.xnn_datatype_qint8, D.xnn_datatype_quint8, D.xnn_datatype_qint32),
    x.PerChannelQuant: (D.xnn_datatype_qcint8, D.xnn_datatype_qcint32, D.xnn_datatype_qcint4),
    x.PerChannelGroupQuant: (D.xnn_datatype_qbint4,),
    x.PerTokenDynamicQuant: (D.xnn_datatype_qdint8,),
}


@dataclass(frozen=True)
class QParams:
    """How a quantized value maps to real numbers: ``(q - zero_point) * scale``."""

    datatype: x.XNNDatatype
    scale: np.ndarray  # float32: () per tensor, [C] per channel, [O, K/group] per group
    zero_point: int = 0
    channel_dim: int = 0
    group_size: int = 0
    num_nonbatch_dims: int = 0

    @property
    def dynamic(self) -> bool:
        return self.datatype == D.xnn_datatype_qdint8

    @property
    def per_tensor(self) -> bool:
        return self.scale.ndim == 0 and not self.dynamic

    def same(self, other: QParams | None) -> bool:
        return (other is not None and self.per_tensor and other.per_tensor
                and float(self.scale) == float(other.scale)
                and self.zero_point == other.zero_point)


ConstantLoader = Callable[[int, str], Any]  # (constant index, what) -> bytes-like


def decode_value(value: x.XValue, load: ConstantLoader, where: str
                 ) -> tuple[np.dtype, np.ndarray | None, QParams]:
    """(storage dtype, constant data or None, parameters) of a quantized value; raises
    ``FormatError`` / ``InvalidProgramError`` for parameters that do not fit the value."""
    qv = value.xvalue_union
    assert isinstance(qv, x.XNNQuantizedTensorValue)
    t, p = qv.tensor_value, qv.quant_params
    allowed = _ALLOWED.get(type(p), ())
    if t.datatype not in allowed:
        raise InvalidProgramError(
            f"{where}: datatype {t.datatype.name} cannot be a quantized value with "
            f"{type(p).__name__} (they go with "
            f"{', '.join(d.name for d in allowed) or 'none'}); the blob is not one ExecuTorch "
            "writes — re-export it", code=ErrorCode.NotSupported)
    dims = tuple(int(d) for d in t.dims)
    dtype = np.dtype(_STORAGE[t.datatype])
    const = None
    raw = load(t.constant_buffer_idx, "data") if t.constant_buffer_idx else None
    if isinstance(p, x.PerTensorQuant):
        info = QParams(t.datatype, np.asarray(p.scale, np.float32), int(p.zero_point))
        if not (math.isfinite(p.scale) and p.scale > 0):
            raise FormatError(f"{where}: per-tensor scale {p.scale} is not a positive number")
        lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
        if t.datatype != D.xnn_datatype_qint32 and not lo <= p.zero_point <= hi:
            raise FormatError(f"{where}: zero point {p.zero_point} is outside {dtype}")
    elif isinstance(p, x.PerChannelQuant):
        info = _per_channel(p, t, dims, load, where)
    elif isinstance(p, x.PerChannelGroupQuant):
        info = _per_group(p, dims, load, where)
    else:
        if raw is not None:
            raise FormatError(f"{where}: a dynamically quantized value cannot be a constant")
        if not 0 < p.num_nonbatch_dims <= len(dims):
            raise FormatError(f"{where}: num_nonbatch_dims {p.num_nonbatch_dims} does not fit "
                              f"its {len(dims)} dimensions")
        info = QParams(t.datatype, np.ones((), np.float32), 0,
                       num_nonbatch_dims=p.num_nonbatch_dims)
    if raw is not None:
        const = _constant(raw, t.datatype, dims, dtype, where)
    return dtype, const, info


def _per_channel(p: x.PerChannelQuant, t: x.XNNTensorValue, dims: tuple[int, ...],
                 load: ConstantLoader, where: str) -> QParams:
    if not 0 <= p.channel_dim < len(dims):
        raise FormatError(f"{where}: channel_dim {p.channel_dim} is out of range for dims "
                          f"{list(dims)}")
    n = dims[p.channel_dim]
    if p.scale_buffer_idx:
        if p.num_scales and p.num_scales != n:
            raise FormatError(f"{where}: num_scales {p.num_scales} != {n} channels (dim "
                              f"{p.channel_dim} of {list(dims)})")
        raw = load(p.scale_buffer_idx, "scales")
        if len(raw) < 4 * n:
            raise FormatError(f"{where}: scale constant holds {len(raw)} bytes, {n} float32 "
                              f"scales need {4 * n}")
        scale = np.frombuffer(raw, np.float32, count=n).copy()
    else:
        if len(p.scale) != n:
            raise FormatError(f"{where}: {len(p.scale)} inline scales for {n} channels (dim "
                              f"{p.channel_dim} of {list(dims)})")
        scale = np.asarray(p.scale, np.float32)
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise FormatError(f"{where}: per-channel scales must be positive numbers")
    zp = 8 if t.datatype == D.xnn_datatype_qcint4 else 0
    return QParams(t.datatype, scale, zp, channel_dim=p.channel_dim)


def _per_group(p: x.PerChannelGroupQuant, dims: tuple[int, ...], load: ConstantLoader,
               where: str) -> QParams:
    if len(dims) != 2 or p.channel_dim != 0:
        raise FormatError(f"{where}: blockwise int4 weights must be 2-D [out, in] with "
                          f"channel_dim 0, got dims {list(dims)}, channel_dim {p.channel_dim}")
    o, k = dims
    if p.group_size <= 0 or k % p.group_size or p.group_size % 2:
        raise FormatError(f"{where}: group_size {p.group_size} does not divide the {k} input "
                          "channels into whole even-sized groups")
    n = o * (k // p.group_size)
    if p.scale_buffer_idx:
        if p.num_scales != n:
            raise FormatError(f"{where}: num_scales {p.num_scales} != {o} x {k // p.group_size}"
                              f" groups")
        raw = load(p.scale_buffer_idx, "scales")
        if len(raw) < 2 * n:
            raise FormatError(f"{where}: scale constant holds {len(raw)} bytes, {n} bf16 "
                              f"scales need {2 * n}")
        scale = Q.bf16_to_f32(np.frombuffer(raw, np.uint16, count=n))
    else:
        if len(p.scale) != n:
            raise FormatError(f"{where}: {len(p.scale)} inline scales for {n} groups")
        # ExecuTorch rounds inline float32 scales to bf16 before handing them to XNNPACK
        scale = Q.bf16_to_f32((np.asarray(p.scale, np.float32).view(np.uint32) >> 16
                               ).astype(np.uint16))
    return QParams(D.xnn_datatype_qbint4, scale.reshape(o, k // p.group_size), 8,
                   group_size=p.group_size)


def _constant(raw: Any, datatype: x.XNNDatatype, dims: tuple[int, ...], dtype: np.dtype,
              where: str) -> np.ndarray:
    if datatype in (D.xnn_datatype_qbint4, D.xnn_datatype_qcint4):
        if len(dims) != 2:
            raise InvalidProgramError(f"{where}: int4 weights must be 2-D, got {list(dims)}",
                                      code=ErrorCode.NotSupported)
        rows, cols = dims
        need = rows * ((cols + 1) // 2)
        if len(raw) < need:
            raise FormatError(f"{where}: int4 constant holds {len(raw)} bytes, dims "
                              f"{list(dims)} need {need}")
        packed = np.frombuffer(raw, np.uint8, count=need)
        if datatype == D.xnn_datatype_qbint4:  # cols is even (checked with the groups)
            return packed.reshape(rows, cols // 2)
        return Q.unpack_int4(packed, rows, cols)
    count = math.prod(dims)
    if len(raw) < count * dtype.itemsize:
        raise FormatError(f"{where}: constant holds {len(raw)} bytes, its dims {list(dims)} "
                          f"need {count * dtype.itemsize}")
    return np.frombuffer(raw, dtype, count=count).reshape(dims)
