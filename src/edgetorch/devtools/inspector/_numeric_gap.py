"""``Inspector.calculate_numeric_gap``: rerun the ETRecord's Edge program on the representative
inputs, keep each debug handle's output, and compare it with what the runtime logged for the
instruction that ran those handles."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate

from . import _events as R
from ._graph import DEBUG_HANDLE, op_name


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))


def _l1(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sum(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _snr(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    noise = np.mean((a - b) ** 2)
    signal = np.mean(a ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(signal / noise))


DISTANCES = {"MSE": _mse, "L1": _l1, "SNR": _snr}


class _Capture(torch.fx.Interpreter):
    """Runs a graph and keeps every node's output by debug handle (delegates run their
    original Edge program, so their inner handles are captured too)."""

    def __init__(self, gm: torch.fx.GraphModule, outputs: dict[int, Any]) -> None:
        super().__init__(gm)
        self.outputs = outputs

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op == "call_function" and n.target is executorch_call_delegate:
            lowered = self.fetch_attr(n.args[0].target)
            args = [self.env[a] if isinstance(a, torch.fx.Node) else a for a in n.args[1:]]
            result = _run(lowered.original_module, args, self.outputs)
            return result[0] if len(result) == 1 and not isinstance(n.meta.get("val"),
                                                                    (list, tuple)) else result
        value = super().run_node(n)
        handle = n.meta.get(DEBUG_HANDLE)
        if handle is not None and n.op == "call_function":
            for h in handle if isinstance(handle, (list, tuple)) else [handle]:
                self.outputs[int(h)] = value  # the last node of a handle gives its output
        return value


def _run(ep: Any, inputs: list[Any], outputs: dict[int, Any]) -> tuple:
    gm = ep.module()
    flat = _Capture(gm, outputs).run(*inputs)
    return tuple(flat) if isinstance(flat, (list, tuple)) else (flat,)


def numeric_gap(inspector: Any, distance: str, reference_graph: str | None):
    import pandas as pd

    from ._inspector import InspectorError

    record = inspector._etrecord
    if record is None:
        raise InspectorError("calculate_numeric_gap needs an ETRecord; pass etrecord= (a path or "
                             "et_manager.get_etrecord())")
    if record._representative_inputs is None:
        raise InspectorError("the ETRecord has no representative inputs; call "
                             "etrecord.update_representative_inputs([x]) with the inputs the "
                             "runtime ran, then save it again")
    if not inspector.has_debug_buffer:
        raise InspectorError("the ETDump's tensors are in a debug buffer that was not given; pass "
                             "debug_buffer_path= (written with debug_buffer_size > 0)")
    if isinstance(distance, str):
        try:
            fn = DISTANCES[distance.upper()]
        except KeyError:
            raise InspectorError(f"unknown distance {distance!r}; use one of "
                                 f"{sorted(DISTANCES)}") from None
    else:
        fn = distance.compare
    ep = record.graph_map[reference_graph] if reference_graph else \
        inspector._graph.program
    inputs = record._representative_inputs
    inputs = inputs[0] if inputs and isinstance(inputs[0], (list, tuple)) else inputs
    aot: dict[int, Any] = {}
    with torch.no_grad():
        _run(ep, list(inputs), aot)
    rows = []
    graph = inspector._graph
    block = next((b for b in inspector.event_blocks if b.name.startswith("Execute")), None)
    # Instructions that share handles (a decomposed linear: permute + addmm) compare only the
    # last one, whose output is the handles' output.
    last_event: dict[tuple, Any] = {}
    for ev in block.events if block else []:
        if ev.name == "OPERATOR_CALL" or ev.is_delegated_op or not ev.debug_data:
            continue
        last_event[graph.handles(ev._instruction_id)] = ev
    for handles, ev in last_event.items():
        present = [h for h in handles if h in aot]
        if not present:
            continue
        last = max(present, key=lambda h: list(aot).index(h))
        aot_value = aot[last]
        aot_list = list(aot_value) if isinstance(aot_value, (list, tuple)) else [aot_value]
        runtime = ev.debug_data[-len(aot_list):]
        if any(v is R.MISSING for v in runtime):
            raise InspectorError("the debug buffer lacks this event's tensors; pass "
                                 "debug_buffer_path=")
        gaps = [fn(np.asarray(a.detach().numpy() if isinstance(a, torch.Tensor) else a),
                   np.asarray(r)) for a, r in zip(aot_list, runtime)]
        nodes = graph.nodes(tuple(handles))
        rows.append({
            "aot_debug_handle": tuple(handles), "aot_ops": [op_name(n) for n in nodes],
            "aot_intermediate_output": aot_value, "runtime_ops": [ev.name],
            "runtime_debug_handle": tuple(handles),
            "runtime_intermediate_output": runtime[0] if len(runtime) == 1 else runtime,
            "gap": gaps, "stacktraces": {n.name: n.meta.get("stack_trace") for n in nodes},
        })
    return pd.DataFrame(rows, columns=["aot_debug_handle", "aot_ops", "aot_intermediate_output",
                                       "runtime_ops", "runtime_debug_handle",
                                       "runtime_intermediate_output", "gap", "stacktraces"])
