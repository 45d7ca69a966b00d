"""Real-to-complex and complex-to-real FFTs: ``aten::_fft_r2c.out`` and ``aten::_fft_c2r.out``.

ExecuTorch registers these from its optimized library (pocketfft); ``torch.fft.rfft*`` and
``irfft*`` export to them. Semantics are torch's: ``dim`` lists the transformed dimensions,
``normalization`` is torch's ``fft_norm_mode`` (0: none, 1: 1/sqrt(n), 2: 1/n, with n the
product of the signal sizes), the one-sided last dimension is ``dim[-1]``. float32 and float64
only, as ExecuTorch (``ET_SWITCH_FLOAT_TYPES``) and torch's CPU kernels; the complex tensor is
complex64 / complex128 to match. ``onesided=False`` (torch's ``fft.fft`` of a real input) is
computed here, where ExecuTorch's kernel refuses it.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import invalid

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}
_REAL_OF = {c: r for r, c in _COMPLEX_OF.items()}

# NumPy puts a transform's scaling on one side by name; torch's mode number is the scaling of
# *this* call, so the name depends on the direction.
_FORWARD_NORM = {0: "backward", 1: "ortho", 2: "forward"}
_INVERSE_NORM = {0: "forward", 1: "ortho", 2: "backward"}


def _axes(op: str, dim, ndim: int) -> list[int]:
    dims = [int(d) for d in dim]
    if not dims:
        raise invalid(f"{op}: dim must name at least one dimension")
    for d in dims:
        if not 0 <= d < ndim:  # torch canonicalises dims before it calls these ops
            raise invalid(f"{op}: dim {d} is out of range for a tensor of rank {ndim}; "
                          "dims must be non-negative and in bounds")
    if len(set(dims)) != len(dims):
        raise invalid(f"{op}: dim {dims} repeats a dimension")
    return dims


def _norm(op: str, normalization: int, table: dict[int, str]) -> str:
    if normalization not in table:
        raise invalid(f"{op}: normalization must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n), "
                      f"got {normalization}")
    return table[normalization]


@kernel("aten::_fft_r2c.out")
def fft_r2c_out(self, dim, normalization, onesided, out):
    """The FFT of a real tensor over ``dim``; one-sided: ``dim[-1]`` keeps ``n // 2 + 1``."""
    op = "_fft_r2c"
    if self.dtype not in _COMPLEX_OF:
        raise invalid(f"{op}: input must be float32 or float64, got {self.dtype}")
    if out.dtype != _COMPLEX_OF[self.dtype]:
        raise invalid(f"{op}: out must be {_COMPLEX_OF[self.dtype]} for a {self.dtype} input, "
                      f"got {out.dtype}")
    axes = _axes(op, dim, self.ndim)
    norm = _norm(op, normalization, _FORWARD_NORM)
    if any(self.shape[d] == 0 for d in axes):
        raise invalid(f"{op}: cannot transform an empty dimension (sizes {list(self.shape)})")
    if onesided:
        res = np.fft.rfftn(self, axes=axes, norm=norm)
    else:
        res = np.fft.fftn(self, axes=axes, norm=norm)
    return res.astype(out.dtype, copy=False)


@kernel("aten::_fft_c2r.out")
def fft_c2r_out(self, dim, normalization, last_dim_size, out):
    """The inverse of a one-sided FFT: ``dim[-1]`` of the result has ``last_dim_size``
    elements (the input holds ``last_dim_size // 2 + 1`` of them; the rest is implied by
    Hermitian symmetry, and imaginary parts that symmetry forbids are ignored, as torch's)."""
    op = "_fft_c2r"
    if self.dtype not in _REAL_OF:
        raise invalid(f"{op}: input must be complex64 or complex128, got {self.dtype}")
    if out.dtype != _REAL_OF[self.dtype]:
        raise invalid(f"{op}: out must be {_REAL_OF[self.dtype]} for a {self.dtype} input, "
                      f"got {out.dtype}")
    axes = _axes(op, dim, self.ndim)
    norm = _norm(op, normalization, _INVERSE_NORM)
    last_dim_size = int(last_dim_size)
    if last_dim_size < 1:
        raise invalid(f"{op}: last_dim_size must be at least 1, got {last_dim_size}")
    if any(self.shape[d] == 0 for d in axes):
        raise invalid(f"{op}: cannot transform an empty dimension (sizes {list(self.shape)})")
    if self.shape[axes[-1]] != last_dim_size // 2 + 1:
        raise invalid(f"{op}: dimension {axes[-1]} holds {self.shape[axes[-1]]} elements; a "
                      f"one-sided input for last_dim_size {last_dim_size} has "
                      f"{last_dim_size // 2 + 1} (torch requires the same)")
    sizes = [self.shape[d] for d in axes[:-1]] + [last_dim_size]
    res = np.fft.irfftn(self, s=sizes, axes=axes, norm=norm)
    return res.astype(out.dtype, copy=False)
