"""ExecuTorch's ScalarType (``schema/scalar_type.fbs``) and its mapping to NumPy dtypes."""

from __future__ import annotations

from enum import IntEnum
from types import ModuleType

import numpy as np

_ml: ModuleType | None
try:  # bfloat16 and float8 come from ml_dtypes when it is installed (optional extra).
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - exercised in the minimal runtime environment
    _ml = None


class ScalarType(IntEnum):
    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    # scalar_type.fbs comments the complex types out, yet ExecuTorch's emitter writes them
    # (exir/scalar_type.py names them so) for rfft's result, and its runtime runs them.
    COMPLEX32 = 8
    COMPLEX64 = 9
    COMPLEX128 = 10
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    QUINT4X2 = 16
    QUINT2X4 = 17
    BITS16 = 22
    FLOAT8E5M2 = 23
    FLOAT8E4M3FN = 24
    FLOAT8E5M2FNUZ = 25
    FLOAT8E4M3FNUZ = 26
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


_TO_NUMPY: dict[ScalarType, np.dtype] = {
    ScalarType.BYTE: np.dtype(np.uint8),
    ScalarType.CHAR: np.dtype(np.int8),
    ScalarType.SHORT: np.dtype(np.int16),
    ScalarType.INT: np.dtype(np.int32),
    ScalarType.LONG: np.dtype(np.int64),
    ScalarType.HALF: np.dtype(np.float16),
    ScalarType.FLOAT: np.dtype(np.float32),
    ScalarType.DOUBLE: np.dtype(np.float64),
    ScalarType.COMPLEX64: np.dtype(np.complex64),
    ScalarType.COMPLEX128: np.dtype(np.complex128),
    ScalarType.BOOL: np.dtype(np.bool_),
    ScalarType.QINT8: np.dtype(np.int8),
    ScalarType.QUINT8: np.dtype(np.uint8),
    ScalarType.QINT32: np.dtype(np.int32),
    ScalarType.BITS16: np.dtype(np.uint16),
    ScalarType.UINT16: np.dtype(np.uint16),
    ScalarType.UINT32: np.dtype(np.uint32),
    ScalarType.UINT64: np.dtype(np.uint64),
}
if _ml is not None:
    _TO_NUMPY[ScalarType.BFLOAT16] = np.dtype(_ml.bfloat16)
    _TO_NUMPY[ScalarType.FLOAT8E5M2] = np.dtype(_ml.float8_e5m2)
    _TO_NUMPY[ScalarType.FLOAT8E4M3FN] = np.dtype(_ml.float8_e4m3fn)
    _TO_NUMPY[ScalarType.FLOAT8E5M2FNUZ] = np.dtype(_ml.float8_e5m2fnuz)
    _TO_NUMPY[ScalarType.FLOAT8E4M3FNUZ] = np.dtype(_ml.float8_e4m3fnuz)

# Reverse map: the first (canonical) ScalarType for each NumPy dtype.
_FROM_NUMPY: dict[np.dtype, ScalarType] = {}
for _st in (
    ScalarType.BYTE, ScalarType.CHAR, ScalarType.SHORT, ScalarType.INT, ScalarType.LONG,
    ScalarType.HALF, ScalarType.FLOAT, ScalarType.DOUBLE, ScalarType.BOOL, ScalarType.BFLOAT16,
    ScalarType.COMPLEX64, ScalarType.COMPLEX128,
    ScalarType.UINT16, ScalarType.UINT32, ScalarType.UINT64, ScalarType.FLOAT8E5M2,
    ScalarType.FLOAT8E4M3FN, ScalarType.FLOAT8E5M2FNUZ, ScalarType.FLOAT8E4M3FNUZ,
):
    if _st in _TO_NUMPY:
        _FROM_NUMPY.setdefault(_TO_NUMPY[_st], _st)

# Element sizes, known even when the NumPy dtype is not available (bfloat16 without ml_dtypes).
ELEMENT_SIZE: dict[ScalarType, int] = {
    ScalarType.BYTE: 1, ScalarType.CHAR: 1, ScalarType.SHORT: 2, ScalarType.INT: 4,
    ScalarType.LONG: 8, ScalarType.HALF: 2, ScalarType.FLOAT: 4, ScalarType.DOUBLE: 8,
    ScalarType.COMPLEX32: 4, ScalarType.COMPLEX64: 8, ScalarType.COMPLEX128: 16,
    ScalarType.BOOL: 1, ScalarType.QINT8: 1, ScalarType.QUINT8: 1, ScalarType.QINT32: 4,
    ScalarType.BFLOAT16: 2, ScalarType.QUINT4X2: 1, ScalarType.QUINT2X4: 1, ScalarType.BITS16: 2,
    ScalarType.FLOAT8E5M2: 1, ScalarType.FLOAT8E4M3FN: 1, ScalarType.FLOAT8E5M2FNUZ: 1,
    ScalarType.FLOAT8E4M3FNUZ: 1, ScalarType.UINT16: 2, ScalarType.UINT32: 4, ScalarType.UINT64: 8,
}


def to_numpy_dtype(st: int) -> np.dtype:
    """NumPy dtype for a ScalarType value; raises KeyError for unknown or unavailable types."""
    return _TO_NUMPY[ScalarType(st)]


def numpy_dtypes() -> dict[int, np.dtype]:
    """ScalarType value -> NumPy dtype, for every type this runtime has (a plain dict)."""
    return {int(k): v for k, v in _TO_NUMPY.items()}


def from_numpy_dtype(dtype: np.dtype) -> ScalarType:
    return _FROM_NUMPY[np.dtype(dtype)]


def is_known(st: int) -> bool:
    try:
        return ScalarType(st) in _TO_NUMPY
    except ValueError:
        return False
