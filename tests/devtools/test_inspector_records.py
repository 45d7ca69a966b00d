"""The Inspector's records at ExecuTorch 1.5.1's paths (``_inspector``, ``_inspector_utils``):
where edgetorch decides differently from ExecuTorch, and where a file could make them loop."""

from __future__ import annotations

import pytest

from edgetorch.devtools.debug_format.base_schema import OperatorGraph, OperatorNode
from edgetorch.devtools.etdump import schema_flatcc as flatcc
from edgetorch.devtools.inspector import EventBlock
from edgetorch.devtools.inspector._inspector import (
    DebugEventSignature,
    Event,
    InstructionEvent,
    InstructionEventSignature,
)
from edgetorch.devtools.inspector._inspector_utils import create_debug_handle_to_op_node_mapping


def _debug(sizes: list[int]) -> flatcc.DebugEvent:
    tensor = flatcc.Tensor(scalar_type=flatcc.ScalarType.FLOAT, sizes=sizes, strides=[1],
                           offset=64)
    return flatcc.DebugEvent(chain_index=0, instruction_id=3,
                             debug_entry=flatcc.Value(val=flatcc.ValueType.TENSOR.value,
                                                      tensor=tensor))


def _etdump(*sizes: list[int]) -> flatcc.ETDumpFlatCC:
    runs = [flatcc.RunData(name="Execute", bundled_input_index=-1, allocators=[],
                           events=[flatcc.Event(debug_event=_debug(s))]) for s in sizes]
    return flatcc.ETDumpFlatCC(version=0, run_data=runs)


def test_without_a_buffer_runs_that_logged_other_shapes_are_other_blocks():
    # ExecuTorch reads zeros of the logged shape and asserts; edgetorch reads nothing it was
    # not given, and still keeps runs of different shapes apart (as runs of different values).
    same = EventBlock._gen_from_etdump(_etdump([2], [2]))
    assert [b.name for b in same] == ["Execute"]
    assert repr(same[0].events[0].debug_data[0]) == "<no debug buffer: [2]>"
    assert [b.name for b in EventBlock._gen_from_etdump(_etdump([2], [1]))] == \
        ["Execute", "Execute_1"]


def test_one_event_from_runs_that_logged_different_values_is_refused():
    runs = [InstructionEvent(InstructionEventSignature(3, 0), debug_events=[_debug(s)])
            for s in ([2], [1])]
    with pytest.raises(AssertionError, match="different values"):
        Event._populate_debugging_related_fields(Event(name="e"), DebugEventSignature(), runs)


def test_op_node_mapping_visits_a_graph_that_contains_itself_once():
    node = OperatorNode("relu", metadata={"debug_handle": 7}, op="aten.relu.default")
    graph = OperatorGraph("g", [node])
    graph.elements.append(graph)
    assert create_debug_handle_to_op_node_mapping(graph) == {7: [node]}
