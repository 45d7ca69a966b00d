"""Comparing what the taps saw ahead of time with what the runtime reported:
``compare_aot_runtime_dataframe`` (one row per tap) and ``tap_compare`` (export, tap, lower,
strip, run in edgetorch's runtime, compare, in one call)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from ._spec import TapSpec
from ._strip_pass import strip_taps_
from ._tap_pass import TapRule, tap_intermediate_outputs_


def tap_compare(model: torch.nn.Module, example_inputs: tuple[Any, ...],
                partitioner: list | None = None, *,
                rules: Sequence[TapRule] | TapRule | None = None,
                error_on_empty: bool = True) -> tuple[Any, list[TapSpec]]:
    """Export ``model``, tap it (``rules`` as in ``tap_intermediate_outputs_``), take the
    tapped program's eager outputs as the reference, lower with ``partitioner`` (default:
    none), strip, run the ``.pte`` in edgetorch's runtime and return
    ``(compare_aot_runtime_dataframe(...), specs)``."""
    from ...exir import to_edge_transform_and_lower
    from ...runtime import Runtime

    ep = torch.export.export(model, example_inputs, strict=True)
    ep, specs = tap_intermediate_outputs_(ep, rules=rules, error_on_empty=error_on_empty)
    aot, _ = pytree.tree_flatten(ep.module()(*example_inputs))  # a tap computes its reducer
    edge = to_edge_transform_and_lower(ep, partitioner=partitioner or [])
    strip_taps_(edge)
    inputs, _ = pytree.tree_flatten(example_inputs)
    program = Runtime.get().load_program(edge.to_executorch().buffer)
    runtime = program.load_method("forward").execute(inputs)
    return compare_aot_runtime_dataframe(specs, aot, runtime), specs


def _floats(value: Any) -> np.ndarray:
    """A tap's value (tensor, array, list or number) as a flat float64 array."""
    if isinstance(value, torch.Tensor):
        value = value.detach().to(torch.float64).cpu().numpy()
    if isinstance(value, (list, tuple)):
        parts = [_floats(v) for v in value]
        return np.concatenate(parts) if parts else np.zeros(0)
    try:
        return np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        return np.zeros(0)


def _sqnr_db(aot: np.ndarray, runtime: np.ndarray) -> float:
    """Signal (the AOT value) to noise (the difference) in dB over the common elements;
    inf when they are equal."""
    from ..quant_debug.metrics import sqnr_db

    n = min(aot.size, runtime.size)
    return sqnr_db(aot[:n], runtime[:n]) if n else math.nan


def compare_aot_runtime_dataframe(specs: Sequence[TapSpec], aot_flat: Sequence[Any],
                                  rt_flat: Sequence[Any]) -> Any:
    """A pandas DataFrame, one row per tap: where it sits (node, module, op, reducer, output
    index) and how the runtime's value (``rt_flat[spec.output_index]``) compares with the
    tapped program's eager value (``aot_flat[...]``): ``aot_<field>``/``rt_<field>`` for each
    field of a reducer, or for ``FULL_TENSOR`` ``sqnr_db`` and both element counts."""
    import pandas as pd

    rows = []
    for spec in specs:
        aot, runtime = _floats(aot_flat[spec.output_index]), _floats(rt_flat[spec.output_index])
        row: dict[str, Any] = {
            "node_name": spec.node_name, "module_path": spec.module_path,
            "module_class": spec.module_class, "op_target": spec.op_target,
            "reducer_name": spec.reducer_name, "output_index": spec.output_index}
        if spec.reducer_name == "FULL_TENSOR":
            row.update(sqnr_db=_sqnr_db(aot, runtime), aot_numel=aot.size, rt_numel=runtime.size)
        else:
            fields = spec.fields or tuple(f"v{i}" for i in range(max(aot.size, runtime.size)))
            for i, field in enumerate(fields):
                row[f"aot_{field}"] = float(aot[i]) if i < aot.size else math.nan
                row[f"rt_{field}"] = float(runtime[i]) if i < runtime.size else math.nan
        rows.append(row)
    return pd.DataFrame(rows)
