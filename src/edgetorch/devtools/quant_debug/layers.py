"""The layers of a model as the debugger sees them, and how every stage's values find them.

A layer is a compute node of the quantized ATen program (``torch.export`` of the converted
model) that the float program also has: ``conv2d_1`` with its module (``conv2``), the user's
source line, the node whose value is the layer's output as the next layer sees it (the
``dequantize`` after its output quantizer, else the node itself) and that quantizer's range.

Later stages reach the layers through debug handles: every Edge node (delegated ones inside
their ``LoweredBackendModule`` too) carries ``debug_handle`` and, through ``from_node``, the
ATen node it was made from -- the same provenance ``Inspector.calculate_numeric_gap`` carries
back (``inspector/_inspector_utils.py``). Output quantize/dequantize pairs share the handle of
the node they quantize, so the last value of a handle is the layer's observed output at every
stage.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..inspector._inspector_utils import DEBUG_HANDLE, ancestors
from .metrics import QRange

# Nodes that quantize, dequantize or pick: never layers of their own.
_NOT_LAYERS = re.compile(r"quantize|choose_qparams|getitem|_assert|sym_size|"
                         r"access_subclass_inner_tensor|lift_fresh|detach|_guards")
_SHAPE_OPS = re.compile(r"^(view|reshape|flatten|permute|transpose|squeeze|unsqueeze|expand|"
                        r"contiguous|clone|t|alias|slice|select|unflatten|dropout)(_copy)?$")
_TORCH_FILE = re.compile(r"[/\\](torch|torchao)[/\\]")  # framework frames, not the model's
_TRACE = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n([^\n]*)')


@dataclass(frozen=True)
class Layer:
    """One layer (see the module docstring). ``producers`` are the layers feeding it."""

    name: str
    op: str
    module: str
    module_type: str
    source: str
    code: str
    float_node: str
    observed: str
    qrange: QRange | None
    producers: tuple[str, ...]
    weighted: bool
    index: int

    @property
    def kind(self) -> str:
        if self.weighted:
            return "weighted"
        return "shape" if _SHAPE_OPS.match(self.op) else "compute"


def op_name(node: torch.fx.Node) -> str:
    """``aten.conv2d.default`` -> ``conv2d``; Edge ops (``aten_convolution_default``) alike."""
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    packet = getattr(getattr(target, "_overloadpacket", None), "__name__", None)
    return packet or name.split(".")[0]


def is_compute(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and not _NOT_LAYERS.search(str(node.target))


def module_of(node: torch.fx.Node) -> tuple[str, str]:
    """(fully qualified name, type name) of the innermost module that ran ``node``."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, tp = list(stack.values())[-1]
    path = str(path)
    # older exports spell it L['self'].conv1
    path = re.sub(r"^L\['self'\]\.?", "", path)
    tname = tp.__name__ if isinstance(tp, type) else str(tp).rsplit(".", 1)[-1]
    return path, tname


def source_of(node: torch.fx.Node) -> tuple[str, str]:
    """(``file.py:line``, code) of the user's line that made ``node``: the innermost frame
    outside torch (``self.conv1(x)`` rather than ``Conv2d.forward``'s own line)."""
    trace = node.meta.get("stack_trace") or ""
    found = _TRACE.findall(trace)
    if not found:
        return "", ""
    user = [f for f in found if not _TORCH_FILE.search(f[0])]
    path, line, code = (user or found)[-1]
    return f"{path.rsplit('/', 1)[-1]}:{line}", code.strip()


def _occurrence_keys(gm: torch.fx.GraphModule) -> dict[tuple[str, str, int], torch.fx.Node]:
    seen: Counter = Counter()
    keys = {}
    for node in gm.graph.nodes:
        if is_compute(node):
            base = (module_of(node)[0], op_name(node))
            keys[(*base, seen[base])] = node
            seen[base] += 1
    return keys


def _observed(node: torch.fx.Node) -> tuple[torch.fx.Node, QRange | None]:
    """The ``dequantize`` after ``node``'s output quantizer (and its range), else ``node``."""
    users = list(node.users)
    if len(users) != 1 or "quantize_per_tensor" not in str(users[0].target) \
            or "dequantize" in str(users[0].target):
        return node, None
    q = users[0]
    dqs = [u for u in q.users if "dequantize" in str(u.target)]
    if not dqs:
        return node, None
    scale, zp, qmin, qmax = (q.args + (None,) * 5)[1:5]
    if not all(isinstance(v, (int, float)) for v in (scale, zp, qmin, qmax)):
        return dqs[0], None  # a dynamic (tensor) scale: no fixed range
    return dqs[0], QRange(float(scale), int(zp), int(qmin), int(qmax))


def _weighted(node: torch.fx.Node, ep: torch.export.ExportedProgram) -> bool:
    params = set(ep.graph_signature.inputs_to_parameters) | set(
        ep.graph_signature.inputs_to_buffers)
    frontier = list(node.all_input_nodes)
    for _ in range(8):  # weights sit behind at most a dequantize or two
        nxt = []
        for arg in frontier:
            if arg.op == "placeholder" and arg.name in params:
                return True
            if arg.op == "get_attr":
                return True
            if arg.op == "call_function" and not is_compute(arg):
                nxt += arg.all_input_nodes
        frontier = nxt
    return False


def find_layers(float_ep: torch.export.ExportedProgram,
                quant_ep: torch.export.ExportedProgram) -> list[Layer]:
    """The layers of ``quant_ep`` matched with ``float_ep``'s nodes (by name and operator,
    else by module, operator and occurrence)."""
    float_nodes = {n.name: n for n in float_ep.graph.nodes if is_compute(n)}
    by_occurrence = _occurrence_keys(float_ep.graph_module)
    quant_keys = {id(n): k for k, n in _occurrence_keys(quant_ep.graph_module).items()}
    layers: dict[str, Layer] = {}
    compute = [n for n in quant_ep.graph.nodes if is_compute(n)]
    for index, node in enumerate(compute):
        match = float_nodes.get(node.name)
        if match is None or op_name(match) != op_name(node):
            match = by_occurrence.get(quant_keys.get(id(node)))
        if match is None:
            continue
        observed, qrange = _observed(node)
        module, mtype = module_of(node)
        source, code = source_of(match)
        layers[node.name] = Layer(
            node.name, op_name(node), module, mtype, source, code, match.name, observed.name,
            qrange, _producers(node, layers), _weighted(match, float_ep), index)
    return list(layers.values())


def _producers(node: torch.fx.Node, layers: dict[str, Layer]) -> tuple[str, ...]:
    found: list[str] = []
    frontier = list(node.all_input_nodes)
    for _ in range(64):  # through quantize/dequantize chains only
        nxt = []
        for arg in frontier:
            if arg.name in layers:
                found.append(arg.name)
            elif arg.op == "call_function":
                nxt += arg.all_input_nodes
        if not nxt:
            break
        frontier = nxt
    return tuple(dict.fromkeys(found))


# ---- debug handles: from a lowered program back to the quantized ATen program ----------------


def program_nodes(ep: torch.export.ExportedProgram) -> Iterator[tuple[torch.fx.Node, Any]]:
    """Every node of ``ep`` and of its delegates' original subgraphs, with the delegate
    (``LoweredBackendModule``) it sits in, or None."""
    from ...exir.backend.lowered_backend_module import LoweredBackendModule

    gm = ep.graph_module
    for node in gm.graph.nodes:
        yield node, None
    for _, child in gm.named_children():
        if isinstance(child, LoweredBackendModule):
            for node in child.original_module.graph.nodes:
                yield node, child


def handles_of(program: torch.export.ExportedProgram,
               source: torch.export.ExportedProgram) -> dict[str, int]:
    """``source`` node name -> the debug handle of the ``program`` nodes made from it."""
    graph_id = id(source.graph)
    suffix = f".{graph_id}"
    out: dict[str, int] = {}
    for node, _ in program_nodes(program):
        handle = node.meta.get(DEBUG_HANDLE)
        if not isinstance(handle, int) or _is_delegate_call(node):
            continue
        for ancestor in ancestors(node):
            if ancestor.endswith(suffix):
                out.setdefault(ancestor[: -len(suffix)], handle)
    return out


def _is_delegate_call(node: torch.fx.Node) -> bool:
    """A delegate call (or a getitem of its results): it names the last node it took over,
    whose own handle lives inside the delegate."""
    if "executorch_call_delegate" in str(node.target):
        return True
    return "getitem" in str(node.target) and bool(node.args) and isinstance(
        node.args[0], torch.fx.Node) and "executorch_call_delegate" in str(node.args[0].target)


def fused_activations(program: torch.export.ExportedProgram, present: set[int]) -> dict[int, int]:
    """Handles a backend folded into their producer: {activation handle: producer handle}.

    An activation (relu, clamp...) whose handle no backend node carries, fed by a single node
    whose handle does, was fused into it (XNNPACK's output clamp): the producer's value is the
    activation's."""
    out: dict[int, int] = {}
    for node, lowered in program_nodes(program):
        handle = node.meta.get(DEBUG_HANDLE)
        if lowered is None or not isinstance(handle, int) or handle in present:
            continue
        if not re.search(r"relu|hardtanh|clamp|sigmoid|tanh|gelu", op_name(node)):
            continue
        args = [a for a in node.all_input_nodes if a.op == "call_function"]
        if len(args) == 1 and args[0].meta.get(DEBUG_HANDLE) in present:
            out[handle] = args[0].meta[DEBUG_HANDLE]
    return out


def handle_groups(gm: torch.fx.GraphModule) -> dict[int, list[str]]:
    """Handle -> names of the nodes carrying it, in graph order."""
    groups: dict[int, list[str]] = defaultdict(list)
    for node in gm.graph.nodes:
        handle = node.meta.get(DEBUG_HANDLE)
        if isinstance(handle, int):
            groups[handle].append(node.name)
    return dict(groups)
