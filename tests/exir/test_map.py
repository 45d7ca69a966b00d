"""``torch.map`` (``map_impl``) end to end, as ExecuTorch 1.5.1 compiles it: ``to_edge`` accepts
it, the planner plans the body on its own (below the enclosing graph's tensors), the emitter
writes ExecuTorch's loop (``sym_size``, ``select_copy`` into the body's input, the body,
``et_copy_index``, a counter and a ``JumpFalseCall`` back), and the runtime runs it = eager.
ExecuTorch's own files are checked against ours in tests/compat/test_compat_map.py."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from torch._higher_order_ops.map import map as torch_map
from torch.export import Dim, export

from edgetorch.errors import UnsupportedOperatorError
from edgetorch.exir import EdgeCompileConfig, MemoryPlanningPass, to_edge
from edgetorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, Verifier, naive
from edgetorch.exir.pass_manager import PassManager
from edgetorch.exir.passes import SpecPropPass, ToOutVarPass
from edgetorch.exir.tensor import TensorSpec
from edgetorch.runtime import Runtime
from edgetorch.schema import program as S


class MapAdd(torch.nn.Module):
    """ExecuTorch's ``MapModel`` (exir/tests/test_memory_planning.py)."""

    def forward(self, x, y):
        return torch_map(lambda a, b: a + b, x, y) + y


class MultiMap(torch.nn.Module):
    """ExecuTorch's ``MultiMapModel``: three maps in a row."""

    def forward(self, x, y):
        for _ in range(3):
            x = torch_map(lambda a, b: a + b, x, y)
        return x


class MapLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x, y):
        return torch_map(lambda a, b: torch.relu(self.lin(a) * b.sum()), x, y)


def _method(model, inputs, **export_kwargs):
    et = to_edge(export(model, inputs, **export_kwargs)).to_executorch()
    return et, Runtime.get().load_program(et.buffer).load_method("forward")


@pytest.mark.parametrize("model", [MapAdd(), MultiMap(), MapLinear()], ids=lambda m: type(m).__name__)
def test_map_matches_eager_run_after_run(model):
    _, method = _method(model, (torch.randn(5, 3), torch.randn(3)))
    g = torch.Generator().manual_seed(1)
    for _ in range(3):  # the loop counter restarts and the output re-grows every run
        x, y = torch.randn(5, 3, generator=g), torch.randn(3, generator=g)
        got = method.execute([x.numpy(), y.numpy()])[0]
        with torch.no_grad():
            want = model(x, y).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_map_is_emitted_as_executorchs_loop():
    et, _ = _method(MapAdd(), (torch.randn(5, 3), torch.randn(3)))
    plan = et.executorch_program.execution_plan[0]
    ops = [f"{o.name}.{o.overload}" for o in plan.operators]
    assert ops == ["aten::sym_size.int", "aten::select_copy.int_out", "aten::add.out",
                   "executorch_prim::et_copy_index.tensor", "executorch_prim::add.Scalar",
                   "executorch_prim::eq.Scalar", "executorch_prim::sub.Scalar"]
    instrs = [i.instr_args for i in plan.chains[0].instructions]
    kinds = [ops[i.op_index] if isinstance(i, S.KernelCall) else type(i).__name__ for i in instrs]
    assert kinds == ["aten::sym_size.int", "aten::select_copy.int_out", "aten::add.out",
                     "executorch_prim::et_copy_index.tensor", "executorch_prim::add.Scalar",
                     "executorch_prim::eq.Scalar", "JumpFalseCall", "executorch_prim::sub.Scalar",
                     "aten::add.out"]
    size, select, body_add, copy, inc, done, jump, reset = instrs[:8]
    x, y = plan.inputs
    slice_id = select.args[-1]
    assert select.args[0] == x and select.args[-2] == slice_id  # select_copy(x, 0, i, out=slice)
    assert body_add.args[0] == slice_id and body_add.args[1] == y  # the body reads the slice
    out, result, index = copy.args  # no return slot, as ExecuTorch writes it
    assert result == body_add.args[-1] and index == select.args[2]
    assert plan.values[out].val.shape_dynamism == S.TensorShapeDynamism.DYNAMIC_BOUND
    assert inc.args == [index, inc.args[1], index] and plan.values[inc.args[1]].val.int_val == 1
    assert done.args[:2] == [index, size.args[-1]]
    assert jump.cond_value_index == done.args[-1] and jump.destination_instruction == 1
    assert reset.args == [index, size.args[-1], index]


def test_map_body_is_planned_apart_from_the_graph_around_it():
    """ExecuTorch's test_multi_map: each body plans 48 bytes (its slice, its extra input, its
    result), set aside below the graph's own 272; nothing live across a map shares bytes
    with its body."""
    gm = to_edge(export(MultiMap(), (torch.randn(4, 4), torch.randn(4)), strict=True)
                 ).exported_program().graph_module
    gm = PassManager(passes=[SpecPropPass(), ToOutVarPass()])(gm).graph_module
    gm = MemoryPlanningPass(MemoryPlanningAlgorithmSuite(algo_list=[naive]), alloc_graph_input=True,
                            alloc_graph_output=True, alloc_mutable_buffers=True).run(gm).graph_module
    verifier = Verifier(gm, alloc_graph_input=True, alloc_graph_output=True,
                        alloc_mutable_buffers=True)
    verifier.verify_graph_input_output()
    verifier.verify_storage_reuse(allow_lifetime_and_storage_overlap=False)
    assert gm.meta["non_const_buffer_sizes"] == [0, 320]
    maps = gm.graph.find_nodes(op="call_function", target=torch.ops.higher_order.map_impl)
    assert len(maps) == 3
    for node in maps:
        body = getattr(gm, node.args[0].target)
        assert body.meta["non_const_buffer_sizes"] == [0, 48]
        at = node.meta["spec"][0].lifetime[0]
        outer = [n.meta["spec"] for n in gm.graph.nodes if isinstance(n.meta.get("spec"), TensorSpec)]
        inner = [n.meta["spec"] for n in body.graph.nodes
                 if isinstance(n.meta.get("spec"), TensorSpec)]
        assert inner and outer
        for o in outer:
            for i in inner:
                assert not (verifier.has_overlap(o.lifetime, [at, at])
                            and verifier.storage_overlap(o, i)), (o, i)


def test_map_over_a_dynamic_dim_grows_its_output():
    """Planned at the Dim's upper bound; the stacked output has as many rows as the input.
    (ExecuTorch 1.5.1 plans this model at the example's size, so its own file refuses
    8 rows; ours runs them -- and runs in ExecuTorch's runtime, see tests/compat.)"""
    model = MapLinear().eval()
    et, method = _method(model, (torch.randn(6, 3), torch.randn(2)),
                         dynamic_shapes=({0: Dim("n", max=8)}, None))
    plan = et.executorch_program.execution_plan[0]
    assert plan.values[plan.inputs[0]].val.sizes == [8, 3]
    for n in (6, 1, 8, 3):
        x, y = torch.randn(n, 3), torch.randn(2)
        got = method.execute([x.numpy(), y.numpy()])[0]
        with torch.no_grad():
            np.testing.assert_allclose(got, model(x, y).numpy(), atol=1e-5, rtol=0)


def test_map_inside_cond_and_map_inside_map():
    class MapInCond(torch.nn.Module):
        def forward(self, x, y):
            return torch.cond(x.sum() > 0, lambda x, y: torch_map(lambda a, b: a * b, x, y),
                              lambda x, y: x - y, (x, y))

    class MapInMap(torch.nn.Module):
        def forward(self, x, y):
            return torch_map(lambda a, b: torch_map(lambda c, d: c + d.sum(), a, b), x, y)

    for model, (x, y) in ((MapInCond(), (torch.randn(4, 3).abs(), torch.randn(3))),
                          (MapInMap(), (torch.randn(2, 3, 4), torch.randn(5)))):
        _, method = _method(model, (x, y))
        for sign in (1, -1, 1):
            got = method.execute([(x * sign).numpy(), y.numpy()])[0]
            np.testing.assert_allclose(got, model(x * sign, y).numpy(), atol=1e-5, rtol=0)


class TwoMapped(torch.nn.Module):
    def forward(self, x, y):
        return torch_map(lambda xs: xs[0] + xs[1], (x, y))


class TwoResults(torch.nn.Module):
    def forward(self, x):
        return torch_map(lambda a: (a + 1, a * 2), x)


@pytest.mark.parametrize("model, what", [(TwoMapped(), "maps over 2 tensors"),
                                         (TwoResults(), "returns 2 tensors")])
def test_unsupported_map_variants_fail_at_to_executorch(model, what):
    """ExecuTorch's to_edge accepts these and its emitter refuses them (RuntimeError at
    to_executorch); ours refuses them there too, naming the operator, the user's line and
    what to try, with or without the Edge verifier."""
    ep = export(model, (torch.randn(4, 3), torch.randn(4, 3))[: 2 if isinstance(model, TwoMapped) else 1])
    line = inspect.getsourcelines(type(model).forward)[1] + 1
    for config in (EdgeCompileConfig(), EdgeCompileConfig(_check_ir_validity=False)):
        edge = to_edge(ep, compile_config=config)
        with pytest.raises(UnsupportedOperatorError) as info:
            edge.to_executorch()
        message = str(info.value)
        assert "map_impl" in message and what in message and "Try:" in message
        assert f"test_map.py:{line}" in message


def test_lowering_a_lowered_map_program_again_gives_the_same_file():
    edge = to_edge(export(MapLinear(), (torch.randn(5, 3), torch.randn(3))))
    first = edge.to_executorch().buffer
    assert edge.to_executorch().buffer == first
