"""Concrete sizes for dynamic tensors before memory planning (ExecuTorch's
``exir.passes.sym_shape_eval_pass``), chosen with ``ExecutorchBackendConfig(
sym_shape_eval_pass=...)``.

A tensor whose size is symbolic is planned at a concrete size, its bound:

- ``ConstraintBasedSymShapeEvalPass`` (the default, as in ExecuTorch): the largest value the
  export constraints allow (``torch.export.Dim(max=...)``); a size they leave unbounded takes
  the example's value (ExecuTorch's fallback), and a data-dependent one without a bound is an
  error.
- ``HintBasedSymShapeEvalPass`` (deprecated in ExecuTorch): the size of the example input the
  program was exported with, so larger inputs are refused at run time.

Both are graph-module passes over ``node.meta["spec"]`` (set by the tensor-spec step); they
read each node's fake value and write ``spec.shape``.
"""

from __future__ import annotations

import warnings

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ...errors import ExportError
from ..tensor import TensorSpec
from .spec_prop import upper_bound


def _pairs(gm: torch.fx.GraphModule):  # (spec, fake value) of every tensor node, nested too
    for sub in gm.modules():
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        for node in sub.graph.nodes:
            spec, val = node.meta.get("spec"), node.meta.get("val")
            specs = spec if isinstance(spec, (list, tuple)) else [spec]
            vals = val if isinstance(val, (list, tuple)) else [val]
            for s, v in zip(specs, vals):
                if isinstance(s, TensorSpec) and isinstance(v, torch.Tensor) and s.alias_of is None:
                    yield s, v


def _symbolic(size: int | torch.SymInt) -> bool:
    return not isinstance(size, int) and bool(size.node.expr.free_symbols)


class ConstraintBasedSymShapeEvalPass(PassBase):
    """Plan each dynamic size at its upper bound from the export constraints."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = False
        for spec, val in _pairs(graph_module):
            if not any(_symbolic(s) for s in val.shape):
                continue
            try:
                shape = tuple(upper_bound(s) for s in val.shape)
            except ValueError as e:
                raise ExportError(
                    f"cannot bound the shape {list(val.shape)} of a dynamic tensor ({e}); it "
                    "comes from a data-dependent op (e.g. nonzero) or an input without a "
                    "maximum: give torch.export.Dim a max=..., or use torch._check") from e
            changed |= shape != tuple(spec.shape)
            spec.shape = shape
        return PassResult(graph_module, changed)


class HintBasedSymShapeEvalPass(PassBase):
    """Plan each dynamic size at its example value (the hint). Deprecated in ExecuTorch:
    inputs larger than the example no longer fit."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        warnings.warn("HintBasedSymShapeEvalPass is deprecated (as in ExecuTorch); use "
                      "ConstraintBasedSymShapeEvalPass", DeprecationWarning, stacklevel=2)
        changed = False
        for spec, val in _pairs(graph_module):
            if not any(_symbolic(s) for s in val.shape):
                continue
            shape = tuple(self._hint(s) for s in val.shape)
            changed |= shape != tuple(spec.shape)
            spec.shape = shape
        return PassResult(graph_module, changed)

    @staticmethod
    def _hint(size: int | torch.SymInt) -> int:
        if isinstance(size, int):
            return size
        hint = size.node.hint  # the example's value; None for data-dependent sizes
        return int(hint) if hint is not None else upper_bound(size)
