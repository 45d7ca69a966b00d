"""``to_backend`` in ExecuTorch's two forms.

* ``to_backend(backend_id, edge_program, compile_specs) -> LoweredBackendModule``: the whole
  program goes to one backend.
* ``to_backend(edge_program, partitioner) -> ExportedProgram``: the partitioner tags nodes;
  each tag becomes a delegated subgraph; the rest stays for the portable runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import singledispatch

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ...errors import ExportError
from ...util import progress
from .backend_details import PreprocessResult, get_backend_details
from .canonical_partitioners.duplicate_constant_node_pass import maybe_duplicate_constant_nodes
from .compile_spec_schema import CompileSpec
from .copying import copy_graph
from .lowered_backend_module import LoweredBackendModule
from .partitioner import TAG, Partitioner, PartitionResult
from .subgraph import Owner, lower_tag, rebuild

logger = logging.getLogger(__name__)

# ExecuTorch's switch: the check that a partitioner left the graph as it was can be turned off
# where it was measured to cost too much (its tester turns it off around every partition).
_ENABLE_VALIDATION = True
_WEIGHT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def disable_validation() -> None:
    """Stop checking that partitioners leave the graph unchanged (ExecuTorch's name)."""
    global _ENABLE_VALIDATION
    _ENABLE_VALIDATION = False


@contextmanager
def validation_disabled() -> Iterator[None]:
    """Within the block, partitioners are not checked for changing the graph."""
    global _ENABLE_VALIDATION
    before = _ENABLE_VALIDATION
    _ENABLE_VALIDATION = False
    try:
        yield
    finally:
        _ENABLE_VALIDATION = before


@singledispatch
def to_backend(*args, **kwargs):
    """``to_backend(backend_id: str, edge_program, compile_specs) -> LoweredBackendModule`` or
    ``to_backend(edge_program, partitioner) -> ExportedProgram``."""
    raise TypeError(
        f"to_backend() takes (backend_id: str, edge_program, compile_specs) or "
        f"(edge_program, partitioner); got a {type(args[0]).__name__ if args else 'nothing'} "
        "first")


@to_backend.register
def _(backend_id: str, edge_program: ExportedProgram,
      compile_specs: list[CompileSpec]) -> LoweredBackendModule:
    if not isinstance(edge_program, ExportedProgram):
        raise TypeError(f"to_backend({backend_id!r}, ...) needs an ExportedProgram, got "
                        f"{type(edge_program).__name__}")
    cls = get_backend_details(backend_id)
    program = cls.copy_exported_program_for_preprocess(edge_program, compile_specs)
    result = cls.preprocess(program, compile_specs)
    if not isinstance(result, PreprocessResult):
        raise ExportError(f"{backend_id}.preprocess returned {type(result).__name__}; it must "
                          "return PreprocessResult(processed_bytes=...)")
    lowered = LoweredBackendModule(edge_program, backend_id, result.processed_bytes,
                                   compile_specs, result.data_store_output)
    lowered.meta = {"debug_handle_map": result.debug_handle_map}
    return lowered


@to_backend.register
def _(edge_program: ExportedProgram, partitioner: Partitioner) -> ExportedProgram:
    working = copy_graph(edge_program)
    before = _fingerprint(working.graph_module) if _ENABLE_VALIDATION else None
    result = partitioner(working)
    if not isinstance(result, PartitionResult) or result.partition_tags is None:
        raise ExportError(f"{type(partitioner).__name__}.partition must return "
                          "PartitionResult(tagged_exported_program, partition_tags)")
    tagged = result.tagged_exported_program
    if before is None:
        logger.warning("Disabled validating the partitioner.")
    elif _fingerprint(tagged.graph_module) != before:
        raise ExportError(f"{type(partitioner).__name__} changed the graph; a partitioner may "
                          "only set node.meta['delegation_tag']")
    unknown = {n.meta[TAG] for n in tagged.graph.nodes
               if n.meta.get(TAG) is not None} - set(result.partition_tags)
    if unknown:
        raise ExportError(f"{type(partitioner).__name__} tagged nodes with {sorted(unknown)} "
                          "but partition_tags has no DelegationSpec for them")
    for tag in result.partition_tags:
        maybe_duplicate_constant_nodes(tagged, tag)
    owner = Owner.of(tagged)
    lowered_any = False
    tags = result.partition_tags.items()
    for tag, spec in progress.bar(tags, desc=f"lowering ({type(partitioner).__name__})",
                                  total=len(tags), unit="partition"):
        lowered_any |= lower_tag(owner, tag, spec, to_backend)
    if not lowered_any:
        logger.info("%s delegated nothing", type(partitioner).__name__)
    return rebuild(owner)


def _get_node_list_with_same_tag(tagged_graph_module: torch.fx.GraphModule, tag: str,
                                 owning_program: ExportedProgram) -> list[torch.fx.Node]:
    """The nodes tagged ``tag``, in graph order (ExecuTorch's helper, kept under its name for
    callers that cut a partition out by hand). A tagged output node, a tagged user input, or
    a tagged weight read outside the partition is an error."""
    specs = {s.arg.name: s for s in owning_program.graph_signature.input_specs
             if hasattr(s.arg, "name")}
    nodes = []
    for node in tagged_graph_module.graph.nodes:
        if node.meta.get(TAG) != tag:
            continue
        if node.op == "output":
            raise ExportError(f"the output node is tagged {tag!r}; tag only the nodes that "
                              "compute values")
        if node.op == "placeholder":
            spec = specs.get(node.name)
            if spec is None or spec.kind not in _WEIGHT_KINDS:
                raise ExportError(f"placeholder %{node.name} is a user input but is tagged "
                                  f"{tag!r}; only parameters, buffers and constants may be")
            outside = [u.name for u in node.users if u.meta.get(TAG) != tag]
            if outside:
                raise ExportError(f"weight %{node.name} is tagged {tag!r} but also used by "
                                  f"{outside} outside the partition")
        nodes.append(node)
    return nodes


def _fingerprint(gm: torch.fx.GraphModule) -> list[tuple]:
    return [(n.op, n.name, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes]
