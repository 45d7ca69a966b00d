"""The NPU's integer arithmetic: scaling with a 32-bit multiplier and a 6-bit shift under each
rounding mode, saturation. NumPy int64 where the product fits, exact Python integers where not.

Rounding modes (the ``round_mode`` field of IFM/OFM_PRECISION):
- ``NATURAL`` (2): ``(x * scale + 2**(shift-1)) >> shift`` -- round half up; this is TOSA's
  single rounding (``RESCALE`` with ``rounding_mode=SINGLE_ROUND``).
- ``DBL``/TFL (0): TFLite's ``MultiplyByQuantizedMultiplier``: a rounding doubling high
  multiply (``(x*scale + nudge) / 2**31``, truncated, nudge +-2**30) then a rounding right shift
  by ``shift - 31`` with ties away from zero; a shift below 31 shifts left first.
- ``TRUNCATE`` (1): ``x * scale / 2**shift`` truncated toward zero.
"""

from __future__ import annotations

import numpy as np

ROUND_DBL, ROUND_TRUNCATE, ROUND_NATURAL = 0, 1, 2
_SAFE = 1 << 62


def _fits(x: np.ndarray, scale: int) -> bool:
    if x.size == 0:
        return True
    peak = max(abs(int(x.max())), abs(int(x.min())))
    return peak * max(abs(int(scale)), 1) < _SAFE


def _as_int64_or_object(x: np.ndarray, scale, headroom: int = 0) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    scale_arr = np.asarray(scale, dtype=np.int64)
    if _fits(x, (int(np.abs(scale_arr).max()) if scale_arr.size else 0) << headroom):
        return x
    return x.astype(object)


def scale_round(x: np.ndarray, scale, shift, mode: int) -> np.ndarray:
    """``x * scale / 2**shift`` rounded by ``mode``; ``scale``/``shift`` broadcast with ``x``
    (per-channel scaling passes arrays over the last axis)."""
    shift_arr = np.asarray(shift, dtype=np.int64)
    # TFL rounding shifts left by 31 - shift first: leave room for it
    headroom = int(max(31 - int(shift_arr.min(initial=31)), 0)) if mode == ROUND_DBL else 0
    xs = _as_int64_or_object(x, scale, headroom)
    obj = xs.dtype == object
    scale = np.asarray(scale, dtype=object if obj else np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if mode == ROUND_DBL:
        return _tfl(xs, scale, shift, obj)
    prod = xs * scale
    if mode == ROUND_TRUNCATE:
        mag = _shr(np.abs(prod) if not obj else np.vectorize(abs, otypes=[object])(prod), shift, obj)
        return _back(np.where(prod < 0, -mag, mag), obj)
    rnd = np.where(shift > 0, _shl(np.ones_like(shift), np.maximum(shift - 1, 0), False), 0)
    if obj:
        rnd = rnd.astype(object)
    return _back(_shr(prod + rnd, shift, obj), obj)


def _shl(x, s, obj):
    if obj:
        return np.vectorize(lambda a, b: int(a) << int(b), otypes=[object])(x, s)
    return np.left_shift(x, s)


def _shr(x, s, obj):
    if obj:
        return np.vectorize(lambda a, b: int(a) >> int(b), otypes=[object])(x, s)
    return np.right_shift(x, s)


def _back(x, obj):
    return x.astype(np.int64) if obj else x


def _tfl(x, scale, shift, obj):
    left = np.maximum(31 - shift, 0)
    right = np.maximum(shift - 31, 0)
    x = _shl(x, left, obj)
    prod = x * scale
    nudge = np.where(prod >= 0, 1 << 30, 1 - (1 << 30))
    if obj:
        nudge = nudge.astype(object)
        high = np.vectorize(lambda a: _trunc_div(int(a), 1 << 31), otypes=[object])(prod + nudge)
        high = high.astype(np.int64)
    else:
        total = prod + nudge
        high = np.where(total >= 0, total >> 31, -((-total) >> 31))
    high = np.clip(high, -(1 << 31), (1 << 31) - 1)
    mask = (np.left_shift(np.int64(1), right)) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + (remainder > threshold)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // b
    return q if a >= 0 else -q


def saturate(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(x, lo, hi)


def int_range(bits: int, signed: bool) -> tuple[int, int]:
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def lut_s16(entries: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A 16-bit lookup table as the NPU evaluates it (U55/U65 and U85 alike): 512 u32 entries,
    each a base value (low half) and the slope to the next entry (high half), both signed 16-bit;
    indexed by the top 9 bits of x + 32768 and interpolated over the low 7 with rounding."""
    entries = entries.astype(np.int64)
    base_v = ((entries & 0xFFFF) ^ 0x8000) - 0x8000
    slope = (((entries >> 16) & 0xFFFF) ^ 0x8000) - 0x8000
    u = np.clip(x, -32768, 32767) + 32768
    idx, frac = u >> 7, u & 0x7F
    return base_v[idx] + ((slope[idx] * frac + 64) >> 7)
