"""ExecuTorch's ``exir.tracer`` names that tools still import: the decomposition table
``to_edge`` starts from."""

from __future__ import annotations

from .edge import _default_table


def _default_decomposition_table(_use_old_decomp_table: bool = False) -> dict:
    """torch's default (core ATen) decompositions, as ``to_edge`` uses them before removing
    the operators a partitioner or ``preserve_ops`` keeps; a fresh dict each call."""
    if _use_old_decomp_table:
        raise NotImplementedError("the pre-2.0 decomposition table is not available; use the "
                                  "default table")
    return _default_table()
