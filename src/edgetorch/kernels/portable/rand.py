"""Random kernels: rand, randn and native_dropout.

They draw from one NumPy generator seeded by the operating system, so results differ from
torch's (a different generator) and from run to run, as torch's do without a manual seed.
:func:`seed` makes a run reproducible.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import BOOL, finish, float_compute, invalid, is_float

_rng = np.random.default_rng()


def seed(value: int) -> None:
    """Reseed the generator the random kernels draw from."""
    global _rng
    _rng = np.random.default_rng(value)


def _check_float(out: np.ndarray, op: str) -> None:
    if not is_float(out.dtype):
        raise invalid(f"{op}: out must have a floating dtype, got {out.dtype}")


@kernel("aten::rand.out")
def rand_out(size, out):
    """Uniform samples in [0, 1)."""
    _check_float(out, "rand")
    r = _rng.random(tuple(size), dtype=np.float64 if out.dtype == np.float64 else np.float32)
    r = r.astype(out.dtype)
    # rounding to half/bfloat16 may reach 1.0: redraw those as 0 keeps [0, 1) half-open
    return finish(np.where(r.astype(np.float32) >= 1, 0, r), out)


@kernel("aten::randn.out")
def randn_out(size, out):
    """Standard-normal samples."""
    _check_float(out, "randn")
    return finish(_rng.standard_normal(tuple(size)), out)


@kernel("aten::native_dropout.out")
def native_dropout_out(input, p, train, out0, out1):  # noqa: A002
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p); ``out1`` is the
    keep mask. ``train`` False (None counts as True, as in torch) is the identity."""
    if not 0 <= p <= 1:
        raise invalid(f"dropout probability has to be between 0 and 1, got {p}")
    if train is False or input.size == 0:
        return finish(input, out0), finish(np.ones(input.shape, BOOL), out1)
    ct = float_compute(input.dtype)
    keep = _rng.random(input.shape) >= p
    scale = ct.type(0.0 if p == 1 else 1.0 / (1.0 - p))
    y = np.where(keep, input.astype(ct, copy=False) * scale, ct.type(0))
    return finish(y, out0), finish(keep, out1)
