"""An FX graph (an exported or lowered ExecuTorch program) as an :class:`OperatorGraph`.

The tree has ExecuTorch 1.5.1's shape, which its Inspector and viewers key on::

    base
    |- inputs   the placeholders (ValueNode)
    |- forward  operator calls, constant arguments, get_attr values, and with
    |           ``enable_module_hierarchy`` one sub-graph per (module, module type)
    '- outputs  the output node (ValueNode whose inputs are the returned nodes)

Node names are the FX names plus ``"_"`` (so a viewer does not fold ``add_1`` into
``add``); a ``getitem`` stands for the node it indexes, and planned buffers
(``memory.alloc``) are left out: an out-variant call stands for its ``out=`` buffer.
Constant arguments become ValueNodes named after the schema argument (``dim_0``) or
``CONST_<n>``, numbered in graph order.
"""

from __future__ import annotations

import operator
import warnings
from collections import defaultdict
from enum import Enum
from typing import Any

import torch
from torch._higher_order_ops.auto_functionalize import (
    auto_functionalized,
    auto_functionalized_v2,
)

from ...exir.memory import alloc
from .base_schema import Node, OperatorGraph, OperatorNode, ValueNode


class RESERVED_METADATA_ARG(Enum):  # noqa: N801 (ExecuTorch's name)
    """Metadata keys the Developer Tools read and write (ExecuTorch's spellings)."""

    DEBUG_HANDLE = "debug_handle"
    MODULE_STACK = "nn_module_stack"
    SOURCE_FN_STACK = "source_fn_stack"
    MODULE_TYPE = "module_type"
    PROFILE_START_TIME = "profile_start_time"
    PROFILE_END_TIME = "profile_end_time"
    LOAD_START_TIME = "load_start_time"
    LOAD_END_TIME = "load_end_time"
    MEMORY_USAGE = "memory_usage"
    DEBUG_ENTRY = "debug_entry"
    STACK_TRACE = "stack_trace"
    DEBUG_DATA = "debug_data"

    METRICS_KEYWORD = "metrics"
    PROFILE_SUMMARY_COLDSTART = "Coldstart"
    PROFILE_SUMMARY_AVERAGE = "Average"
    PROFILE_SUMMARY_P90 = "P90"
    PROFILE_SUMMARY_P10 = "P10"
    PROFILE_SUMMARY_MIN = "Min"
    PROFILE_SUMMARY_MAX = "Max"

    AGGREGATED_OP_TABLE = "Aggregated op stats"
    RUN_SUMMARY_INDIVIDUAL_RUNS_TABLE = "Run summary individual stats"
    RUN_SUMMARY_TABLE = "Aggregated run summary stats"
    OP_INSTANCE_SUMMARY_TABLE = "Individual op stats"

    TABLES_KEYWORD = "tables"
    KV_KEYWORD = "kv"
    MODEL_LOAD_TIME_KEY = "Model load time (ms)"


_KEPT_METADATA = (RESERVED_METADATA_ARG.DEBUG_HANDLE.value,
                  RESERVED_METADATA_ARG.STACK_TRACE.value,
                  RESERVED_METADATA_ARG.MODULE_STACK.value)
_SCALARS = (int, float, torch.dtype, str)  # bool is an int


def _is_alloc(value: Any) -> bool:
    return isinstance(value, torch.fx.Node) and value.target is alloc


def _schema_args(target: Any) -> list[Any] | None:
    schema = getattr(target, "_schema", None)
    return list(schema.arguments) if schema is not None else None


class FXOperatorGraph(OperatorGraph):
    """An :class:`OperatorGraph` read from a ``torch.fx.GraphModule``."""

    @staticmethod
    def gen_operator_graph(model: torch.fx.GraphModule, skip_stack_trace: bool | None = False,
                           enable_module_hierarchy: bool = False) -> FXOperatorGraph:
        """The tree of ``model``'s graph (see the module docstring). ``skip_stack_trace``
        leaves ``stack_trace`` out of each node's metadata; ``enable_module_hierarchy`` moves
        each node with a ``source_fn_stack`` into its module's sub-graph."""
        return _Builder(bool(skip_stack_trace), enable_module_hierarchy).build(model.graph)

    @staticmethod
    def _get_node_name(node: torch.fx.Node) -> str:
        if node.target is operator.getitem:  # a tuple element is named after its producer
            node = node.args[0]
            if not isinstance(node, torch.fx.Node):
                raise TypeError(f"getitem of {node!r}, not of a graph node")
        return node.name + "_"

    @staticmethod
    def _get_op_name(node: torch.fx.Node) -> str:
        return node.target.__name__

    @staticmethod
    def _extract_metadata(metadata: dict[str, Any],
                          skip_stack_trace: bool | None = False) -> dict[str, Any]:
        return {key: metadata[key] for key in _KEPT_METADATA if key in metadata
                and not (skip_stack_trace and key == RESERVED_METADATA_ARG.STACK_TRACE.value)}

    @staticmethod
    def _extract_output_shapes(val: Any) -> list[list[int]] | None:
        tensors = _tensors(val)
        return None if tensors is None else [list(t.shape) for t in tensors]

    @staticmethod
    def _extract_output_dtype(val: Any) -> list[torch.dtype] | None:
        tensors = _tensors(val)
        return None if tensors is None else [t.dtype for t in tensors]


def _tensors(val: Any) -> list[torch.Tensor] | None:
    """``val`` (a node's ``meta["val"]``) as a list of tensors: one tensor, or a tuple whose
    every element is a tensor; anything else has no shapes to report."""
    if isinstance(val, torch.Tensor):  # FakeTensor included
        return [val]
    if isinstance(val, tuple) and all(isinstance(t, torch.Tensor) for t in val):
        return list(val)
    return None


class _Builder:
    """One pass over a graph; holds the nodes made so far by name."""

    def __init__(self, skip_stack_trace: bool, by_module: bool) -> None:
        self.skip_stack_trace = skip_stack_trace
        self.by_module = by_module
        self.nodes: dict[str, Node] = {}
        self.inputs: dict[str, Node] = {}
        self.outputs: dict[str, Node] = {}
        self.out_buffers: set[str] = set()  # alloc names standing for an out-variant call
        self.modules: dict[tuple[str, str], list[Node]] = defaultdict(list)
        self.const_count = 0

    def build(self, graph: torch.fx.Graph) -> FXOperatorGraph:
        for fx_node in graph.nodes:  # bounded by the graph
            if fx_node.target is alloc or fx_node.target is operator.getitem:
                continue
            node = self._node(fx_node)
            self.nodes[node.name] = node
        return self._compose()

    def _node(self, fx_node: torch.fx.Node) -> Node:
        name = FXOperatorGraph._get_node_name(fx_node)
        metadata = FXOperatorGraph._extract_metadata(fx_node.meta, self.skip_stack_trace)
        val = fx_node.meta.get("val")
        shapes = FXOperatorGraph._extract_output_shapes(val)
        dtype = str(FXOperatorGraph._extract_output_dtype(val) or "")
        op = fx_node.op
        if op in ("placeholder", "get_attr"):
            node = ValueNode(name, output_shapes=shapes, metadata=metadata, dtype=dtype)
            if op == "placeholder":
                self.inputs[name] = node
            return node
        if op == "output":
            if len(fx_node.args) != 1:
                raise ValueError(f"output node {fx_node.name!r} has {len(fx_node.args)} args")
            returned = [self.nodes[FXOperatorGraph._get_node_name(r)] if r is not None else []
                        for r in fx_node.args[0]]
            node = ValueNode(name, inputs=returned, output_shapes=shapes, metadata=metadata,
                             dtype=dtype)
            self.outputs[name] = node
            return node
        if op == "call_function":
            schema_args = _schema_args(fx_node.target)
            node = OperatorNode(name, inputs=self._inputs(fx_node, schema_args),
                                output_shapes=shapes, metadata=metadata,
                                op=FXOperatorGraph._get_op_name(fx_node),
                                named_args=[a.name for a in schema_args or []])
            self._add_to_module(node, fx_node.meta)
            for key, value in fx_node.kwargs.items():
                if key == "out" and _is_alloc(value):  # the buffer's readers read this call
                    buffer = FXOperatorGraph._get_node_name(value)
                    self.nodes[buffer] = node
                    self.out_buffers.add(buffer)
            return node
        if op in ("call_module", "call_method"):
            raise AssertionError(f"{op} is not supported in an edge model graph: {name}, "
                                 f"{fx_node.target}")
        raise ValueError(f"Unsupported op type encountered {op}, {name}")

    def _const(self, name: str, val: Any, meta: dict[str, Any]) -> str:
        self.nodes[name] = node = ValueNode(name, val=val)
        self._add_to_module(node, meta)
        return name

    def _const_name(self, schema_args: list[Any] | None, index: int) -> str:
        base = schema_args[index].name + "_" if schema_args and len(schema_args) > index \
            else "CONST_"
        self.const_count += 1
        return base + str(self.const_count - 1)

    def _inputs(self, fx_node: torch.fx.Node, schema_args: list[Any] | None) -> list[Node]:
        args = fx_node.args
        if fx_node.target in (auto_functionalized, auto_functionalized_v2):
            args = tuple(fx_node.kwargs.values())  # the functional op's arguments
        names: list[str] = []
        for index, arg in enumerate(args):
            if isinstance(arg, torch.fx.Node):
                if not _is_alloc(arg):
                    names.append(FXOperatorGraph._get_node_name(arg))
            elif isinstance(arg, _SCALARS):
                names.append(self._const(self._const_name(schema_args, index), str(arg),
                                         fx_node.meta))
            elif isinstance(arg, list):
                names += self._list_inputs(arg, schema_args, index, fx_node.meta)
            elif arg is not None:
                raise ValueError(f"Unsupported argument encountered {fx_node.op}, "
                                 f"{fx_node.name}, {arg}, {type(arg)}")
        for value in fx_node.kwargs.values():
            # ``out=`` buffers are the call's own result (see _node); anything else is not drawn
            if not _is_alloc(value):
                warnings.warn(f"Unsupported kwarg encountered: {fx_node.name}, "
                              f"{fx_node.kwargs}", stacklevel=1)
        return [self.nodes[n] for n in names]

    def _list_inputs(self, arg: list, schema_args: list[Any] | None, index: int,
                     meta: dict[str, Any]) -> list[str]:
        names: list[str] = []
        for item in arg:
            if isinstance(item, (int, float)):  # a list of numbers is one constant
                return [self._const(self._const_name(schema_args, index), arg, meta)]
            if isinstance(item, torch.fx.Node):
                names.append(FXOperatorGraph._get_node_name(item))
            elif item is None:
                self.const_count += 1
                names.append(self._const(f"CONST_NONE{self.const_count - 1}", str(arg), meta))
            else:
                raise ValueError(f"Unsupported argument encountered in list {arg}, "
                                 f"{type(item)}")
        return names

    def _add_to_module(self, node: Node, meta: dict[str, Any]) -> None:
        if not self.by_module:
            return
        stack = meta.get(RESERVED_METADATA_ARG.SOURCE_FN_STACK.value)
        if stack is None or RESERVED_METADATA_ARG.MODULE_STACK.value not in meta:
            return
        module_name, module_type = stack[-1][0], stack[-1][1]
        type_name = module_type if isinstance(module_type, str) else module_type.__name__
        self.modules[(module_name, type_name)].append(node)

    def _compose(self) -> FXOperatorGraph:
        module_graphs: list[OperatorGraph] = []
        for (module_name, module_type), members in self.modules.items():
            module_graphs.append(OperatorGraph(graph_name=module_name, elements=members,
                                               metadata={"module_type": module_type}))
            for node in members:  # drawn inside the module, not in the body
                self.nodes.pop(node.name, None)
        hidden = self.inputs.keys() | self.outputs.keys() | self.out_buffers
        body = [node for name, node in self.nodes.items() if name not in hidden]
        return FXOperatorGraph(graph_name="base", elements=[
            FXOperatorGraph(graph_name="inputs", elements=list(self.inputs.values())),
            FXOperatorGraph(graph_name="forward", elements=body + module_graphs),
            FXOperatorGraph(graph_name="outputs", elements=list(self.outputs.values())),
        ])
