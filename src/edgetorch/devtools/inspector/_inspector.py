"""The Inspector (``executorch.devtools.Inspector``): runtime events (ETDump) joined with the
compiler's record (ETRecord) through instruction ids and debug handles.

Where ExecuTorch fails its users, this one says so instead: an in-memory ETRecord works (map
keys are normalised), a numeric gap without a debug buffer or representative inputs is a
typed error, and runs with different inputs become separate event blocks.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import IO, Any

from ...errors import EdgeTorchError, InspectorError  # noqa: F401  (raised here; its home)
from ...runtime.event_tracer import RecordingEventTracer
from ..etdump import schema_flatcc as flatcc  # noqa: F401  (ExecuTorch's name here)
from . import _runs as R
from ._blocks import (  # noqa: F401  (ExecuTorch's _inspector defines these records)
    BlockOptions,
    DebugEventSignature,
    DelegateMetadata,
    EventSignature,
    InstructionEvent,
    InstructionEventSignature,
    ProfileEventSignature,
    RunSignature,
    build_blocks,
)
from ._event import OPERATOR_CALL, Event, EventBlock, PerfData  # noqa: F401
from ._inspector_utils import (  # noqa: F401  (names ExecuTorch's Inspector module holds)
    EDGE_DIALECT_GRAPH_KEY,
    EXCLUDED_COLUMNS_WHEN_PRINTING,
    FORWARD,
    TimeScale,
    create_debug_handle_to_op_node_mapping,
    gen_etdump_object,
    gen_graphs_from_etrecord,
    is_inference_output_equal,
    propagate_back_debug_handle,
)

log = logging.getLogger(__name__)



EXPORTED_PROGRAM = "exported_program"
EDGE_PROGRAM = "edge_dialect_exported_program"


class Inspector:
    def __init__(self, etdump_path: str | None = None, etdump_data: Any = None,
                 etrecord: Any = None, source_time_scale: TimeScale | str = TimeScale.NS,
                 target_time_scale: TimeScale | str = TimeScale.MS,
                 debug_buffer_path: str | None = None,
                 delegate_metadata_parser: Callable[[list[Any]], Any] | None = None,
                 delegate_time_scale_converter: Callable[[Any, Any], Any] | None = None,
                 enable_module_hierarchy: bool = False,
                 reference_graph_name: str = EDGE_DIALECT_GRAPH_KEY) -> None:
        source, target = TimeScale(_scale_value(source_time_scale)), \
            TimeScale(_scale_value(target_time_scale))
        if (source == TimeScale.CYCLES) != (target == TimeScale.CYCLES):
            raise InspectorError("CYCLES must be the source and the target time scale, or "
                                 "neither")
        if (etdump_path is None) == (etdump_data is None):
            raise InspectorError("pass exactly one of etdump_path and etdump_data")
        self._source_time_scale, self._target_time_scale = source, target
        self.reference_graph_name = reference_graph_name
        self._enable_module_hierarchy = enable_module_hierarchy
        self.has_debug_buffer = True
        if isinstance(etrecord, (str, os.PathLike)):
            etrecord = parse_etrecord(etrecord_path=etrecord)
        self._etrecord = etrecord
        options = BlockOptions(source, target, delegate_metadata_parser,
                               delegate_time_scale_converter)
        if isinstance(etdump_data, RecordingEventTracer):
            self.event_blocks: list[EventBlock] = build_blocks(R.runs_from_tracer(etdump_data),
                                                               options)
        else:
            self.event_blocks = self._read_etdump(etdump_path, etdump_data, debug_buffer_path,
                                                  options)
        self._reference_outputs: dict[str, list[Any]] = {}
        self._consume_etrecord()

    def _read_etdump(self, path: str | None, data: Any, buffer_path: str | None,
                     options: BlockOptions) -> list[EventBlock]:
        etdump = gen_etdump_object(etdump_path=path, etdump_data=data)
        if buffer_path is None:
            warnings.warn("Output Buffer not found. Tensor Debug Data will not be available.",
                          stacklevel=3)
        self.has_debug_buffer = buffer_path is not None
        with _mapped(buffer_path) as buffer:
            return EventBlock._gen_from_etdump(
                etdump, source_time_scale=options.source, target_time_scale=options.target,
                output_buffer=buffer, delegate_metadata_parser=options.metadata_parser,
                delegate_time_scale_converter=options.time_converter)

    def _consume_etrecord(self) -> None:
        """Debug handles, then node metadata, then reference outputs, for every event."""
        if self._etrecord is None:
            return
        from ._graph import GraphInfo

        graph = GraphInfo(self._etrecord)
        for block in self.event_blocks:
            graph.resolve(block)
            for event in block.events:
                event._associate_with_op_graph_nodes(graph.by_handle)
        references = self._etrecord._reference_outputs
        if references:
            self._reference_outputs = references
            outputs = references.get("forward") or []
            for block in self.event_blocks:
                index = block.bundled_input_index
                if index is not None and -len(outputs) <= index < len(outputs):
                    block.reference_output = outputs[index]

    # ---- reporting -------------------------------------------------------------------------

    def to_dataframe(self, include_units: bool = True, include_delegate_debug_data: bool = False):
        """One row per event of every block (17 columns)."""
        import pandas as pd

        frames = [b.to_dataframe(include_units=include_units,
                                 include_delegate_debug_data=include_delegate_debug_data)
                  for b in self.event_blocks]
        if not frames:
            return EventBlock("").to_dataframe(include_units=include_units)
        return pd.concat(frames, ignore_index=True)

    def _prepare_dataframe(self, include_units: bool = True,
                           include_delegate_debug_data: bool = False):
        """The printed table: without the bulky columns and the OPERATOR_CALL rows."""
        df = self.to_dataframe(include_units, include_delegate_debug_data)
        df = df.drop(columns=EXCLUDED_COLUMNS_WHEN_PRINTING)
        df = df[~df["event_name"].astype(str).str.contains(OPERATOR_CALL, regex=False)]
        return df.reset_index(drop=True)

    def print_data_tabular(self, file: IO[str] | None = None, include_units: bool = True,
                           include_delegate_debug_data: bool = False) -> None:
        """One row per event, without OPERATOR_CALL rows (ExecuTorch's table); in IPython it
        is displayed as a table, elsewhere as text fitted to the terminal's width (``$COLUMNS``,
        else the terminal, else 80): long cells are cut and columns beyond the width continue
        in blocks below. ``save_data_to_tsv`` keeps every value whole."""
        from ._table import display_or_print_df

        display_or_print_df(self._prepare_dataframe(include_units, include_delegate_debug_data),
                            file or sys.stdout)

    def save_data_to_tsv(self, file: IO[str] | str, include_units: bool = True,
                         include_delegate_debug_data: bool = False) -> None:
        self._prepare_dataframe(include_units, include_delegate_debug_data).to_csv(file, sep="\t")

    def find_total_for_module(self, module_name: str) -> float:
        """Sum of ``avg`` over non-OPERATOR_CALL events whose module hierarchy has a module
        whose name contains ``module_name``."""
        total = 0.0
        for block in self.event_blocks:
            for ev in block.events:
                if ev.name == OPERATOR_CALL:
                    continue
                for stack in ev.module_hierarchy.values():
                    if stack and any(module_name in key for key in stack):
                        if ev.perf_data is not None:
                            total += ev.perf_data.avg
                        break
        return total

    def get_op_list(self, event_block: str, show_delegated_ops: bool | None = True
                    ) -> dict[str, list[Event]]:
        """{op type: events that ran it} for the block named ``event_block``.

        (ExecuTorch 1.5.1 declares this and returns an empty dict.)"""
        blocks = [b for b in self.event_blocks if b.name == event_block]
        if not blocks:
            raise InspectorError(f"no event block named {event_block!r}; the blocks are "
                                 f"{[b.name for b in self.event_blocks]}")
        ops: dict[str, list[Event]] = {}
        for ev in blocks[0].events:
            if ev.name == OPERATOR_CALL or (ev.is_delegated_op and not show_delegated_ops):
                continue
            for op in dict.fromkeys(ev.op_types):
                ops.setdefault(op, []).append(ev)
        return ops

    def write_tensorboard_artifact(self, path: str) -> None:
        raise NotImplementedError("write_tensorboard_artifact writes nothing in ExecuTorch "
                                  "1.5.1 either; use to_dataframe() or save_data_to_tsv()")

    def get_exported_program(self, graph: str | None = None):
        """The ETRecord's Edge program, or the graph named ``graph`` in its graph map."""
        if self._etrecord is None:
            log.warning("the exported program is only available when the Inspector was given "
                        "an ETRecord")
            return None
        if graph is None:
            return self._etrecord.edge_dialect_program
        return (self._etrecord.graph_map or {}).get(graph)

    def calculate_numeric_gap(self, distance: Any = "MSE",
                              disable_debug_handle_valdiation: bool = False,
                              reference_graph: str | None = None):
        """Compare every intermediate output the runtime logged with the reference graph's
        (``distance``: "MSE", "L1", "SNR" or a ``NumericalComparatorBase``)."""
        from ._numeric_gap import numeric_gap

        return numeric_gap(self, distance, disable_debug_handle_valdiation, reference_graph)

    # The steps of calculate_numeric_gap, as ExecuTorch's Inspector names them.

    def _resolve_reference_graph(self, reference_graph: str | None = None,
                                 disable_debug_handle_valdiation: bool = False
                                 ) -> tuple[Any, str]:
        """(graph module, its name): the exported program when the Edge program's debug
        handles carry back to it (the default, else the Edge program), or the graph named."""
        from ._numeric_gap import require_etrecord

        record = require_etrecord(self)
        edge = record.edge_dialect_program
        edge = edge[FORWARD] if isinstance(edge, dict) else edge
        name = reference_graph
        if reference_graph in (None, EXPORTED_PROGRAM):
            if record.exported_program is not None and propagate_back_debug_handle(
                    record.exported_program, record.export_graph_id, edge,
                    disable_debug_handle_valdiation):
                name = EXPORTED_PROGRAM
            elif reference_graph is None:
                log.warning("the ETRecord has no ATen program, or its debug handles could not "
                            "be carried back to it; comparing against the Edge program")
                name = EDGE_PROGRAM
            else:
                raise InspectorError(
                    "Cannot use 'exported_program' as the reference graph: the ETRecord has "
                    "none, or debug handle backpropagation failed (some Edge node's handle has "
                    "no ATen node); pass disable_debug_handle_valdiation=True or "
                    "reference_graph='edge_dialect_exported_program'")
        if name == EDGE_PROGRAM:
            return edge.module(), name
        if name == EXPORTED_PROGRAM:
            return record.exported_program.module(), name
        lookup = name if "/" in name else f"{name}/{FORWARD}"
        graphs = record.graph_map or {}
        if lookup not in graphs:
            raise InspectorError(f"reference graph {lookup!r} not found in the ETRecord; use "
                                 f"'{EXPORTED_PROGRAM}', '{EDGE_PROGRAM}' or one of "
                                 f"{sorted(graphs)}")
        return graphs[lookup].module(), name

    def _get_aot_intermediate_outputs_and_op_names(self, reference_graph_module: Any):
        from ._numeric_gap import aot_outputs

        return aot_outputs(self, reference_graph_module)

    def _get_aot_debug_handle_to_stack_traces(self, reference_graph_module: Any,
                                              resolved_graph_name: str):
        from ._numeric_gap import aot_stack_traces

        return aot_stack_traces(reference_graph_module, resolved_graph_name)

    def _get_runtime_intermediate_outputs_and_op_names(self):
        """({debug handles: (logged values, output count)}, {debug handles: event names})."""
        from ._numeric_gap import runtime_outputs

        return runtime_outputs(self)

    def get_vgf_neural_statistics(self) -> list[dict[str, Any]]:
        """The VGF backend's neural-accelerator statistics carried in delegate metadata."""
        from .vgf_neural_statistics import parse_vgf_neural_statistics_delegate_metadata

        return [record for block in self.event_blocks for ev in block.events
                for record in parse_vgf_neural_statistics_delegate_metadata(
                    ev.raw_delegate_debug_metadatas)]


def _scale_value(scale: Any) -> Any:
    return getattr(scale, "value", scale)  # ExecuTorch's TimeScale members work too


def parse_etrecord(etrecord_path: str | os.PathLike) -> Any:
    """The ETRecord of a file (``edgetorch.devtools.etrecord.parse_etrecord``, imported when
    used so that reading an ETDump alone does not import torch)."""
    from ..etrecord import parse_etrecord as parse

    return parse(etrecord_path)


@contextlib.contextmanager
def _mapped(path: str | os.PathLike | None) -> Iterator[Any]:
    """The debug buffer, memory-mapped (it can be gigabytes; only the logged tensors' bytes are
    copied out, see ``_runs``)."""
    if path is None:
        yield None
        return
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm
