"""``Verifier``: checks a memory plan (ExecuTorch's ``exir.memory_planning.Verifier``).

Two tensors may share bytes only when their lifetimes do not overlap (or one lives inside the
other's storage); graph inputs/outputs are planned exactly when the pass was asked to.
"""

from __future__ import annotations

import logging

import torch
from torch.export.graph_signature import ExportGraphSignature

from ..errors import MemoryPlanningError
from ..schema.program import TensorShapeDynamism
from .memory_planning import (
    _do_user_inputs_exist,
    _get_mutable_buffer_specs,
    _is_mutable_buffer,
    collect_specs_from_nodes,
    get_graph_input_tensors,
    get_graph_output_tensors,
    get_node_tensor_specs,
)
from .tensor import TensorSpec


class Verifier:
    def __init__(self, graph_module: torch.fx.GraphModule, alloc_graph_input: bool,
                 alloc_graph_output: bool, alloc_mutable_buffers: bool,
                 graph_signature: ExportGraphSignature | None = None) -> None:
        self.graph_module = graph_module
        self.graph_signature = graph_signature
        self.alloc_graph_input = alloc_graph_input
        self.alloc_graph_output = alloc_graph_output
        self.alloc_mutable_buffers = alloc_mutable_buffers

    @classmethod
    def mem_obj_id_match(cls, lhs_spec: TensorSpec, rhs_spec: TensorSpec,
                         accept_both_none: bool = True) -> bool:
        if lhs_spec.mem_id != rhs_spec.mem_id:
            return False
        if lhs_spec.mem_obj_id is None and rhs_spec.mem_obj_id is None:
            return accept_both_none
        return lhs_spec.mem_obj_id == rhs_spec.mem_obj_id

    @classmethod
    def _storage_root_chain(cls, spec: TensorSpec) -> set[TensorSpec]:
        """``spec`` and every spec whose storage it lives in."""
        chain: set[TensorSpec] = set()
        while spec is not None:
            if spec in chain:
                raise MemoryPlanningError("circular storage_base chain of tensor specs")
            chain.add(spec)
            spec = spec.storage_base
        return chain

    @classmethod
    def has_overlap(cls, lhs_ivl: list[int], rhs_ivl: list[int]) -> bool:
        """Whether two inclusive intervals intersect (an empty interval meets nothing)."""
        if lhs_ivl[0] > lhs_ivl[1] or rhs_ivl[0] > rhs_ivl[1]:
            return False
        return lhs_ivl[0] <= rhs_ivl[1] and rhs_ivl[0] <= lhs_ivl[1]

    @classmethod
    def lifetime_overlap(cls, lhs_spec: TensorSpec, rhs_spec: TensorSpec) -> bool:
        for spec in (lhs_spec, rhs_spec):
            if None in spec.lifetime:
                raise MemoryPlanningError(f"{spec} has no lifetime; run memory planning first")
        return cls.has_overlap(lhs_spec.lifetime, rhs_spec.lifetime)

    @classmethod
    def storage_overlap(cls, lhs_spec: TensorSpec, rhs_spec: TensorSpec) -> bool:
        if lhs_spec.mem_id != rhs_spec.mem_id:
            return False
        intervals = []
        for spec in (lhs_spec, rhs_spec):
            if not isinstance(spec.mem_offset, int) or spec.mem_offset < 0:
                raise MemoryPlanningError(f"{spec} has no memory offset; run memory planning first")
            intervals.append([spec.mem_offset, spec.mem_offset + spec.allocated_memory - 1])
        return cls.has_overlap(*intervals)

    @staticmethod
    def _describe(lhs: TensorSpec, rhs: TensorSpec) -> str:
        return (f"lhs life time: {lhs.lifetime}, rhs lifetime: {rhs.lifetime} lhs: mem_id "
                f"{lhs.mem_id} storage: {lhs.mem_offset}, {lhs.allocated_memory} rhs: mem_id "
                f"{rhs.mem_id} storage: {rhs.mem_offset}, {rhs.allocated_memory}")

    def verify_storage_reuse(self, allow_lifetime_and_storage_overlap: bool = False) -> int:
        """Raise if two tensors alive together share bytes; returns how many pairs of tensors
        share bytes (at different times)."""
        specs = list(collect_specs_from_nodes(
            self.graph_module.graph.nodes, self.graph_signature, ignore_const=True,
            ignore_graph_input=not self.alloc_graph_input,
            ignore_graph_output=not self.alloc_graph_output,
            ignore_mutable_buffers=not self.alloc_mutable_buffers,
            do_assertion=False, ignore_out_var_node=False, dedup=True))
        pairs = 0
        for i, lhs in enumerate(specs):
            for rhs in specs[i + 1:]:
                if (lhs.mem_obj_id is None) != (rhs.mem_obj_id is None):
                    raise MemoryPlanningError(
                        "tensor specs disagree on whether mem_obj_id is set: plan them with one "
                        "algorithm run")
                if not self.storage_overlap(lhs, rhs):
                    continue
                if not allow_lifetime_and_storage_overlap and self.lifetime_overlap(lhs, rhs):
                    nested = lhs in self._storage_root_chain(rhs) or \
                        rhs in self._storage_root_chain(lhs)
                    if not nested:
                        raise MemoryPlanningError(
                            f"unexpected storage overlap: {self._describe(lhs, rhs)}")
                if not self.mem_obj_id_match(lhs, rhs):
                    raise MemoryPlanningError(
                        f"tensors sharing bytes are in different shared objects: {lhs}, {rhs}")
                pairs += 1
        return pairs

    def verify_graph_input_output(self) -> None:  # noqa: C901 -- ExecuTorch's checks, in order
        """Graph inputs (outputs) are planned iff ``alloc_graph_input`` (``_output``)."""
        gm, gs = self.graph_module, self.graph_signature
        nodes = gm.graph.nodes
        shared = get_graph_input_tensors(nodes, gs) & get_graph_output_tensors(nodes)
        if shared and self.alloc_graph_input != self.alloc_graph_output:
            logging.debug("graph inputs are also outputs while their allocation options differ")
            return
        ops = {"placeholder", "output"} & {n.op for n in nodes}
        assert "output" in ops, f"graph module has no output: {gm}"
        mutable = _get_mutable_buffer_specs(nodes, gs)
        input_allocated = output_allocated = None
        unbound_input = unbound_output = False
        for node in nodes:
            if node.op not in ops or _is_mutable_buffer(node, gs):
                continue
            specs = get_node_tensor_specs(node)
            if not specs:
                continue
            specs = [s for s in specs if not s.const and s not in mutable]
            if not specs:
                output_allocated = self.alloc_graph_output  # only constants: nothing to plan
                continue
            allocated = any(s.mem_offset is not None for s in specs)
            assert all(s.mem_offset is not None for s in specs) == allocated, \
                "Either all or non of the tensors should be allocated memory"
            unbound = any(s.shape_dynamism == TensorShapeDynamism.DYNAMIC_UNBOUND for s in specs)
            if node.op == "placeholder":
                input_allocated = allocated
                unbound_input |= unbound
            else:
                output_allocated = allocated
                unbound_output |= unbound
        if "placeholder" in ops and _do_user_inputs_exist(gs):
            assert input_allocated is not None, "graph_input_allocated not set"
            if not unbound_input:
                assert input_allocated == self.alloc_graph_input, \
                    f"Misallocate graph input: {input_allocated} v.s. {self.alloc_graph_input}"
        assert output_allocated is not None, "graph_output_allocated not set"
        if not unbound_output:
            assert output_allocated == self.alloc_graph_output, \
                f"Misallocate graph output {output_allocated} v.s. {self.alloc_graph_output}"
