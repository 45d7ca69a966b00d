"""ExecuTorch's dim-order ops (``exir/passes/dim_order_ops_registry.py``).

``dim_order`` describes the memory layout of ``out``; the runtime hands the kernel ``out``
already laid out that way (a strided view), so the kernels only produce the logical values.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import finish, invalid


def _check_dim_order(dim_order, out) -> None:
    if dim_order is not None and sorted(dim_order) != list(range(out.ndim)):
        raise invalid(f"dim_order {list(dim_order)} is not a permutation of the {out.ndim} "
                      "dims of the output")


@kernel("dim_order_ops::_to_dim_order_copy.out")
def to_dim_order_copy_out(self, non_blocking, dim_order, out):
    _check_dim_order(dim_order, out)
    return finish(self, out, convert=True)  # the dtype conversion is the cast into out


@kernel("dim_order_ops::_clone_dim_order.out")
def clone_dim_order_out(self, non_blocking, dim_order, out):
    _check_dim_order(dim_order, out)
    return finish(self, out)


@kernel("dim_order_ops::_empty_dim_order.out")
def empty_dim_order_out(size, dim_order, out):
    _check_dim_order(dim_order, out)
    if tuple(size) == out.shape:
        out[...] = 0  # uninitialised in ExecuTorch; zeros here so that runs are reproducible
        return out
    return np.zeros(tuple(size), out.dtype)
