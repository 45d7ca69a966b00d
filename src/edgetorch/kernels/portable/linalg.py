"""Matrix products (mm, bmm, addmm, linear: BLAS through np.matmul; float32 addmm and linear
as one compiled GEMM with the bias, ``compiled_fc``, with the ``accel`` extra) and pairwise
distances."""

from __future__ import annotations

import math

import numpy as np

from .. import blas_accel
from ..registry import kernel
from ._util import cast, finish, into, invalid, is_float, opmath, result_type, scalar

_F32 = np.dtype(np.float32)


def _mat_operands(*xs):
    ct = opmath(result_type(*xs))
    return ct, [None if x is None else cast(x, ct) for x in xs]


@kernel("aten::mm.out")
def mm_out(self, mat2, out):
    if self.ndim != 2 or mat2.ndim != 2:
        raise invalid(f"mm expects 2-D tensors, got shapes {list(self.shape)} and {list(mat2.shape)}")
    _, (a, b) = _mat_operands(self, mat2)
    return finish(_matmul_into(a, b, out), out)


def _matmul_into(a, b, out):
    """``a @ b``, written by BLAS straight into ``out`` when it has the result's shape and
    dtype (and does not overlap the operands), else into a new array."""
    shape = a.shape[:-1] + b.shape[-1:] if a.ndim == b.ndim == 2 else None
    if shape is None:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + a.shape[-2:-1] + b.shape[-1:]
    o = into(out, shape, np.result_type(a, b))
    if o is not None and (np.may_share_memory(o, a) or np.may_share_memory(o, b)):
        o = None
    return np.matmul(a, b, out=o)


@kernel("aten::bmm.out")
def bmm_out(self, mat2, out):
    if self.ndim != 3 or mat2.ndim != 3 or self.shape[0] != mat2.shape[0]:
        raise invalid(
            f"bmm expects 3-D tensors with equal batch sizes, got {list(self.shape)} and "
            f"{list(mat2.shape)}"
        )
    _, (a, b) = _mat_operands(self, mat2)
    return finish(_matmul_into(a, b, out), out)


@kernel("aten::addmm.out")
def addmm_out(self, mat1, mat2, beta, alpha, out):
    if beta == 1 and alpha == 1 and \
            compiled_fc(mat1, mat2, self, out, fc_layout(mat1, mat2, self, out)):
        return out
    ct, (c, a, b) = _mat_operands(self, mat1, mat2)
    with np.errstate(all="ignore"):
        # out may be self (in place): then the product cannot be written there first
        safe = a.ndim == b.ndim == 2 and not (isinstance(c, np.ndarray)
                                               and np.may_share_memory(out, c))
        r = _matmul_into(a, b, out if safe else None)
        if alpha != 1:
            r *= scalar(alpha, ct)
        if beta != 0:  # beta == 0: self is ignored, its nan/inf do not propagate
            if r.shape == np.broadcast_shapes(r.shape, c.shape):
                r += c if beta == 1 else c * scalar(beta, ct)
            else:
                r = r + (c if beta == 1 else c * scalar(beta, ct))
    return finish(r, out)


@kernel("aten::linear.out")
def linear_out(input, weight, bias, out):  # noqa: A002
    if type(weight) is np.ndarray and weight.ndim == 2 and \
            compiled_fc(input, weight.T, bias, out, fc_layout(input, weight.T, bias, out)):
        return out
    ct, (x, w, b) = _mat_operands(input, weight, bias)
    r = _matmul_into(x, w.T, out)  # BLAS reads the transposed weight in place, no copy
    if b is not None:
        if r.shape == np.broadcast_shapes(r.shape, b.shape):
            r += b
        else:
            r = r + b
    return finish(r, out)


def fc_layout(x, w, bias, out) -> tuple[bool, int] | None:
    """The weights' layout (``blas_accel.weights_layout``) when ``out = x @ w + bias`` can be
    one compiled BLAS call: float32 throughout, ``x`` [..., K] and ``out`` [..., N]
    C-contiguous and apart, ``w`` [K, N] C- or Fortran-contiguous (a transposed weight is
    read in place), ``bias`` None or N contiguous values; None otherwise. NumPy only (the
    preparers ask at load; :func:`compiled_fc` asks ``blas_accel.ready`` at run)."""
    if not (type(x) is np.ndarray and type(w) is np.ndarray and type(out) is np.ndarray):
        return None
    if x.dtype != _F32 or out.dtype != _F32 or x.ndim < 1 or w.ndim != 2:
        return None
    if bias is not None and (type(bias) is not np.ndarray or bias.ndim != 1):
        return None
    if out.shape != x.shape[:-1] + w.shape[1:] or x.shape[-1] != w.shape[0]:
        return None
    if not (x.flags.c_contiguous and out.flags.c_contiguous) or \
            np.may_share_memory(out, x) or np.may_share_memory(out, w) or \
            (bias is not None and np.may_share_memory(out, bias)):
        return None
    return blas_accel.weights_layout(w, bias)


def compiled_fc(x, w, bias, out, layout) -> bool:
    """``out = x @ w + bias`` as one compiled call (numba and NumPy's OpenBLAS, the
    ``accel`` extra): the bias is the GEMM's C matrix (``beta = 1``), so the sum is rounded
    once, not twice as by ``np.matmul`` then ``+=``; a small layer's two NumPy calls cost
    4 us, this one 2.3 us. False, having done nothing, when ``layout`` is None or the
    compiled call is unavailable; the kernel and its preparer both come here first, so
    they give the same bits."""
    if layout is None or not blas_accel.ready():
        return False
    return blas_accel.run(x, w, blas_accel.NO_BIAS if bias is None else bias, out, False,
                          layout)


# ---- distances -------------------------------------------------------------------------


def _p_norm(diff: np.ndarray, p: float) -> np.ndarray:
    """The p-norm over the last axis of the differences, with torch's special cases."""
    a = np.abs(diff)
    if p == 0:
        return np.count_nonzero(a, axis=-1).astype(diff.dtype)
    if p == 1:
        return a.sum(axis=-1)
    if p == 2:
        return np.sqrt((a * a).sum(axis=-1))
    if math.isinf(p):
        return a.max(axis=-1, initial=0)
    return (a ** p).sum(axis=-1) ** (1 / p)


@kernel("aten::_cdist_forward.out")
def cdist_forward_out(x1, x2, p, compute_mode, out):
    """Pairwise p-distances of the rows of ``x1`` (..., P, M) and ``x2`` (..., R, M).

    For p = 2 torch switches to the matrix-product form (|a|^2 + |b|^2 - 2ab, through BLAS)
    when P or R exceeds 25 (compute_mode None/0) or always (1); so do we.
    """
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise invalid(f"cdist: x1 {list(x1.shape)} and x2 {list(x2.shape)} must be (..., P, M) "
                      "and (..., R, M)")
    if p < 0:
        raise invalid(f"cdist: p must be non-negative, got {p}")
    if not (is_float(x1.dtype) and is_float(x2.dtype)):
        raise invalid(f"cdist only supports floating point tensors, got {x1.dtype}")
    ct = opmath(result_type(x1, x2))
    a, b = x1.astype(ct, copy=False), x2.astype(ct, copy=False)
    P, R = a.shape[-2], b.shape[-2]
    use_mm = p == 2 and (compute_mode == 1 or (not compute_mode and (P > 25 or R > 25)))
    with np.errstate(all="ignore"):
        if use_mm:
            aa = (a * a).sum(axis=-1)[..., :, None]
            bb = (b * b).sum(axis=-1)[..., None, :]
            r = np.sqrt(np.maximum(aa + bb - 2 * np.matmul(a, np.swapaxes(b, -1, -2)), 0))
        else:
            r = _p_norm(a[..., :, None, :] - b[..., None, :, :], p)
    return finish(r, out)


@kernel("aten::_pdist_forward.out")
def pdist_forward_out(self, p, out):
    """p-distances between the rows of ``self`` (N, M), pairs i < j in row-major order."""
    if self.ndim != 2:
        raise invalid(f"pdist expects a 2-D input, got shape {list(self.shape)}")
    if p < 0:
        raise invalid(f"pdist: p must be non-negative, got {p}")
    x = self.astype(opmath(self.dtype), copy=False)
    i, j = np.triu_indices(x.shape[0], k=1)
    with np.errstate(all="ignore"):
        return finish(_p_norm(x[i] - x[j], p), out)
