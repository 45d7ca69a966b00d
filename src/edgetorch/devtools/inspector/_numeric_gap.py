"""``Inspector.calculate_numeric_gap``, matched as ExecuTorch 1.5.1 matches.

1. The reference graph: the ATen program the user exported, once the Edge program's debug
   handles are carried back to it (so rows name ``conv2d``, ``linear``); else the Edge program.
2. It runs on the ETRecord's representative inputs; each debug handle keeps its node's output.
3. Each runtime event with op types (``native_call_*``, ``DELEGATE_CALL``, a delegate's inner
   step) gives its handles and logged values; the latest instruction wins a handle, and events
   whose handles overlap merge.
4. AOT and runtime outputs whose handles overlap are matched; the last handle of the runtime
   group names the AOT output to compare. A runtime op with several outputs (layer norm's
   mean and rstd) is matched by shape and dtype, a delegate call's logged arguments from the end.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ...errors import InspectorError
from . import _runs as R
from ._event import DELEGATE_CALL, OPERATOR_CALL
from ._inspector_utils import (
    DebugHandle,
    get_aot_debug_handle_to_op_name_mapping,
    map_runtime_aot_intermediate_outputs,
    merge_runtime_overlapping_debug_handles,
    nodes_by_handle,
)
from ._intermediate_output_capturer import IntermediateOutputCapturer
from .numerical_comparator import (
    L1Comparator,
    MSEComparator,
    NumericalComparatorBase,
    SNRComparator,
)

if TYPE_CHECKING:
    from ._inspector import Inspector

COMPARATORS = {"MSE": MSEComparator, "L1": L1Comparator, "SNR": SNRComparator}

log = logging.getLogger(__name__)


def capture(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> dict[DebugHandle, Any]:
    with torch.no_grad():
        return IntermediateOutputCapturer(gm).run_and_capture(*inputs)


def runtime_outputs(inspector: Inspector
                    ) -> tuple[dict[DebugHandle, tuple[Any, int]], dict[DebugHandle, list[str]]]:
    """Each runtime handle group's logged values and output count, and the event's name."""
    # A delegate that logged its inner steps makes its DELEGATE_CALL (spanning them all) moot.
    inner: dict[str | None, set[int]] = defaultdict(set)
    for block in inspector.event_blocks:
        for ev in block.events:
            if ev.is_delegated_op and ev.op_types and ev.debug_data \
                    and ev.debug_handles is not None:
                inner[ev.delegate_backend_name].update(_as_key(ev.debug_handles))
    found: dict[DebugHandle, tuple[int, Any, int]] = {}
    names: dict[DebugHandle, list[str]] = {}
    for block in inspector.event_blocks:
        for ev in block.events:
            if ev.name == OPERATOR_CALL or not ev.op_types or not ev.debug_data:
                continue
            if any(isinstance(v, R.Missing) for v in ev.debug_data):

                raise InspectorError("the ETDump's tensors are in a debug buffer that was not "
                                     "given; pass debug_buffer_path= (written with "
                                     "debug_buffer_size > 0)")
            key = _as_key(ev.debug_handles)
            covered = inner.get(ev.delegate_backend_name)
            if ev.name == DELEGATE_CALL and covered and not covered.isdisjoint(key):
                continue
            if ev._instruction_id > found.get(key, (-1,))[0]:
                found[key] = (ev._instruction_id, ev.debug_data, ev.num_outputs)
                names[key] = [ev.name]
    if not found and not inspector.has_debug_buffer:

        raise InspectorError("the ETDump's tensors are in a debug buffer that was not given; pass "
                             "debug_buffer_path= (written with debug_buffer_size > 0)")
    merged = merge_runtime_overlapping_debug_handles(found)
    return {k: (v[1], v[2]) for k, v in merged.items()}, names


def _as_key(handles: Any) -> DebugHandle:
    return (handles,) if isinstance(handles, int) else tuple(handles)


def make_comparator(inspector: Inspector, distance: Any) -> NumericalComparatorBase:

    if isinstance(distance, NumericalComparatorBase):
        if distance.inspector is None:
            distance.inspector = inspector
        return distance
    metric = str(distance).strip().upper()
    if metric not in COMPARATORS:
        raise InspectorError(f"unknown distance {distance!r}; use one of {sorted(COMPARATORS)} "
                             "or a NumericalComparatorBase")
    return COMPARATORS[metric](inspector=inspector)


def aot_outputs(inspector: Inspector, gm: torch.fx.GraphModule
                ) -> tuple[dict[DebugHandle, Any], dict[DebugHandle, list[str]]]:
    """The reference graph's output per debug handle on the ETRecord's representative inputs,
    and the names of its operators per handle."""

    inputs = require_etrecord(inspector)._representative_inputs
    if inputs is None or len(inputs) == 0:
        raise InspectorError("the ETRecord has no representative inputs; call "
                             "etrecord.update_representative_inputs([x]) with the inputs the "
                             "runtime ran, then save it again")
    # Several runs' inputs (a bundled program's cases): the first run is the one compared.
    if isinstance(inputs[0], (list, tuple)):
        inputs = inputs[0]
    return capture(gm, list(inputs)), get_aot_debug_handle_to_op_name_mapping(gm)


def aot_stack_traces(gm: torch.fx.GraphModule, graph_name: str
                     ) -> dict[DebugHandle, dict[str, str | None]]:
    """{debug handle: {operator name: its stack trace}} of the reference graph."""
    traces: dict[DebugHandle, dict[str, str | None]] = {}
    for key, pairs in nodes_by_handle(gm, lambda n: (n.name, n.meta.get("stack_trace"))).items():
        traces[key] = dict(pairs)
    if traces and not any(t for per_handle in traces.values() for t in per_handle.values()):
        log.warning("the reference graph %r has no stack traces; the 'stacktraces' column holds "
                    "None (export the model with its stack traces kept)", graph_name)
    return traces


def require_etrecord(inspector: Inspector) -> Any:

    if inspector._etrecord is None:
        raise InspectorError("calculate_numeric_gap needs an ETRecord; pass etrecord= (a path or "
                             "et_manager.get_etrecord())")
    return inspector._etrecord


def numeric_gap(inspector: Inspector, distance: Any, disable_validation: bool,
                reference_graph: str | None):

    comparator = make_comparator(inspector, distance)
    gm, graph_name = inspector._resolve_reference_graph(reference_graph, disable_validation)
    aot, aot_names = inspector._get_aot_intermediate_outputs_and_op_names(gm)
    if not aot or not aot_names:
        raise InspectorError("the reference graph has no nodes with debug handles; the ETRecord "
                             "was not made by to_edge(..., generate_etrecord=True)")
    traces = inspector._get_aot_debug_handle_to_stack_traces(gm, graph_name)
    runtime, runtime_names = inspector._get_runtime_intermediate_outputs_and_op_names()
    df = comparator.compare(map_runtime_aot_intermediate_outputs(aot, runtime), aot_names,
                            runtime_names)
    stack = {op: trace for per_handle in traces.values() for op, trace in per_handle.items()}
    df["stacktraces"] = [{op: stack.get(op) for op in ops} for ops in df["aot_ops"]]
    return df
