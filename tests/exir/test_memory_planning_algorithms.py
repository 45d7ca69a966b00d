"""ExecuTorch's planner API at its import paths (``exir.memory_planning``): the algorithms'
call shape and results, the suite, ``apply_algo`` (arenas per mem_id and per device), the
``Verifier``, graph-module passes, re-inplacing and mutable buffers shared across methods.
The plans are ExecuTorch 1.5.1's (numbers from its own tests); byte equality of whole files
is checked against ExecuTorch itself in tests/compat/test_compat_examples.py."""

from __future__ import annotations

import pytest
import torch
from test_memory_planning_options import Toy
from torch.export import export

from edgetorch.exir import ExecutorchBackendConfig, MemoryPlanningPass, to_edge
from edgetorch.exir.memory_planning import (
    MemoryPlanningAlgorithmSuite,
    Verifier,
    apply_algo,
    collect_specs_from_nodes,
    greedy,
    naive,
)
from edgetorch.exir.pass_manager import PassManager
from edgetorch.exir.passes import SpecPropPass, ToOutVarPass
from edgetorch.exir.passes.reinplace import reinplace_pass
from edgetorch.exir.schema import DeviceType
from edgetorch.exir.tensor import TensorSpec
from edgetorch.runtime import Runtime


class Pools(torch.nn.Module):
    def forward(self, a):
        b = a + a
        c = a * b
        d = c + b
        return c * d


class TwoPools(MemoryPlanningPass):
    """Placeholders and mul results in arena 1, add results in arena 3."""

    def run(self, graph_module, graph_signature=None):
        for node in graph_module.graph.nodes:
            if node.op == "placeholder":
                node.meta["spec"].mem_id = 1
            elif node.target == torch.ops.aten.add.out:
                node.meta["spec"].mem_id = 3
            elif node.target == torch.ops.aten.mul.out:
                node.meta["spec"].mem_id = 1
        return super().run(graph_module, graph_signature)


def _toy_graph():
    edge = to_edge(export(Toy(), (torch.randn(10), torch.randn(10)), strict=True))
    gm = edge.exported_program().graph_module
    gm = PassManager([SpecPropPass(), ToOutVarPass()])(gm).graph_module
    return gm, edge.exported_program().graph_signature


@pytest.mark.parametrize("algo,allocs,sizes", [
    (naive, [(1, 0), (3, 0), (1, 4), (3, 4), (1, 8)], [0, 12, 0, 8]),
    (greedy, [(1, 0), (3, 0), (1, 4), (3, 4), (1, 0)], [0, 8, 0, 8]),
])
def test_custom_arenas_give_executorchs_plan(algo, allocs, sizes):
    a = torch.randn(1)
    prog = to_edge(export(Pools(), (a,), strict=True)).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=TwoPools(MemoryPlanningAlgorithmSuite([algo]), alignment=1)))
    gm = prog.exported_program().graph_module
    got = [(n.meta["spec"].mem_id, n.meta["spec"].mem_offset) for n in gm.graph.nodes
           if n.op == "placeholder" or n.target in (torch.ops.aten.add.out, torch.ops.aten.mul.out)]
    assert sorted(got) == sorted(allocs)
    assert gm.meta["non_const_buffer_sizes"] == sizes
    Verifier(gm, True, True, True).verify_storage_reuse()
    out = Runtime.get().load_program(prog.buffer).load_method("forward").execute([a])[0]
    torch.testing.assert_close(out, Pools()(a))


def test_greedy_breaks_size_ties_in_reverse_collection_order():
    # Equal sizes, alive together: the last collected is placed first, at offset 0.
    small, a, b = (TensorSpec.from_tensor(torch.zeros(n)) for n in (1, 4, 4))
    for spec in (small, a, b):
        spec.lifetime = [0, 1]
    result = greedy(16, [small, a, b], None, None)
    assert [result.spec_dict[s].mem_offset for s in (small, a, b)] == [32, 16, 0]
    assert result.bufsizes == [0, 48]
    naive_result = naive(16, [small, a, b], None, None)
    assert [naive_result.spec_dict[s].mem_offset for s in (small, a, b)] == [0, 16, 32]


def test_suite_keeps_the_smaller_plan_and_writes_it_onto_the_specs():
    gm, gs = _toy_graph()
    # (naive first would start greedy's offsets after naive's bytes, as in ExecuTorch: naive
    # extends the arena list it is given, which greedy then reads as space set aside)
    MemoryPlanningPass(MemoryPlanningAlgorithmSuite([greedy, naive])).run(gm, gs)
    greedy_gm, _ = _toy_graph()
    MemoryPlanningPass(MemoryPlanningAlgorithmSuite([greedy])).run(greedy_gm, gs)
    naive_gm, _ = _toy_graph()
    MemoryPlanningPass(MemoryPlanningAlgorithmSuite([naive])).run(naive_gm, gs)
    sizes = gm.meta["non_const_buffer_sizes"]
    assert sizes == greedy_gm.meta["non_const_buffer_sizes"]
    assert sum(sizes) < sum(naive_gm.meta["non_const_buffer_sizes"])
    assert Verifier(gm, True, True, True, gs).verify_storage_reuse() > 0


def test_devices_get_arenas_of_their_own():
    gm, gs = _toy_graph()
    specs = list(collect_specs_from_nodes(gm.graph.nodes, gs, do_assertion=False))
    specs[-1].device, specs[-1].device_index = DeviceType.CUDA, 1
    sizes = apply_algo(MemoryPlanningAlgorithmSuite(), gm, 16, gs,
                       enable_non_cpu_memory_planning=True)
    assert len(sizes) == 3 and specs[-1].mem_id == 2 and specs[-1].mem_offset == 0
    (device,) = gm.meta["non_const_buffer_device"]
    assert (device.buffer_idx, device.device_type, device.device_index) == (2, DeviceType.CUDA, 1)
    specs[0].mem_id = 3
    with pytest.raises(NotImplementedError):
        apply_algo(MemoryPlanningAlgorithmSuite(), gm, 16, gs, enable_non_cpu_memory_planning=True)


def test_verifier_rejects_live_tensors_sharing_bytes():
    gm, gs = _toy_graph()
    apply_algo(MemoryPlanningAlgorithmSuite(), gm, 16, gs)
    specs = list(collect_specs_from_nodes(gm.graph.nodes, gs, do_assertion=False))
    a, b = next((a, b) for a in specs for b in specs
                 if a is not b and Verifier.lifetime_overlap(a, b))
    b.mem_offset, b.mem_obj_id = a.mem_offset, a.mem_obj_id
    with pytest.raises(Exception, match="storage overlap"):
        Verifier(gm, True, True, True, gs).verify_storage_reuse()


def test_reinplaced_index_put_writes_its_input():
    class M(torch.nn.Module):
        def forward(self, x, v):
            y = x * 2
            y = y.index_put((torch.tensor([0]),), v)
            return y + 1

    x, v = torch.randn(3), torch.randn(1)
    edge = to_edge(export(M(), (x, v), strict=True))
    ep = reinplace_pass(edge.exported_program())
    assert any(n.target == torch.ops.aten.index_put_.default for n in ep.graph.nodes)
    prog = to_edge(export(M(), (x, v), strict=True)).to_executorch(
        ExecutorchBackendConfig(run_reinplace_pass=True))
    gm = prog.exported_program().graph_module
    (put,) = [n for n in gm.graph.nodes if n.target == torch.ops.aten.index_put_.default]
    assert put.meta["spec"] is put.args[0].meta["spec"]  # no bytes of its own
    out = Runtime.get().load_program(prog.buffer).load_method("forward").execute([x, v])[0]
    torch.testing.assert_close(out, M()(x, v))


def test_shared_mutable_buffer_has_one_place_in_every_method():
    class State(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.zeros(2, 2))

        def forward(self, x):
            return self.state.add_(x).view(-1) * 2

    class Get(State):
        def forward(self):
            return self.state

    fwd = export(State(), (torch.ones(1),), strict=True)
    get = export(Get(), (), strict=True)
    prog = to_edge({"forward": fwd, "get_state": get}).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True)))
    for plan in prog.executorch_program.execution_plan:
        assert plan.non_const_buffer_sizes[2] == 16
        named = [v.val for v in plan.values if getattr(v.val, "extra_tensor_info", None)]
        assert [(t.allocation_info.memory_id, t.allocation_info.memory_offset) for t in named] \
            == [(2, 0)]
