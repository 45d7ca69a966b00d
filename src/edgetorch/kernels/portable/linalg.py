"""Matrix products: mm, bmm, addmm, linear (BLAS through np.matmul)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import cast, finish, invalid, opmath, result_type, scalar


def _mat_operands(*xs):
    ct = opmath(result_type(*xs))
    return ct, [None if x is None else cast(x, ct) for x in xs]


@kernel("aten::mm.out")
def mm_out(self, mat2, out):
    if self.ndim != 2 or mat2.ndim != 2:
        raise invalid(f"mm expects 2-D tensors, got shapes {list(self.shape)} and {list(mat2.shape)}")
    _, (a, b) = _mat_operands(self, mat2)
    return finish(np.matmul(a, b), out)


@kernel("aten::bmm.out")
def bmm_out(self, mat2, out):
    if self.ndim != 3 or mat2.ndim != 3 or self.shape[0] != mat2.shape[0]:
        raise invalid(
            f"bmm expects 3-D tensors with equal batch sizes, got {list(self.shape)} and "
            f"{list(mat2.shape)}"
        )
    _, (a, b) = _mat_operands(self, mat2)
    return finish(np.matmul(a, b), out)


@kernel("aten::addmm.out")
def addmm_out(self, mat1, mat2, beta, alpha, out):
    ct, (c, a, b) = _mat_operands(self, mat1, mat2)
    with np.errstate(all="ignore"):
        r = np.matmul(a, b)
        if alpha != 1:
            r = r * scalar(alpha, ct)
        if beta != 0:  # beta == 0: self is ignored, its nan/inf do not propagate
            r = r + (c if beta == 1 else c * scalar(beta, ct))
    return finish(r, out)


@kernel("aten::linear.out")
def linear_out(input, weight, bias, out):  # noqa: A002
    ct, (x, w, b) = _mat_operands(input, weight, bias)
    r = np.matmul(x, w.T)
    if b is not None:
        r = r + b
    return finish(r, out)
