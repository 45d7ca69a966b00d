"""``MemoryPlanningPass``: ExecuTorch's constructor and behaviour, on ``exir.memory_planning``.

``run(graph_module, graph_signature)`` plans the method (``apply_algo``): the arena sizes go to
``graph_module.meta["non_const_buffer_sizes"]``, ``mem_id``/``mem_offset`` onto each spec, and
(edgetorch) the whole :class:`MemoryPlan` to ``graph_module.meta["memory_plan"]``.
``memory_planning_algo`` is an algorithm suite (``MemoryPlanningAlgorithmSuite``, default:
greedy) or any callable of that shape; ``"greedy"``/``"naive"`` name a one-algorithm suite.
To place some tensors in another arena (e.g. SRAM), set ``spec.mem_id`` before planning.
``share_mutable_buffers=True`` gives every method's copy of a mutable buffer the same bytes in
arena 2 (``run_multimethod``, called once all methods are planned).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.export.graph_signature import ExportGraphSignature
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ...errors import MemoryPlanningError
from ..memory_planning import (
    ALGORITHMS,
    MemoryPlan,
    MemoryPlanningAlgorithmSuite,
    Verifier,
    _is_out_var_node,
    algo_name,
    apply_algo,
    collect_specs_from_nodes,
    filter_nodes,
    get_node_tensor_specs,
)
from ..tensor import ALIGNMENT, TensorSpec
from .spec_prop import root

__all__ = ["MemoryPlanningPass", "root"]


def _specs_of(node: torch.fx.Node) -> list[TensorSpec]:
    spec = node.meta.get("spec")
    if isinstance(spec, TensorSpec):
        return [spec]
    if isinstance(spec, (tuple, list)):
        return [s for s in spec if isinstance(s, TensorSpec)]
    return []


def _move_memory_meta_to_spec(node: torch.fx.Node) -> None:
    """``node.meta["_share_alloc_with_arg_idx"]`` (and ``_shared_alloc_offset``): the result
    lives inside that argument's storage, at that byte offset (``spec.storage_base``)."""
    idx = node.meta.get("_share_alloc_with_arg_idx")
    offset = node.meta.get("_shared_alloc_offset")
    if idx is None:
        if offset is not None:
            raise ValueError(f"{node.name}: _shared_alloc_offset is set but not "
                             "_share_alloc_with_arg_idx; set both")
        return
    offset = 0 if offset is None else offset
    if not isinstance(idx, int) or not isinstance(offset, int):
        raise TypeError(f"{node.name}: _share_alloc_with_arg_idx and _shared_alloc_offset must "
                        "be ints")
    spec = node.meta.get("spec")
    if not isinstance(spec, TensorSpec):
        raise TypeError(f"{node.name}: _share_alloc_with_arg_idx needs a single-tensor result")
    if not 0 <= idx < len(node.args):
        raise IndexError(f"{node.name}: _share_alloc_with_arg_idx={idx} is not an index of its "
                         f"{len(node.args)} positional arguments")
    arg = node.args[idx]
    base = arg.meta.get("spec") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(base, TensorSpec):
        raise TypeError(f"{node.name}: _share_alloc_with_arg_idx={idx} must name a tensor "
                        "argument")
    spec.storage_base, spec.storage_base_offset = base, offset


def _buffer_fqn(node: torch.fx.Node, gs: ExportGraphSignature) -> tuple[str | None, bool]:
    """(fqn, mutated) of a buffer placeholder; (None, False) for anything else."""
    if node.op != "placeholder" or not isinstance(node.target, str):
        return None, False
    fqn = gs.inputs_to_buffers.get(node.target)
    return fqn, fqn is not None and fqn in gs.buffers_to_mutate.values()


@dataclass
class _MemoryPlanningState:
    mutable_buffers: dict[str, set[TensorSpec]] = field(default_factory=dict)
    maybe_mutable_buffers: dict[str, set[TensorSpec]] = field(default_factory=dict)
    graph_modules: list[torch.fx.GraphModule] = field(default_factory=list)


class MemoryPlanningPass(PassBase):
    def __init__(
        self,
        memory_planning_algo: str | Callable[..., list[int]] | None = None,
        allow_lifetime_and_storage_overlap: bool = False,
        alloc_graph_input: bool = True,
        alloc_graph_output: bool = True,
        alloc_mutable_buffers: bool = True,
        share_mutable_buffers: bool = False,
        alignment: int = ALIGNMENT,
    ) -> None:
        super().__init__()
        if isinstance(memory_planning_algo, str):
            if memory_planning_algo not in ALGORITHMS:
                raise ValueError(
                    f"unknown memory_planning_algo {memory_planning_algo!r}; choose one of "
                    f"{sorted(ALGORITHMS)} or pass a MemoryPlanningAlgorithmSuite")
            memory_planning_algo = MemoryPlanningAlgorithmSuite([ALGORITHMS[memory_planning_algo]])
        if memory_planning_algo is None:
            memory_planning_algo = MemoryPlanningAlgorithmSuite()
        if share_mutable_buffers and not alloc_mutable_buffers:
            raise ValueError("share_mutable_buffers needs alloc_mutable_buffers=True (shared "
                             "buffers are planned in arena 2)")
        self.memory_planning_algo = memory_planning_algo
        self.allow_lifetime_and_storage_overlap = allow_lifetime_and_storage_overlap
        self.alloc_graph_input = alloc_graph_input
        self.alloc_graph_output = alloc_graph_output
        self.alloc_mutable_buffers = alloc_mutable_buffers
        self.share_mutable_buffers = share_mutable_buffers
        self.alignment = alignment
        self.state = _MemoryPlanningState()
        self.enable_non_cpu_memory_planning = False

    @staticmethod
    def _set_alloc_node_spec(graph_module: torch.fx.GraphModule) -> None:
        """The buffers an out-variant call writes hold its specs (one per out argument; a
        ``None`` out gets none), and ``_share_alloc_with_arg_idx`` meta puts its result
        inside an argument's storage."""
        for sub in graph_module.modules():
            if not isinstance(sub, torch.fx.GraphModule):
                continue
            for node in sub.graph.nodes:
                if not _is_out_var_node(node) or "spec" not in node.meta:
                    continue
                names = [a.name for a in node.target._schema.arguments if a.is_out]
                specs = get_node_tensor_specs(node)
                outs = [node.kwargs.get(n) for n in names]
                if len(outs) == 1 and isinstance(outs[0], (list, tuple)):
                    outs = list(outs[0])  # one Tensor[] out
                elif len(outs) == 1 and isinstance(outs[0], torch.fx.Node):
                    outs[0].meta["spec"] = node.meta["spec"]
                    _move_memory_meta_to_spec(node)
                    continue
                written = iter(specs)
                for out in outs:
                    if out is None:
                        warnings.warn(f"{node.target}'s out argument is None", stacklevel=1)
                        continue
                    out.meta["spec"] = next(written)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return self.run(graph_module)

    def run(self, graph_module: torch.fx.GraphModule,
            graph_signature: ExportGraphSignature | None = None) -> PassResult:
        self._set_alloc_node_spec(graph_module)
        sizes = apply_algo(
            self.memory_planning_algo, graph_module, self.alignment, graph_signature,
            self.alloc_graph_input, self.alloc_graph_output,
            # shared buffers are planned across methods, in run_multimethod
            self.alloc_mutable_buffers and not self.share_mutable_buffers,
            self.enable_non_cpu_memory_planning)
        if self.share_mutable_buffers and graph_signature is not None:
            self.state.graph_modules.append(graph_module)
            self._check_default_mem_ids(graph_module)
            self._record_buffers(graph_module, graph_signature)
        verifier = Verifier(graph_module, self.alloc_graph_input, self.alloc_graph_output,
                            self.alloc_mutable_buffers and not self.share_mutable_buffers,
                            graph_signature)
        verifier.verify_graph_input_output()
        if algo_name(self.memory_planning_algo) == "greedy":
            verifier.verify_storage_reuse(self.allow_lifetime_and_storage_overlap)
        planned = collect_specs_from_nodes(graph_module.graph.nodes, graph_signature,
                                           do_assertion=False)
        graph_module.meta["memory_plan"] = MemoryPlan(
            sizes, [s for s in planned if s.mem_offset is not None],
            _algorithm_label(self.memory_planning_algo))
        return PassResult(graph_module, True)

    @staticmethod
    def _check_default_mem_ids(gm: torch.fx.GraphModule) -> None:
        for node in gm.graph.nodes:
            for spec in collect_specs_from_nodes(
                    filter_nodes(itertools.chain([node], node.args, node.kwargs.values())), None,
                    ignore_const=False, ignore_out_var_node=False, dedup=False,
                    do_assertion=False, ignore_dynamic_unbound_tensor=False):
                if spec.mem_id not in (None, 1):
                    raise ValueError("share_mutable_buffers needs every other tensor in the "
                                     f"default arena 1; {spec} is in arena {spec.mem_id}")

    def _record_buffers(self, gm: torch.fx.GraphModule, gs: ExportGraphSignature) -> None:
        for node in gm.graph.nodes:
            fqn, mutated = _buffer_fqn(node, gs)
            if fqn is None:
                continue
            spec = get_node_tensor_specs(node)[0]
            if spec.mem_id is not None or spec.mem_offset is not None:
                raise ValueError(f"buffer {fqn!r} is already planned (mem_id {spec.mem_id}); "
                                 "share_mutable_buffers plans mutable buffers itself")
            # A buffer only read here may be mutated by another method: decided in
            # run_multimethod.
            book = self.state.mutable_buffers if mutated else self.state.maybe_mutable_buffers
            book.setdefault(fqn, set()).add(spec)

    def run_multimethod(self) -> None:
        """Give every method's spec of one mutable buffer the same place in arena 2."""
        if not self.share_mutable_buffers:
            return
        arena = 0
        for fqn, specs in self.state.mutable_buffers.items():
            specs = list(specs) + list(self.state.maybe_mutable_buffers.get(fqn, ()))
            for spec in specs:
                # Read-only here but mutated by another method: state, not a constant.
                spec.const = False
                spec.mem_id = 2
                spec.realign(self.alignment)
                spec.mem_offset = arena  # state persists: nothing else ever shares it
            arena += specs[0].allocated_memory
        for gm in self.state.graph_modules:
            sizes = gm.meta["non_const_buffer_sizes"]
            if len(sizes) != 2:
                raise MemoryPlanningError(
                    f"share_mutable_buffers needs the default single arena; this method has "
                    f"{len(sizes) - 1}. Drop the custom mem_ids or share_mutable_buffers.")
            sizes.append(arena)
            plan = gm.meta.get("memory_plan")
            if plan is not None:
                plan.buffer_sizes = sizes


def _algorithm_label(algo: Callable[..., object]) -> str:
    if isinstance(algo, MemoryPlanningAlgorithmSuite):
        return "+".join(algo_name(a) for a in algo.algo_list)
    return algo_name(algo)

