"""The memory-planning behaviours ExecuTorch's ``exir/tests/test_memory_planning.py`` checks,
on edgetorch's planner: reuse (greedy) or none (naive), graph inputs/outputs left to the
runtime, extra arenas by ``mem_id``, mutable buffers alive for the whole method, constants
never planned -- each program also run and compared with eager torch."""

from __future__ import annotations

import pytest
import torch
from torch.export import export

from edgetorch.exir import ExecutorchBackendConfig, MemoryPlanningPass, to_edge
from edgetorch.runtime import Runtime


class Toy(torch.nn.Module):
    def forward(self, a, b):
        o = a
        for _ in range(10):
            o = o * a
            o = o + b
        return o


class Stateful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(4))

    def forward(self, x):
        self.state.add_(x)
        return (self.state * 2).relu() + x


class WithWeight(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x).relu()


def _lower(model, inputs, **mp):
    prog = to_edge(export(model, inputs, strict=True)).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(**mp)))
    return prog, prog.memory_plan("forward")


def _run(prog, inputs):
    return Runtime.get().load_program(prog.buffer).load_method("forward").execute(list(inputs))


def _overlaps(plan):
    specs = [s for s in plan.specs if s.mem_offset is not None]
    for i, a in enumerate(specs):
        for b in specs[i + 1:]:
            same_bytes = (a.mem_id == b.mem_id and a.mem_offset < b.mem_offset + b.allocated_memory
                          and b.mem_offset < a.mem_offset + a.allocated_memory)
            if same_bytes:
                yield a, b


@pytest.mark.parametrize("algo,reuse", [("naive", False), ("greedy", True)])
def test_reuse_and_no_live_overlap(algo, reuse):
    inputs = (torch.randn(10), torch.randn(10))
    prog, plan = _lower(Toy(), inputs, memory_planning_algo=algo)
    shared = list(_overlaps(plan))
    assert bool(shared) == reuse
    for a, b in shared:  # bytes are shared only by tensors never alive together
        assert a.lifetime[1] < b.lifetime[0] or b.lifetime[1] < a.lifetime[0]
    torch.testing.assert_close(_run(prog, inputs)[0], Toy()(*inputs))


@pytest.mark.parametrize("alloc_in,alloc_out", [(True, True), (False, True), (True, False),
                                                (False, False)])
def test_graph_inputs_and_outputs_can_be_left_to_the_runtime(alloc_in, alloc_out):
    inputs = (torch.randn(10), torch.randn(10))
    prog, _ = _lower(Toy(), inputs, alloc_graph_input=alloc_in, alloc_graph_output=alloc_out)
    meta = Runtime.get().load_program(prog.buffer).metadata("forward")
    assert all(meta.input_tensor_meta(i).is_memory_planned() == alloc_in for i in range(2))
    assert meta.output_tensor_meta(0).is_memory_planned() == alloc_out
    torch.testing.assert_close(_run(prog, inputs)[0], Toy()(*inputs))


class TwoPools(MemoryPlanningPass):
    """ExecuTorch's custom-pool recipe: set ``spec.mem_id`` before planning."""

    def run(self, graph_module, graph_signature=None):
        for node in graph_module.graph.nodes:
            spec = node.meta.get("spec")
            if node.op == "call_function" and node.target == torch.ops.aten.add.out:
                spec.mem_id = 3
            elif node.op == "placeholder" or node.target == torch.ops.aten.mul.out:
                spec.mem_id = 1
        return super().run(graph_module, graph_signature)


def test_specs_placed_in_their_mem_id_arena():
    class M(torch.nn.Module):
        def forward(self, a):
            b = a + a
            c = a * b
            d = c + b
            return c * d

    a = torch.randn(4)
    prog = to_edge(export(M(), (a,), strict=True)).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=TwoPools()))
    plan = prog.memory_plan("forward")
    assert {s.mem_id for s in plan.specs} == {1, 3}
    assert len(plan.buffer_sizes) == 4 and plan.buffer_sizes[2] == 0
    assert plan.buffer_sizes[1] > 0 and plan.buffer_sizes[3] > 0
    torch.testing.assert_close(_run(prog, (a,))[0], M()(a))


def test_mutable_buffer_lives_for_the_whole_method_and_keeps_state():
    x = torch.randn(4)
    prog, plan = _lower(Stateful(), (x,))
    n = max(s.lifetime[1] for s in plan.specs)
    buffers = [s for s in plan.specs if s.fqn == "state"]
    assert buffers and all(s.lifetime == [0, n] for s in buffers)
    method = Runtime.get().load_program(prog.buffer).load_method("forward")
    eager = Stateful()
    for _ in range(3):
        torch.testing.assert_close(method.execute([x])[0], eager(x))


def test_constants_are_not_planned():
    x = torch.randn(2, 4)
    prog, plan = _lower(WithWeight(), (x,))
    assert not any(s.const for s in plan.specs)
    assert all(s.mem_offset is not None for s in plan.specs)
    torch.testing.assert_close(_run(prog, (x,))[0], WithWeight()(x))
