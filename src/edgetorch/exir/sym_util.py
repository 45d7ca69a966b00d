"""Concrete values of symbolic sizes: the trace's hint, or the upper bound the export's
constraints give (ExecuTorch's ``exir/sym_util.py``)."""

from __future__ import annotations

from collections.abc import Iterable

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import bound_sympy


def eval_expr(size: int | torch.SymInt) -> int | None:
    """The size at the example the program was traced with; None for a data-dependent size."""
    if isinstance(size, int):
        return size
    env, expr = size.node.shape_env, size.node.expr
    try:
        hint = (env.guarding_hint_or_throw(expr) if hasattr(env, "guarding_hint_or_throw")
                else env.size_hint(expr))
    except GuardOnDataDependentSymNode:
        return None
    return int(hint)


def eval_upper_bound(size: int | torch.SymInt) -> int:
    """The largest value ``size`` may take; an unbounded size gives its traced value."""
    if isinstance(size, int):
        return size
    upper = bound_sympy(size.node.expr, size.node.shape_env.var_to_range).upper
    if isinstance(upper, sympy.Integer):
        return int(upper)
    if upper is int_oo:
        hint = eval_expr(size)
        if hint is not None:
            return hint
        raise RuntimeError(f"Cannot evaluate a finite upper bound for symbolic expression "
                           f"{size.node.expr} (int_oo) and no trace hint is available.")
    raise RuntimeError(f"Expect upper bound to be sympy.Integer or int_oo. but got {upper}")


def eval_shape(shape: Iterable[int | torch.SymInt]) -> list[int | None]:
    return [eval_expr(s) for s in shape]


def eval_shape_upper_bound(shape: Iterable[int | torch.SymInt]) -> list[int]:
    return [eval_upper_bound(s) for s in shape]
