"""Padding: constant (any rank, negative pads crop), reflection and replication (1-3 dims)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import check_result_fits, finish, invalid, scalar


@kernel("aten::constant_pad_nd.out")
def constant_pad_nd_out(self, pad, value, out):
    if len(pad) % 2 or len(pad) // 2 > self.ndim:
        raise invalid(f"constant_pad_nd: padding {list(pad)} does not fit a tensor of rank "
                      f"{self.ndim}")
    shape = list(self.shape)
    src = [slice(None)] * self.ndim
    dst = [slice(None)] * self.ndim
    for j in range(len(pad) // 2):
        ax = self.ndim - 1 - j
        lo, hi = pad[2 * j], pad[2 * j + 1]
        n = shape[ax]
        new = n + lo + hi
        if new < 0:
            raise invalid(f"constant_pad_nd: padding {list(pad)} makes dim {ax} negative")
        shape[ax] = new
        # the part of the input that survives negative padding, and where it lands
        s0, s1 = max(-lo, 0), n - max(-hi, 0)
        d0 = max(lo, 0)
        src[ax] = slice(s0, max(s0, s1))
        dst[ax] = slice(d0, d0 + max(0, s1 - s0))
    check_result_fits(shape, out, "constant_pad_nd")
    r = np.full(shape, scalar(value, self.dtype))
    r[tuple(dst)] = self[tuple(src)]
    return finish(r, out)


def _np_pad(x, pad, nd, mode, op):
    if len(pad) != 2 * nd or x.ndim not in (nd + 1, nd + 2):
        raise invalid(f"{op}: padding {list(pad)} does not fit input shape {list(x.shape)}")
    widths = [(0, 0)] * (x.ndim - nd) + [(pad[2 * j], pad[2 * j + 1]) for j in
                                         reversed(range(nd))]
    if mode == "reflect":
        for (lo, hi), n in zip(widths, x.shape):
            if lo >= n or hi >= n:
                if lo or hi:
                    raise invalid(f"{op}: padding {list(pad)} must be smaller than the input "
                                  f"dims {list(x.shape)}")
    return np.pad(x, widths, mode=mode)


def _pad_kernel(name, nd, mode):
    def k(self, padding, out):
        return finish(_np_pad(self, padding, nd, mode, name), out)

    k.__name__ = k.__qualname__ = name.split("::")[1].split(".")[0]
    kernel(name)(k)


_pad_kernel("aten::reflection_pad1d.out", 1, "reflect")
_pad_kernel("aten::reflection_pad2d.out", 2, "reflect")
_pad_kernel("aten::replication_pad1d.out", 1, "edge")
_pad_kernel("aten::replication_pad2d.out", 2, "edge")
_pad_kernel("aten::reflection_pad3d.out", 3, "reflect")
_pad_kernel("aten::replication_pad3d.out", 3, "edge")
