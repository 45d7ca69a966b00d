"""User passes, as ExecuTorch users write them.

``ExportPass`` re-runs the graph on its fake values and rebuilds it node by node through
overridable hooks, so a pass is a few lines: ``call_operator(op, args, kwargs, meta)`` returns
``super().call_operator(other_op, ...)`` to retarget a node (1 -> 1), several such calls
chained for a decomposition (1 -> N), or one of its ``args`` to drop it (1 -> 0). Each new
node gets the metadata (stack trace, module stack, debug handle) of the node it replaces and
a fresh fake value. The tracer is torch's own export pass base, which ExecuTorch's
``ExportPass`` also follows; ``PassBase``/``PassResult`` are torch.fx's.

:func:`run_passes` runs a list of user passes (``ExportPass``, ``PassBase``, or any callable
``gm -> PassResult | GraphModule | None``) on an ``ExportedProgram`` in place, adopting
rebuilt graphs into the program and its signature.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch._export.pass_base import Argument as Argument  # ExecuTorch's name for any node argument
from torch._export.pass_base import _ExportPassBaseDeprecatedDoNotUse
from torch._export.pass_infra.node_metadata import NodeMetadata
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..errors import EdgeTorchError, PassError
from . import memory
from .backend.lowered_backend_module import LoweredBackendModule
from .pass_infra import (  # noqa: F401  (ExecuTorch's import path)
    ExportedProgramPassBase,
    ExportedProgramPassResult,
    ExportPassBaseError,
    ProxyValue,
)

__all__ = ["ExportPass", "ExportPassBaseError", "ExportedProgramPassBase",
           "ExportedProgramPassResult", "NodeMetadata", "PassBase", "PassResult", "ProxyValue",
           "map_args", "run_passes"]


def map_args(op: OpOverload, fn: Callable[[Any, torch.Argument], Any], args: tuple,
             kwargs: dict) -> tuple[tuple, dict]:
    """``fn(value, schema_argument)`` applied to each argument of a call of ``op`` that is
    given (by name in ``kwargs``, or by position unless keyword-only); new args and kwargs."""
    new_args, new_kwargs = list(args), dict(kwargs)
    for i, schema_arg in enumerate(op._schema.arguments):
        if schema_arg.name in new_kwargs:
            new_kwargs[schema_arg.name] = fn(new_kwargs[schema_arg.name], schema_arg)
        elif not schema_arg.kwarg_only and i < len(new_args):
            new_args[i] = fn(new_args[i], schema_arg)
    return tuple(new_args), new_kwargs


def retarget_calls(graph_module: torch.fx.GraphModule, new_target: Callable[[Any], Any]) -> bool:
    """Set each ``call_function`` node's target to ``new_target(target)`` (the same object:
    unchanged) in ``graph_module`` and every graph nested in it; recompile what changed.
    Whether anything did."""
    changed = False
    for mod in graph_module.modules():
        if not isinstance(mod, torch.fx.GraphModule):
            continue
        touched = False
        for node in mod.graph.nodes:
            if node.op == "call_function":
                new = new_target(node.target)
                if new is not node.target:
                    node.target, touched = new, True
        if touched:
            mod.recompile()
            changed = True
    return changed


class _Tracer(_ExportPassBaseDeprecatedDoNotUse.ExportTracer):
    def create_arg(self, a):
        # Delegates keep ExecuTorch's attribute names (``lowered_module_N``).
        if isinstance(a, LoweredBackendModule) and a not in self.submodules:
            name = f"lowered_module_{len(self.submodules)}"
            self.root.add_module(name, a)
            self.submodules[a] = name
        return super().create_arg(a)


class ExportPass(_ExportPassBaseDeprecatedDoNotUse):
    """Interpreter-based pass: override ``call_operator`` (and ``placeholder``, ``output``,
    ``call_submodule``, ``call_getitem``, ``call_cond``, ``call_sym``) to rewrite the graph.
    Calling the pass on a graph module returns ``PassResult(new_graph_module, True)``.
    Delegated subgraphs (``executorch_call_delegate``) are kept as they are."""

    class ExportInterpreter(_ExportPassBaseDeprecatedDoNotUse.ExportInterpreter):
        def call_module(self, target, args, kwargs):  # type: ignore[no-untyped-def]
            # ``ExportedProgram.module()`` adds a call to its input checks, ``_guards_fn``,
            # unless torch sees "executorch" in a caller's file name; it computes nothing
            # the graph uses, so replay drops it.
            if target == "_guards_fn":
                return None
            return super().call_module(target, args, kwargs)

        def call_function(self, target, args, kwargs):  # type: ignore[no-untyped-def]
            # A buffer a pass planned itself (a kernel's scratch) is kept, as ExecuTorch's
            # ExportPass keeps ``memory.alloc`` calls.
            if target is memory.alloc:
                meta = NodeMetadata(self.node.meta)
                return self.callback._fx("call_function", target, args, kwargs, meta)
            return super().call_function(target, args, kwargs)

    ExportTracer = _Tracer

    # torch's base class builds its own ProxyValue; passes see ExecuTorch's stricter one.
    def _fx(self, *args, **kwargs) -> ProxyValue:  # type: ignore[no-untyped-def]
        res = super()._fx(*args, **kwargs)
        return ProxyValue(res.data, res.proxy_or_node)

    def placeholder(self, name: str, arg, meta: NodeMetadata) -> ProxyValue:  # type: ignore[no-untyped-def]
        res = super().placeholder(name, arg, meta)
        return ProxyValue(res.data, res.proxy_or_node)

    def call_getitem(self, value, key: int, meta: NodeMetadata):  # type: ignore[no-untyped-def]
        # A pass that replaced a multi-result operator by several nodes returns them as a
        # tuple: its readers take the element itself, not a getitem of a tuple literal.
        if isinstance(value, (tuple, list)):
            return value[key]
        return super().call_getitem(value, key, meta)

    def should_preserve_symbolic_input_metadata(self) -> bool:
        """Whether replaying the graph must keep each input's symbolic sizes (override to
        return False in a pass that changes them on purpose)."""
        return True

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        before = _symbolic_inputs(graph_module)
        result = super().call(graph_module)
        if self.should_preserve_symbolic_input_metadata() and any(before):
            after = _symbolic_inputs(result.graph_module)
            for i, shape in enumerate(before):
                if shape is not None and (i >= len(after) or after[i] != shape):
                    # A size baked to one example would make the program wrong for others.
                    raise ExportPassBaseError(
                        f"Input at position {i} did not preserve symbolic metadata across "
                        f"pass replay (sizes {list(shape)} became "
                        f"{list(after[i]) if i < len(after) and after[i] else 'static'}); keep "
                        "the placeholder's meta['val'], or override "
                        "should_preserve_symbolic_input_metadata() to return False")
        # The rebuilt module keeps what export recorded on the graph module.
        for key, value in graph_module.meta.items():
            result.graph_module.meta.setdefault(key, value)
        _keep_constant_values(graph_module, result.graph_module)
        return result


def _keep_constant_values(old: torch.fx.GraphModule, new: torch.fx.GraphModule) -> None:
    """A fake input standing for a known constant keeps its fake value (its constant and its
    symbolic sizes) after replay, which otherwise runs on the constant itself."""
    pairs = zip(old.graph.find_nodes(op="placeholder"), new.graph.find_nodes(op="placeholder"))
    for before, after in pairs:
        a = before.meta.get("val")
        if getattr(a, "constant", None) is not None:
            after.meta["val"] = a


def _symbolic_inputs(gm: torch.fx.GraphModule) -> list[tuple[str | None, ...] | None]:
    """Per placeholder, its sizes with symbolic ones as strings (None: nothing symbolic, or a
    tensor standing for a constant)."""
    found: list[tuple[str | None, ...] | None] = []
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        shape = None
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            shape = (str(val),)
        elif isinstance(val, torch.Tensor) and getattr(val, "constant", None) is None:
            dims = tuple(str(d) if isinstance(d, torch.SymInt) else None for d in val.shape)
            shape = dims if any(d is not None for d in dims) else None
        found.append(shape)
    return found


def pass_name(p: object) -> str:
    return p.__name__ if inspect.isfunction(p) else type(p).__name__


def run_passes(ep: ExportedProgram, passes: list, method: str = "forward") -> bool:
    """Run user passes on ``ep`` in order; a failure names the pass and the ones before it."""
    changed = False
    for i, p in enumerate(passes):
        try:
            result = p(ep.graph_module)
        except EdgeTorchError:
            raise
        except Exception as e:
            before = ", ".join(pass_name(q) for q in passes[:i]) or "none"
            raise PassError(
                f"method {method!r}: pass {pass_name(p)} failed: {type(e).__name__}: {e}\n"
                f"  passes that ran before it: {before}\n"
                "  Try: check that the pass keeps every node's meta['val'] (ExportPass does) "
                "and returns a PassResult.") from e
        gm = result.graph_module if hasattr(result, "graph_module") else result
        if isinstance(gm, torch.fx.GraphModule) and gm is not ep.graph_module:
            adopt_graph_module(ep, gm)
        changed = changed or getattr(result, "modified", True)
        ep.graph_module.recompile()
    return changed


def adopt_graph_module(ep: ExportedProgram, gm: torch.fx.GraphModule) -> None:
    """Make ``gm`` (a pass's rebuilt graph) ``ep``'s graph: the signature's inputs follow its
    placeholders in order, its outputs follow the output node's arguments."""
    sig = ep.graph_signature
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(sig.input_specs):
        raise PassError(
            f"a pass changed the number of graph inputs ({len(sig.input_specs)} -> "
            f"{len(placeholders)}); passes may rewrite operators but not the signature")
    sig.input_specs[:] = [_renamed(spec, ph) for spec, ph in zip(sig.input_specs, placeholders)]
    outputs = list(gm.graph.output_node().args[0])
    if len(outputs) != len(sig.output_specs):
        raise PassError(
            f"a pass changed the number of graph outputs ({len(sig.output_specs)} -> "
            f"{len(outputs)}); passes may rewrite operators but not the signature")
    sig.output_specs[:] = [_renamed(spec, out) for spec, out in zip(sig.output_specs, outputs)]
    for key, value in ep.graph_module.meta.items():
        gm.meta.setdefault(key, value)
    ep._graph_module = gm  # ExportedProgram has no public setter (ExecuTorch does the same)


def _renamed(spec, node: object):
    arg = spec.arg
    if isinstance(node, torch.fx.Node) and hasattr(arg, "name") and arg.name != node.name:
        return dataclasses.replace(spec, arg=dataclasses.replace(arg, name=node.name))
    return spec
