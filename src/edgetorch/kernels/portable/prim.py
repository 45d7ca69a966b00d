"""ExecuTorch's prim ops: ``et_view`` and the arithmetic on symbolic sizes.

Names and argument order follow ``kernels/prim_ops/register_prim_ops.cpp``. The ``*.Scalar``
ops take and return Python scalars with Python's semantics (they stand for the Python
operators ``torch.export`` recorded: ``//`` and ``%`` floor); the ``*.int`` variants, which
exist only in the C++ runtime, keep C's truncating semantics. Float division by zero gives
IEEE results (inf/nan) as the C++ runtime does, instead of raising.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import kernel
from ._util import invalid


def _num(x, op):
    if not isinstance(x, (bool, int, float, np.generic)):
        raise invalid(f"executorch_prim::{op}: expected a scalar, got {type(x).__name__}")
    return x.item() if isinstance(x, np.generic) else x


# ---- tensors -----------------------------------------------------------------------------


@kernel("executorch_prim::et_view.default")
def et_view(self, size):
    """A zero-copy reshape of ``self`` (size may hold one -1), sharing its memory."""
    size = list(size)
    if size.count(-1) > 1:
        raise invalid(f"et_view: at most one dim of {size} may be -1")
    if -1 in size and 0 in size:
        raise invalid(f"et_view: cannot infer the -1 in {size} when another dim is 0")
    try:
        r = self.reshape(size)
    except ValueError:
        raise invalid(f"et_view: shape {size} is invalid for input of shape "
                      f"{list(self.shape)}") from None
    if self.size and not np.may_share_memory(r, self):
        raise invalid(f"et_view: input of shape {list(self.shape)} with strides "
                      f"{list(self.strides)} cannot be viewed as {size} without a copy")
    return r


@kernel("executorch_prim::et_copy_index.tensor")
def et_copy_index(copy_to, copy_from, index):
    """Write ``copy_from`` into row ``index`` of ``copy_to`` (loops over ``map``), which grows
    to ``index + 1`` rows. ExecuTorch emits this call without a return slot; the kernel writes
    in place and returns the grown view of ``copy_to`` (its first ``index + 1`` rows)."""
    if index < 0:
        raise invalid(f"et_copy_index: index must be non-negative, got {index}")
    if copy_to.ndim != copy_from.ndim + 1 or copy_to.shape[1:] != copy_from.shape:
        raise invalid(f"et_copy_index: copy_to {list(copy_to.shape)} must be copy_from "
                      f"{list(copy_from.shape)} with one leading dim")
    if index >= copy_to.shape[0]:
        raise invalid(f"et_copy_index: index {index} is beyond the {copy_to.shape[0]} rows "
                      "copy_to has room for")
    copy_to[index] = copy_from
    return copy_to[: index + 1]


@kernel("aten::sym_size.int")
def sym_size_int(self, dim):
    if not -self.ndim <= dim < max(self.ndim, 1) or self.ndim == 0:
        raise invalid(f"sym_size: dim {dim} is out of range for a tensor of rank {self.ndim}")
    return int(self.shape[dim])


@kernel("aten::sym_numel")
def sym_numel(self):
    return int(self.size)


@kernel("aten::_local_scalar_dense")
def local_scalar_dense(self):
    if self.size < 1:
        raise invalid("_local_scalar_dense: expected a tensor with at least 1 element")
    return self.reshape(-1)[0].item()


# ---- arithmetic --------------------------------------------------------------------------


@kernel("executorch_prim::add.Scalar")
def add_scalar(a, b):
    return _num(a, "add") + _num(b, "add")


@kernel("executorch_prim::sub.Scalar")
def sub_scalar(a, b):
    return _num(a, "sub") - _num(b, "sub")


@kernel("executorch_prim::mul.Scalar")
def mul_scalar(a, b):
    return _num(a, "mul") * _num(b, "mul")


def _float_div_by_zero(a: float) -> float:
    return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)


@kernel("executorch_prim::floordiv.Scalar")
def floordiv_scalar(a, b):
    a, b = _num(a, "floordiv"), _num(b, "floordiv")
    if b == 0:
        if isinstance(a, float) or isinstance(b, float):
            return math.copysign(math.inf, a)
        raise invalid("executorch_prim::floordiv: integer division by zero")
    return a // b


@kernel("executorch_prim::truediv.Scalar")
def truediv_scalar(a, b):
    a, b = _num(a, "truediv"), _num(b, "truediv")
    if b == 0:
        return _float_div_by_zero(float(a)) * (math.copysign(1.0, float(b)))
    return a / b


@kernel("executorch_prim::mod.Scalar")
def mod_scalar(a, b):
    a, b = _num(a, "mod"), _num(b, "mod")
    if b == 0:
        raise invalid("executorch_prim::mod: modulo by zero")
    return a % b


@kernel("executorch_prim::floordiv.int")
def floordiv_int(a, b):
    a, b = int(_num(a, "floordiv")), int(_num(b, "floordiv"))
    if b == 0:
        raise invalid("executorch_prim::floordiv.int: division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q  # C: truncates toward zero


@kernel("executorch_prim::mod.int")
def mod_int(a, b):
    a, b = int(_num(a, "mod")), int(_num(b, "mod"))
    if b == 0:
        raise invalid("executorch_prim::mod.int: modulo by zero")
    return a - b * floordiv_int(a, b)  # C: the sign of the dividend


@kernel("executorch_prim::neg.Scalar")
def neg_scalar(a):
    return -_num(a, "neg")


@kernel("executorch_prim::sym_float.Scalar")
def sym_float_scalar(a):
    return float(_num(a, "sym_float"))


@kernel("executorch_prim::sym_int.Scalar")
def sym_int_scalar(a):
    return int(_num(a, "sym_int"))  # truncates toward zero, like static_cast<int64_t>


@kernel("executorch_prim::ceil.Scalar")
def ceil_scalar(a):
    return int(math.ceil(_num(a, "ceil")))


@kernel("executorch_prim::round.Scalar")
def round_scalar(a):
    return int(round(_num(a, "round")))  # half to even, like Python's round


@kernel("executorch_prim::trunc.Scalar")
def trunc_scalar(a):
    return int(math.trunc(_num(a, "trunc")))


@kernel("executorch_prim::sym_max.Scalar")
def sym_max_scalar(a, b):
    return max(_num(a, "sym_max"), _num(b, "sym_max"))


@kernel("executorch_prim::sym_min.Scalar")
def sym_min_scalar(a, b):
    return min(_num(a, "sym_min"), _num(b, "sym_min"))


# ---- comparisons and logic ---------------------------------------------------------------


@kernel("executorch_prim::eq.Scalar")
def eq_scalar(a, b):
    return bool(_num(a, "eq") == _num(b, "eq"))


@kernel("executorch_prim::gt.Scalar")
def gt_scalar(a, b):
    return bool(_num(a, "gt") > _num(b, "gt"))


@kernel("executorch_prim::lt.Scalar")
def lt_scalar(a, b):
    return bool(_num(a, "lt") < _num(b, "lt"))


@kernel("executorch_prim::ge.Scalar")
def ge_scalar(a, b):
    return bool(_num(a, "ge") >= _num(b, "ge"))


@kernel("executorch_prim::le.Scalar")
def le_scalar(a, b):
    return bool(_num(a, "le") <= _num(b, "le"))


@kernel("executorch_prim::sym_not.Scalar")
def sym_not_scalar(a):
    return not _num(a, "sym_not")


@kernel("executorch_prim::sym_ite.Scalar")
def sym_ite_scalar(b, t, f):
    return _num(t, "sym_ite") if _num(b, "sym_ite") else _num(f, "sym_ite")
