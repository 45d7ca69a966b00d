"""What a tap keeps of a value: a :class:`StatReducer`.

Each reducer has two forms that compute the same thing: ``emit(graph, src)`` builds it as
Edge operators in a lowered graph (just before the tap it replaces, returning the node whose
value the tap becomes), and ``eager(tensor)`` computes it in torch, so what the runtime will
report can be reproduced ahead of time.

Built in: ``FULL_TENSOR`` (the value itself) and ``STATS``, a 1-D float32 tensor of
:data:`STATS`'s ``fields`` -- whatever the source's rank or dtype, computed in float32 from
operators every runtime has (``std`` is ``sqrt(|E[x^2] - E[x]^2|)``: population variance
without ``aten.var``, the absolute value absorbing round-off below zero; ``p99_abs`` is the
``ceil(numel/100)``-th largest ``|x|``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx as fx

from ...exir.dialects._ops import ops as exir_ops

EmitFn = Callable[[fx.Graph, fx.Node], fx.Node]
EagerFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class StatReducer:
    name: str  # what a user passes, and what each tap records
    fields: tuple[str, ...]  # the entries of the 1-D result; () keeps the whole tensor
    emit: EmitFn
    eager: EagerFn


FULL_TENSOR = StatReducer(name="FULL_TENSOR", fields=(),
                          emit=lambda graph, src: src, eager=lambda t: t.detach())


def _top_rank(numel: int) -> int:
    """Which largest ``|x|`` is the 99th percentile: ``ceil(numel / 100)``, at least 1."""
    return max(1, (numel + 99) // 100)


class _Ops:
    """Edge-operator calls appended to ``graph`` (in its current insertion point)."""

    def __init__(self, graph: fx.Graph) -> None:
        self.graph = graph

    def __call__(self, op, *args, **kwargs) -> fx.Node:
        return self.graph.call_function(op, args=args, kwargs=kwargs)

    def f32(self, x: fx.Node) -> fx.Node:
        return self(exir_ops.edge.aten._to_copy.default, x, dtype=torch.float32)

    def total(self, x: fx.Node) -> fx.Node:  # sum.dim_IntList over no dims: all of it
        return self(exir_ops.edge.aten.sum.dim_IntList, x, [])

    def count(self, mask: fx.Node) -> fx.Node:
        return self.total(self.f32(mask))


def _emit_stats(graph: fx.Graph, src: fx.Node) -> fx.Node:
    aten = exir_ops.edge.aten
    op = _Ops(graph)
    x = op.f32(src)
    ax = op(aten.abs.default, x)
    sq = op(aten.pow.Tensor_Scalar, x, 2.0)
    mean = op(aten.mean.default, x)
    mean_sq = op(aten.mean.default, sq)
    variance = op(aten.abs.default,
                  op(aten.sub.Tensor, mean_sq, op(aten.pow.Tensor_Scalar, mean, 2.0)))
    fake = src.meta.get("val")
    k = _top_rank(int(fake.numel()) if fake is not None else 1)
    top = op(aten.topk.default, op(aten.view_copy.default, ax, [-1]), k,
             dim=-1, largest=True, sorted=True)
    values = {
        "min": op(aten.amin.default, x),
        "max": op(aten.amax.default, x),
        "mean": mean,
        "abs_max": op(aten.amax.default, ax),
        "abs_mean": op(aten.mean.default, ax),
        "std": op(aten.sqrt.default, variance),
        "rms": op(aten.sqrt.default, mean_sq),
        "l1_norm": op.total(ax),
        "l2_norm": op(aten.sqrt.default, op.total(sq)),
        "nan_count": op.count(op(aten.isnan.default, x)),
        "inf_count": op.count(op(aten.isinf.default, x)),
        "zero_count": op.count(op(aten.eq.Scalar, x, 0.0)),
        "p99_abs": op(aten.select_copy.int, op(operator.getitem, top, 0), 0, k - 1),
    }
    return op(aten.stack.default, [values[f] for f in _STATS_FIELDS], dim=0)


def _eager_stats(t: torch.Tensor) -> torch.Tensor:
    x = t.detach().to(torch.float32)
    ax, sq, n = x.abs(), x.pow(2.0), x.numel()
    empty = n == 0  # std and p99 of nothing: 0 and NaN (the reductions give NaN / fail)
    values = {
        "min": x.amin(), "max": x.amax(), "mean": x.mean(),
        "abs_max": ax.amax(), "abs_mean": ax.mean(),
        "std": torch.tensor(0.0) if empty else (sq.mean() - x.mean().pow(2)).abs().sqrt(),
        "rms": sq.mean().sqrt(), "l1_norm": ax.sum(), "l2_norm": sq.sum().sqrt(),
        "nan_count": torch.isnan(x).to(torch.float32).sum(),
        "inf_count": torch.isinf(x).to(torch.float32).sum(),
        "zero_count": (x == 0).to(torch.float32).sum(),
        "p99_abs": torch.tensor(float("nan")) if empty else
        torch.topk(ax.reshape(-1), k=_top_rank(n), largest=True, sorted=True).values[-1],
    }
    return torch.stack([values[f] for f in _STATS_FIELDS], dim=0)


_STATS_FIELDS = ("min", "max", "mean", "abs_max", "abs_mean", "std", "rms", "l1_norm",
                 "l2_norm", "nan_count", "inf_count", "zero_count", "p99_abs")
STATS = StatReducer(name="STATS", fields=_STATS_FIELDS, emit=_emit_stats, eager=_eager_stats)

_BUILT_IN = {r.name: r for r in (FULL_TENSOR, STATS)}


def get_reducer(name_or_reducer: str | StatReducer) -> StatReducer:
    """A built-in reducer by name, or the given :class:`StatReducer` itself."""
    if isinstance(name_or_reducer, StatReducer):
        return name_or_reducer
    if name_or_reducer not in _BUILT_IN:
        raise ValueError(f"Unknown reducer {name_or_reducer!r}; available: {sorted(_BUILT_IN)}")
    return _BUILT_IN[name_or_reducer]
