"""ExecuTorch's demo partitioners: the one that keeps linear, SDPA and nearest upsampling whole
(``NonDecompTestPartitioner``) on edgetorch's demo backend, which now runs those ops; the
dialect verifiers; per-method memory planners."""

from __future__ import annotations

import pytest
import torch
from torch._export.verifier import SpecViolationError

from edgetorch.exir import (
    EdgeCompileConfig,
    ExecutorchBackendConfig,
    to_edge,
    to_edge_transform_and_lower,
)
from edgetorch.exir.backend.test.op_partitioner_demo import NonDecompTestPartitioner
from edgetorch.exir.passes import MemoryPlanningPass
from edgetorch.exir.tracer import _default_decomposition_table
from edgetorch.exir.verification.verifier import (
    EXIRATenDialectVerifier,
    EXIREdgeDialectVerifier,
)
from edgetorch.runtime import Runtime

DELEGATE = torch.ops.higher_order.executorch_call_delegate


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.no_bias = torch.nn.Linear(8, 8, bias=False)

    def forward(self, q, k, v, img):
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                             scale=0.5)
        up = torch.nn.functional.interpolate(img, size=(6, 9), mode="nearest")
        return self.proj(a) + self.no_bias(a), up


def test_kept_ops_are_delegated_alone_and_compute_as_torch():
    torch.manual_seed(0)
    model = Attention().eval()
    inputs = (torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8),
              torch.randn(1, 3, 3, 4))
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[NonDecompTestPartitioner()])
    graph = edge.exported_program().graph
    # sdpa, the biased linear and upsample each alone; the bias-free linear decomposed
    assert sum(n.target == DELEGATE for n in graph.nodes) == 3
    assert any("mm" in str(n.target) for n in graph.nodes)
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    got = method.execute(list(inputs))
    want = model(*inputs)
    # sums of 8 float32 products, then a softmax and two 8-term projections: a few ulps
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(got[1], want[1])  # nearest: a pure gather


def test_dialect_verifiers():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x) + 1

    ep = torch.export.export(M(), (torch.randn(2, 3),))
    EXIREdgeDialectVerifier()(to_edge(ep).exported_program())
    with pytest.raises(SpecViolationError, match="not an Edge operator"):
        EXIREdgeDialectVerifier()(ep.graph_module)
    EXIREdgeDialectVerifier(EdgeCompileConfig(_check_ir_validity=False))(ep.graph_module)
    assert not EXIREdgeDialectVerifier().is_valid(ep.graph_module)
    assert EXIREdgeDialectVerifier(class_only=True)().dialect == "EDGE"

    class Svd(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.svd(x)[0]

    aten = torch.export.export(Svd(), (torch.randn(3, 3),)).run_decompositions({})
    with pytest.raises(SpecViolationError, match="core ATen"):
        EXIRATenDialectVerifier()(aten)
    EXIRATenDialectVerifier(core_aten_ops_exception_list=[torch.ops.aten.linalg_svd.default])(
        aten)
    table = _default_decomposition_table()
    assert torch.ops.aten.linear.default in table and table is not _default_decomposition_table()


def test_memory_planning_pass_per_method():
    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    eps = {"forward": torch.export.export(Double(), (torch.randn(3),)),
           "twice": torch.export.export(_Twice(), (torch.randn(3),))}
    et = to_edge(eps).to_executorch(ExecutorchBackendConfig(memory_planning_pass={
        "forward": MemoryPlanningPass(alloc_graph_input=True, alloc_graph_output=False)}))
    plans = {p.name: p for p in et.executorch_program.execution_plan}
    fwd, other = plans["forward"], plans["twice"]
    assert all(fwd.values[i].val.allocation_info is not None for i in fwd.inputs)
    assert all(fwd.values[i].val.allocation_info is None for i in fwd.outputs)
    # the method not named gets the default planner: inputs and outputs planned
    assert all(other.values[i].val.allocation_info is not None
               for i in [*other.inputs, *other.outputs])
    out = Runtime.get().load_program(et.buffer).load_method("twice").execute([torch.ones(3)])
    assert out[0].tolist() == [2.0, 2.0, 2.0]


class _Twice(torch.nn.Module):
    def forward(self, x):
        return x + x


def test_all_nodes_partitioner_runs_each_partition_as_a_nested_program():
    from edgetorch.exir.backend.test.op_partitioner_demo import AllNodesPartitionerDemo

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(),
                                torch.nn.Linear(6, 2)).eval()
    x = torch.randn(3, 4)
    edge = to_edge(torch.export.export(model, (x,))).to_backend(AllNodesPartitionerDemo())
    graph = edge.exported_program().graph
    calls = [n for n in graph.nodes if n.op == "call_function"]
    assert [n.target for n in calls[:1]] == [DELEGATE]  # everything went to the delegate
    assert not edge.exported_program().state_dict  # with the weights
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    # the nested program runs the same portable kernels as an undelegated one would
    plain = Runtime.get().load_program(to_edge(torch.export.export(model, (x,)))
                                       .to_executorch().buffer).load_method("forward")
    assert torch.equal(method.execute([x])[0], plain.execute([x])[0])
    torch.testing.assert_close(method.execute([x])[0], model(x), rtol=1e-5, atol=1e-6)
