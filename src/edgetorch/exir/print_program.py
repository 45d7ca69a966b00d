"""Readable views of graphs and programs: ``inspect_node``, ``add_cursor_to_graph`` and
``pretty_print_stacktraces`` for error reports; ``pretty_print`` (any schema object as its
dataclass tree) and ``print_program`` (the instruction list, one line per instruction, in
ExecuTorch's notation) for programs. The names are ExecuTorch's ``exir.print_program``."""

from __future__ import annotations

import dataclasses
import re
import reprlib
from enum import IntEnum
from typing import Any, TextIO

import torch

from ..errors import ExportError
from ..schema import program as S
from ..schema.program import Frame, FrameList
from ..schema.scalar_type import ScalarType

_FRAME = re.compile(r'File "(.*?)", line (\d+), in (.*?)\n([^\n]*)')


def pretty_print_stacktraces(obj: FrameList) -> str:
    """A ``FrameList`` as a Python traceback."""
    text = "Traceback (most recent call last): \n"
    for frame in obj.items:
        text += f'    File "{frame.filename}", line {frame.lineno}, in {frame.name}\n'
        text += f"{frame.context} \n"
    return text + "\n"


def stacktrace_to_framelist(stacktrace: str) -> FrameList:
    """Parse a node's ``stack_trace`` (a formatted traceback; 3.11's caret lines are skipped)."""
    return FrameList([Frame(filename=f, lineno=int(n), name=name, context=src.strip())
                      for f, n, name, src in _FRAME.findall(stacktrace)])


def add_cursor_to_graph(graph: torch.fx.Graph, finding_node: torch.fx.Node) -> str:
    """The graph as ``fx.Graph`` prints it, with ``-->`` in front of ``finding_node``."""
    lines = ["graph():"]
    for node in graph.nodes:
        text = node.format_node()
        if text:
            lines.append(("--> " if node is finding_node else "    ") + text)
    return "\n".join(lines)


def inspect_node(graph: torch.fx.Graph, node: torch.fx.Node) -> str:
    """The graph with ``node`` marked, then the node's spec and the user's stack trace."""
    text = (f"Here is the node in the graph module:\n{add_cursor_to_graph(graph, node)}\n"
            f"This node {node} has metadata of:\n")
    if "spec" in node.meta:
        text += f"The node spec:\n{node.meta['spec']}\n"
    if "stack_trace" in node.meta and node.meta["stack_trace"]:
        frames = stacktrace_to_framelist(node.meta["stack_trace"])
        text += f"The node stacktrace:\n{pretty_print_stacktraces(frames)}\n"
    return text


_stacktrace_to_framelist = stacktrace_to_framelist  # ExecuTorch's (private) name, imported by backends


def pretty_print(obj: Any, indent: int = 0, out: TextIO | None = None) -> None:
    """Print a schema object (a ``Program`` or any part of it) as its nested dataclasses."""
    if isinstance(obj, torch.fx.GraphModule):
        raise ExportError("pretty_print() does not accept GraphModule as input; print "
                          "graph_module.graph or pass a Program (et.executorch_program)")
    if isinstance(obj, IntEnum):
        print(int(obj), end="", file=out)
    elif obj is None or isinstance(obj, (int, str, bool, float)):
        print(obj, end="", file=out)
    elif isinstance(obj, bytes):
        r = reprlib.Repr()
        r.maxother = 1024
        print(r.repr(obj), end="", file=out)
    elif isinstance(obj, list):
        if len(obj) < 10 and all(isinstance(e, int) for e in obj):
            print(obj, end="", file=out)
            return
        print("[", file=out)
        for index, elem in enumerate(obj):
            print("  " * (indent + 1), end="", file=out)
            pretty_print(elem, indent + 1, out=out)
            print(f"(index={index}),", file=out)
        print("  " * indent + "]", end="", file=out)
    else:
        _print_dataclass(obj, indent, out)


def _print_dataclass(obj: Any, indent: int, out: TextIO | None) -> None:
    fields = dataclasses.fields(obj)
    inline = all(isinstance(getattr(obj, f.name), (int, str, bool, float, type(None)))
                 for f in fields)
    end = "" if inline else "\n"
    print(f"{type(obj).__name__}(", end=end, file=out)
    for i, field in enumerate(fields):
        if not inline:
            print("  " * (indent + 1), end="", file=out)
        print(field.name + "=", end="", file=out)
        pretty_print(getattr(obj, field.name), indent + 1, out=out)
        if i < len(fields) - 1:
            print(", ", end="", file=out)
        print("", end=end, file=out)
    if not inline:
        print("  " * indent, end="", file=out)
    print(")", end="" if indent else "\n", file=out)


_DTYPE_SHORT = {
    ScalarType.BYTE: "ui8", ScalarType.CHAR: "i8", ScalarType.SHORT: "i16",
    ScalarType.INT: "i32", ScalarType.LONG: "i64", ScalarType.HALF: "f16",
    ScalarType.FLOAT: "f32", ScalarType.DOUBLE: "f64", ScalarType.BOOL: "b8",
    ScalarType.QINT8: "qi8", ScalarType.QUINT8: "qui8", ScalarType.QINT32: "qi32",
    ScalarType.BFLOAT16: "bf16", ScalarType.FLOAT8E5M2: "f8e5m2",
    ScalarType.FLOAT8E4M3FN: "f8e4m3fn", ScalarType.QUINT4X2: "qui4x2",
    ScalarType.QUINT2X4: "qui2x4",
}
_LIST_PREFIX = ((S.TensorList, "TL"), (S.OptionalTensorList, "OTL"), (S.IntList, "IL"),
                (S.DoubleList, "DL"), (S.BoolList, "BL"))


def _format_tensor(t: S.Tensor, show_meminfo: bool, mark_dynamic: bool) -> str:
    if t.data_buffer_idx > 0:
        text = "CT"  # a constant tensor
    else:
        text = ""
        if mark_dynamic and t.shape_dynamism == S.TensorShapeDynamism.DYNAMIC_BOUND:
            text = "UB"
        elif mark_dynamic and t.shape_dynamism == S.TensorShapeDynamism.DYNAMIC_UNBOUND:
            text = "DU"
        text += "T"
        if show_meminfo:
            info = t.allocation_info
            text += f"m{info.memory_id}.{info.memory_offset}" if info else "m."
    dtype = _DTYPE_SHORT.get(ScalarType(t.scalar_type))
    if dtype is None:
        raise ExportError(f"print_program: no short name for scalar type {t.scalar_type}")
    return text + f"{list(t.sizes)}{dtype}"


def _format_evalue(value: S.EValue, show_meminfo: bool, mark_dynamic: bool) -> str:
    v = value.val
    if isinstance(v, S.Tensor):
        text = _format_tensor(v, show_meminfo, mark_dynamic)
    elif isinstance(v, S.Int):
        text = f"I{v.int_val}"
    elif isinstance(v, S.Double):
        text = f"D{v.double_val}"
    elif isinstance(v, S.Bool):
        text = f"B{int(v.bool_val)}"
    elif isinstance(v, S.String):
        text = f"S{v.string_val}"
    elif isinstance(v, S.Null) or v is None:
        text = "N"
    else:
        prefix = next((p for cls, p in _LIST_PREFIX if isinstance(v, cls)), None)
        if prefix is None:
            raise ExportError(f"print_program: unknown EValue {type(v).__name__}")
        text = prefix + str(list(v.items))
    return f"\033[34m{text}\033[0m"


def print_program(program: S.Program, show_meminfo: bool = True,
                  mark_dynamic_shape_tensor: bool = False, out: TextIO | None = None) -> None:
    """Print the first plan's instructions: ``index: op args`` where each argument is its
    value index, ``I<n>``/``O<n>`` for the plan's inputs/outputs (red), and its value (blue):
    ``T`` tensors (``m<memory id>.<offset>`` where planned, ``CT`` constants), ``I`` ints,
    ``D`` doubles, ``B`` bools, ``S`` strings, ``N`` none, ``TL``/``IL``/... lists."""
    plan = program.execution_plan[0]
    instructions = plan.chains[0].instructions

    def arg(i: int) -> str:
        text = str(i)
        if i in plan.inputs:
            text += f"\033[31mI{plan.inputs.index(i)}\033[0m"
        if i in plan.outputs:
            text += f"\033[31mO{plan.outputs.index(i)}\033[0m"
        return text + _format_evalue(plan.values[i], show_meminfo, mark_dynamic_shape_tensor)

    print(f"The program contains the following {len(instructions)} instructions", file=out)
    for idx, instr in enumerate(instructions):
        print(f"{idx:3}: ", end="", file=out)
        call = instr.instr_args
        if isinstance(call, S.KernelCall):
            op = plan.operators[call.op_index]
            name = f"{op.name}.{op.overload}" if op.overload else op.name
            print(f"{name} {','.join(map(arg, call.args))}", file=out)
        elif isinstance(call, S.DelegateCall):
            backend = plan.delegates[call.delegate_index].id
            print(f"{backend} {','.join(map(arg, call.args))}", file=out)
        elif isinstance(call, S.JumpFalseCall):
            print(f"JF ({arg(call.cond_value_index)}) -> {call.destination_instruction}",
                  file=out)
        elif isinstance(call, S.MoveCall):
            print(f"MOVE {arg(call.move_from)} -> {arg(call.move_to)}", file=out)
        elif isinstance(call, S.FreeCall):
            print(f"FREE {arg(call.value_index)}", file=out)
        else:
            raise ExportError(f"print_program: unknown instruction {type(call).__name__}")
