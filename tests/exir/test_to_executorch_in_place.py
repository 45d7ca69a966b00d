"""``to_executorch`` lowers the Edge programs in place, as ExecuTorch's does (its
``test_memory_planning.py::test_multiple_pools`` reads the plan back from the Edge manager),
and the llama example's ``CustomKVCache`` at ExecuTorch's import path
(``test_custom_kv_cache_shared_buffers``)."""

import copy

import torch

from edgetorch.exir import ExecutorchBackendConfig, to_edge
from edgetorch.exir.memory_planning import get_node_tensor_specs
from edgetorch.exir.passes import MemoryPlanningPass
from edgetorch.runtime import Runtime


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        return (x + y) * y


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(2))

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2


def _call_targets(ep):
    return [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]


def test_edge_program_holds_the_lowered_graph_and_plan():
    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    edge = to_edge(torch.export.export(AddMul(), inputs))
    before = copy.deepcopy(edge.exported_program())
    et = edge.to_executorch()
    ep = edge.exported_program()
    assert ep is et.exported_program()
    assert "aten.add.out" in _call_targets(ep) and "aten.mul.out" in _call_targets(ep)
    assert "aten.add.out" not in _call_targets(before)  # the copy kept the Edge graph
    specs = [s for n in ep.graph.nodes if n.op == "call_function"
             for s in get_node_tensor_specs(n) if s is not None]
    assert specs and all(s.mem_id is not None and s.mem_offset is not None for s in specs)
    assert ep.graph_module.meta["non_const_buffer_sizes"] == list(
        et.executorch_program.execution_plan[0].non_const_buffer_sizes)


def test_second_to_executorch_gives_the_same_program():
    x = torch.randn(2)
    for model, inputs in ((AddMul(), (x, x + 1)), (Counter(), (x,))):
        edge = to_edge(torch.export.export(model, inputs))
        first = edge.to_executorch().buffer
        second = edge.to_executorch().buffer
        assert first == second  # the buffer write-back is not inserted twice
        method = Runtime.get().load_program(second).load_method("forward")
        got = method.execute(list(inputs))
        torch.testing.assert_close(torch.as_tensor(got[0]), type(model)()(*inputs))


def test_custom_kv_cache_at_executorchs_path_shares_buffers_across_methods():
    from edgetorch.examples.models.llama.source_transformation.custom_kv_cache import (
        CustomKVCache,
    )

    class KV(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kv_cache = CustomKVCache(max_batch_size=1, max_context_length=8, n_heads=2,
                                          head_dim=4)

        def forward(self, input_pos, k, v):
            k_out, v_out = self.kv_cache.update(input_pos, k, v)
            return (k_out + v_out).sum(dim=-1)

    k, v = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4)
    pos = torch.tensor([3])
    eager = KV()
    want = eager(pos, k, v)
    edge = to_edge({"forward": torch.export.export(KV(), (pos, k, v))})
    et = edge.to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True),
        emit_mutable_buffer_names=True))
    plan = et.executorch_program.execution_plan[0]
    assert plan.non_const_buffer_sizes[2] == 2 * 1 * 8 * 2 * 4 * 4  # both caches, own arena
    got = Runtime.get().load_program(et.buffer).load_method("forward").execute([pos, k, v])
    torch.testing.assert_close(torch.as_tensor(got[0]), want)
    cache = eager.kv_cache.k_cache
    assert torch.equal(cache[0, 3], k[0, :, 0]) and not cache[0, :3].any()
