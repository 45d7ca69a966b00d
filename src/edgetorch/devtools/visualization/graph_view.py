"""A graph of a program as data: nodes, edges, partitions, delegates (no drawing here).

Works on what users have in hand at each stage: an ``ExportedProgram``, an
``EdgeProgramManager``, an ``ExecutorchProgramManager`` or a ``torch.fx.GraphModule``.
Delegate calls carry their backend id and the lowered subgraph, so a view can show both the
call and what went into it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class ViewNode:
    id: str
    label: str
    kind: str  # "input", "param", "op", "delegate", "output", "getitem"
    target: str = ""
    shape: str = ""
    debug_handle: Any = None
    source: str = ""
    module: str = ""
    partition: str = ""  # delegation_tag before lowering
    backend: str = ""  # backend id of a delegate call
    inputs: list[str] = field(default_factory=list)


@dataclass
class ViewGraph:
    title: str
    nodes: list[ViewNode]
    subgraphs: dict[str, ViewGraph] = field(default_factory=dict)  # delegate node id -> graph


def _graph_module(program: Any, method: str) -> tuple[torch.fx.GraphModule, Any]:
    """The graph module (and its ExportedProgram, when there is one) of ``program``."""
    if isinstance(program, torch.fx.GraphModule):
        return program, None
    if hasattr(program, "exported_program"):  # Edge / Executorch program managers
        program = program.exported_program(method)
    if isinstance(program, torch.export.ExportedProgram):
        return program.graph_module, program
    raise TypeError(f"cannot draw a {type(program).__name__}: pass an ExportedProgram, an "
                    "EdgeProgramManager, an ExecutorchProgramManager or a torch.fx.GraphModule")


def _shape(node: torch.fx.Node) -> str:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}"
    if isinstance(val, (list, tuple)) and all(isinstance(v, torch.Tensor) for v in val):
        return ", ".join(f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}" for v in val)
    return ""


def _source_line(node: torch.fx.Node) -> str:
    """The user's line (the last frame of the stack trace that is not inside torch)."""
    trace = node.meta.get("stack_trace") or ""
    frames = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ")]
    user = [f for f in frames if "/torch/" not in f and "/edgetorch/exir/" not in f]
    return (user or frames or [""])[-1]


def _module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


def _op_label(target: Any) -> str:
    name = getattr(target, "__name__", None) or str(target)
    text = str(target)
    if "::" in text or text.startswith(("aten.", "dim_order_ops.", "quantized_decomposed.")):
        return text.replace("::", ".")
    return name


def _kind(node: torch.fx.Node, signature_kinds: dict[str, str]) -> str:
    if node.op == "placeholder":
        return signature_kinds.get(node.name, "input")
    if node.op == "output":
        return "output"
    if node.op == "get_attr":
        return "param"
    if node.target is operator.getitem:
        return "getitem"
    if "executorch_call_delegate" in str(node.target):
        return "delegate"
    return "op"


def _signature_kinds(ep: Any) -> dict[str, str]:
    if ep is None:
        return {}
    from torch.export.graph_signature import InputKind

    kinds = {}
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if name:
            kinds[name] = "input" if spec.kind == InputKind.USER_INPUT else "param"
    return kinds


def build_view(program: Any, method: str = "forward", title: str | None = None) -> ViewGraph:
    """The nodes of ``program``'s ``method`` graph with their provenance and partitions."""
    gm, ep = _graph_module(program, method)
    kinds = _signature_kinds(ep)
    nodes: list[ViewNode] = []
    subgraphs: dict[str, ViewGraph] = {}
    for node in gm.graph.nodes:
        kind = _kind(node, kinds)
        view = ViewNode(
            id=node.name, kind=kind, target=str(node.target), shape=_shape(node),
            label=node.name if node.op in ("placeholder", "output", "get_attr") else _op_label(
                node.target),
            debug_handle=node.meta.get("debug_handle"), source=_source_line(node),
            module=_module_path(node), partition=str(node.meta.get("delegation_tag") or ""),
            inputs=[a.name for a in node.all_input_nodes],
        )
        if kind == "delegate":
            lowered = getattr(gm, node.args[0].target, None) if node.args else None
            view.backend = getattr(lowered, "backend_id", "") or ""
            view.label = f"delegate: {view.backend}"
            original = getattr(lowered, "original_module", None)
            if original is not None:
                subgraphs[node.name] = build_view(original, title=f"{node.name} ({view.backend})")
        nodes.append(view)
    # Weights read only through get_attr of a lowered module are noise in the picture.
    used = {i for n in nodes for i in n.inputs}
    nodes = [n for n in nodes if n.kind != "param" or n.id in used]
    return ViewGraph(title or f"{type(program).__name__}: {method}", nodes, subgraphs)
