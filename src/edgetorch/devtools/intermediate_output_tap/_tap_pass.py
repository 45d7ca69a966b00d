"""``tap_intermediate_outputs_``: after each node a rule selects, a ``tap.Tensor`` placeholder
whose value becomes one more user output of the program. The placeholder survives
``to_edge`` and partitioning (no backend takes it); ``strip_taps_`` then replaces it by its
reducer's operators, so a tap reads a value through delegates without any backend's help."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.exported_program import OutputKind, OutputSpec, TensorArgument

from . import custom_ops_lib  # noqa: F401  (defines tap.Tensor)
from ._reducers import STATS, StatReducer, get_reducer
from ._selectors import NodeSelector, select_all_call_function
from ._spec import TapSpec

TapRule = tuple[NodeSelector, "str | StatReducer"]

_TAP = torch.ops.executorch_devtools.tap.Tensor
_TAP_NAME = "executorch_devtools::tap.Tensor"
_PROVENANCE = ("from_node", "stack_trace", "nn_module_stack")


def is_tap_node(n: fx.Node) -> bool:
    """A ``tap.Tensor`` call, as ATen or as Edge operator."""
    if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
        return False
    return n.target._schema.name + "." + n.target._overloadname == _TAP_NAME


def find_tap_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    """The ``tap.Tensor`` nodes of ``gm``, in graph order."""
    return [n for n in gm.graph.nodes if is_tap_node(n)]


def _rules(rules: Sequence[TapRule] | TapRule | None) -> list[tuple[NodeSelector, StatReducer]]:
    if rules is None:
        rules = [(select_all_call_function(), STATS)]
    elif isinstance(rules, tuple) and len(rules) == 2 and callable(rules[0]):
        rules = [rules]  # one (selector, reducer) pair
    if not rules:
        raise ValueError("tap_intermediate_outputs_: `rules` must be non-empty")
    return [(selector, get_reducer(reducer)) for selector, reducer in rules]


def _module_of(node: fx.Node) -> tuple[str | None, str | None]:
    """The innermost module's path and class name, from export's ``nn_module_stack``."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None, None
    entry = list(stack.values())[-1]
    if not isinstance(entry, tuple):
        return str(entry), None
    path = entry[0] if entry else None
    kind = entry[1] if len(entry) > 1 else None
    if kind is None:
        return path, None
    name = getattr(kind, "__name__", None) or str(kind).rsplit(".", 1)[-1].rstrip("'>")
    return path, name


def tap_intermediate_outputs_(
    ep: ExportedProgram,
    rules: Sequence[TapRule] | TapRule | None = None,
    *,
    max_taps: int | None = None,
    error_on_empty: bool = True,
) -> tuple[ExportedProgram, list[TapSpec]]:
    """Tap ``ep`` in place: each call node the first matching ``(selector, reducer)`` rule
    selects (default: every call, with ``STATS``) gets a tap whose value is appended to the
    outputs; at most ``max_taps``. Returns ``ep`` and one :class:`TapSpec` per tap. No match
    raises ``ValueError`` (with ``error_on_empty=False``: a warning, and no taps)."""
    rules_list = _rules(rules)
    graph = ep.graph_module.graph
    output = graph.output_node()
    outputs = list(output.args[0])
    taps: list[fx.Node] = []
    specs: list[TapSpec] = []
    for node in [n for n in graph.nodes if n.op == "call_function" and not is_tap_node(n)]:
        reducer = next((r for selector, r in rules_list if selector(node)), None)
        if reducer is None:
            continue
        if max_taps is not None and len(specs) >= max_taps:
            break
        with graph.inserting_after(node):
            tap = graph.call_function(_TAP, (node, reducer.name))
        tap.meta.update({k: node.meta[k] for k in _PROVENANCE if k in node.meta})
        path, kind = _module_of(node)
        taps.append(tap)
        specs.append(TapSpec(node.name, str(node.target), len(outputs) + len(specs),
                             reducer.name, reducer.fields, node.meta.get("stack_trace"),
                             path, kind))
    if not taps:
        message = ("tap_intermediate_outputs_: no rule matched any node; check the rules' "
                   "selectors, or pass error_on_empty=False to get no taps")
        if error_on_empty:
            raise ValueError(message)
        warnings.warn(message, UserWarning, stacklevel=2)
        return ep, []
    output.args = (tuple(outputs + taps),)
    ep.graph_signature.output_specs.extend(
        OutputSpec(kind=OutputKind.USER_OUTPUT, arg=TensorArgument(name=t.name), target=None)
        for t in taps)
    _extend_root_out_spec(ep, len(taps))
    graph.eliminate_dead_code()
    ep.graph_module.recompile()
    return ep, specs


def _extend_root_out_spec(ep: ExportedProgram, extra: int) -> None:
    """Give the root call signature ``extra`` more output leaves (the user's output structure
    becomes a tuple of it and the taps), so re-tracing (``run_decompositions``) can unflatten
    the longer output list. Their names stay empty: the verifier checks only named outputs,
    and re-tracing renames the tap nodes."""
    for entry in ep._module_call_graph:
        if entry.fqn != "" or entry.signature is None:
            continue
        signature = entry.signature
        old = pytree.tree_unflatten([0] * signature.out_spec.num_leaves, signature.out_spec)
        old = old if isinstance(old, tuple) else (old,)
        signature.out_spec = pytree.tree_structure((*old, *([0] * extra)))
        signature.outputs.extend(TensorArgument(name="") for _ in range(extra))
        return
