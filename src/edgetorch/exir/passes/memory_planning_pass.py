"""``MemoryPlanningPass``: lifetimes of the method's tensors, then an algorithm places them.

Same constructor as ExecuTorch's. The result goes where ExecuTorch puts it, in
``graph_module.meta["non_const_buffer_sizes"]`` (and the full ``MemoryPlan`` in
``graph_module.meta["memory_plan"]``), with ``mem_id``/``mem_offset`` on each spec.
To place some tensors in another arena (e.g. SRAM), subclass and set ``spec.mem_id`` on the
specs before calling ``super().run``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
from torch.export.graph_signature import ExportGraphSignature, InputKind
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..memory_planning import ALGORITHMS, MemoryPlan, plan
from ..ops import is_cond
from ..tensor import ALIGNMENT, TensorSpec
from .spec_prop import root


def _specs_of(node: torch.fx.Node) -> list[TensorSpec]:
    spec = node.meta.get("spec")
    if isinstance(spec, TensorSpec):
        return [spec]
    if isinstance(spec, (tuple, list)):
        return [s for s in spec if isinstance(s, TensorSpec)]
    return []


def compute_lifetimes(gm: torch.fx.GraphModule) -> list[TensorSpec]:
    """Set ``spec.lifetime`` on every root spec; returns the root specs in node order."""
    nodes = list(gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    roots: dict[int, TensorSpec] = {}
    for node in nodes:
        if node.op == "output":
            continue
        for spec in _specs_of(node):
            r = root(spec)
            if id(r) not in roots:
                roots[id(r)] = r
                start = 0 if node.op == "placeholder" else index[node]
                r.lifetime = [start, start]
            last = max((index[u] for u in node.users), default=index[node])
            # getitem users are just names for one of the outputs: look through them.
            for user in node.users:
                if user.target is operator.getitem:
                    last = max([last] + [index[u] for u in user.users])
            r.lifetime[1] = max(r.lifetime[1], last)
        if is_cond(node):
            _branch_lifetimes(gm, node, index[node], roots)
    return list(roots.values())


def _branch_lifetimes(root_gm: torch.fx.GraphModule, node: torch.fx.Node, at: int,
                      roots: dict[int, TensorSpec]) -> None:
    """Everything a branch computes lives at the cond's position (conservative: the tensors of
    a branch never share bytes with each other or with anything alive across the cond)."""
    for attr in node.args[1:3]:
        branch = getattr(root_gm, attr.target)
        for inner in branch.graph.nodes:
            for spec in _specs_of(inner):
                r = root(spec)
                if id(r) not in roots:
                    roots[id(r)] = r
                    r.lifetime = [at, at]
                else:
                    r.lifetime = [min(r.lifetime[0], at), max(r.lifetime[1], at)]
            if is_cond(inner):
                _branch_lifetimes(branch, inner, at, roots)


class MemoryPlanningPass(PassBase):
    def __init__(
        self,
        memory_planning_algo: str | Callable = "greedy",
        allow_lifetime_and_storage_overlap: bool = False,
        alloc_graph_input: bool = True,
        alloc_graph_output: bool = True,
        alloc_mutable_buffers: bool = True,
        alignment: int = ALIGNMENT,
    ) -> None:
        super().__init__()
        if isinstance(memory_planning_algo, str) and memory_planning_algo not in ALGORITHMS:
            raise ValueError(
                f"unknown memory_planning_algo {memory_planning_algo!r}; "
                f"choose one of {sorted(ALGORITHMS)} or pass a callable(specs, alignment) -> size"
            )
        self.memory_planning_algo = memory_planning_algo
        self.allow_lifetime_and_storage_overlap = allow_lifetime_and_storage_overlap
        self.alloc_graph_input = alloc_graph_input
        self.alloc_graph_output = alloc_graph_output
        self.alloc_mutable_buffers = alloc_mutable_buffers
        self.alignment = alignment

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return self.run(graph_module)

    def run(self, graph_module: torch.fx.GraphModule,
            graph_signature: ExportGraphSignature | None = None) -> PassResult:
        roots = compute_lifetimes(graph_module)
        self._persist_mutated(graph_module, graph_signature)
        excluded = self._excluded(graph_module, graph_signature)
        to_plan = [s for s in roots if not s.const and id(s) not in excluded]
        result: MemoryPlan = plan(to_plan, self.memory_planning_algo, self.alignment)
        graph_module.meta["non_const_buffer_sizes"] = result.buffer_sizes
        graph_module.meta["memory_plan"] = result
        return PassResult(graph_module, True)

    @staticmethod
    def _persist_mutated(gm: torch.fx.GraphModule, signature: ExportGraphSignature | None) -> None:
        """Mutable buffers (and mutated inputs) keep their bytes for the whole method -- and,
        being planned, across calls: nothing else may share them."""
        if signature is None:
            return
        mutated_fqns = set(signature.buffers_to_mutate.values())
        names = {s.arg.name for s in signature.input_specs
                 if s.kind == InputKind.BUFFER and s.target in mutated_fqns}
        names |= set(getattr(signature, "user_inputs_to_mutate", {}).values())
        end = len(gm.graph.nodes)
        for node in gm.graph.nodes:
            if node.op == "placeholder" and node.name in names:
                for spec in _specs_of(node):
                    root(spec).lifetime = [0, end]

    def _excluded(self, gm: torch.fx.GraphModule,
                  signature: ExportGraphSignature | None) -> set[int]:
        """Specs the runtime provides itself: unplanned inputs/outputs, delegate outputs."""
        excluded: set[int] = set()
        user_inputs = None
        mutable = set()
        if signature is not None:
            user_inputs = {s.arg.name for s in signature.input_specs if s.kind == InputKind.USER_INPUT}
            mutated = set(signature.buffers_to_mutate.values())
            mutable = {s.arg.name for s in signature.input_specs
                       if s.kind == InputKind.BUFFER and s.target in mutated}
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                is_user = node.name in user_inputs if user_inputs is not None else True
                skip = (is_user and not self.alloc_graph_input) or (
                    node.name in mutable and not self.alloc_mutable_buffers)
                if skip:
                    excluded.update(id(root(s)) for s in _specs_of(node))
            elif node.op == "output" and not self.alloc_graph_output:
                for arg in node.all_input_nodes:
                    if arg.op != "placeholder":
                        excluded.update(id(root(s)) for s in _specs_of(arg))
            elif node.meta.get("unplanned_outputs"):
                excluded.update(id(root(s)) for s in _specs_of(node))
        return excluded
