"""ExecuTorch's exir names its own Python tests import: the legacy capture API, whole-program
passes, the pass registry, ScalarToTensorPass, QuantFusionPass, the sym-shape-eval passes,
pattern partitions and TensorSpec's ExecuTorch field names, each checked for what it does."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim, export
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.passes.operator_support import OperatorSupportBase

import edgetorch.exir as exir
from edgetorch.exir import ExecutorchBackendConfig, to_edge
from edgetorch.exir.dialects._ops import ops as exir_ops
from edgetorch.exir.pass_base import (
    ExportedProgramPassBase,
    ExportedProgramPassResult,
    ExportPass,
    ExportPassBaseError,
    ProxyValue,
)
from edgetorch.exir.pass_manager import ExportedProgramPassManager
from edgetorch.runtime import Runtime


def _add_twice(x):
    return torch.add(torch.add(x, x), x)


def test_legacy_capture_to_edge_to_executorch_runs():
    x = torch.randn(10)
    captured = exir.capture(_add_twice, (x,), exir.CaptureConfig())
    edge = captured.to_edge()
    assert any(n.target == exir_ops.edge.aten.add.Tensor for n in edge.exported_program.graph.nodes)
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    torch.testing.assert_close(method.execute([x])[0], _add_twice(x))
    with pytest.raises(Exception, match="to_edge"):
        captured.to_executorch()


def test_patch_forward_exports_another_method():
    from edgetorch.exir.capture._capture import patch_forward

    class TwoMethods(torch.nn.Module):
        def forward(self, x):
            return x + 1

        def other(self, x):
            return x * 3

    m = TwoMethods()
    x = torch.randn(3)
    with patch_forward(m, TwoMethods.other):
        ep = export(m, (x,), strict=True)
    assert m(x).equal(x + 1)
    out = Runtime.get().load_program(to_edge(ep).to_executorch().buffer).load_method("forward")
    torch.testing.assert_close(out.execute([x])[0], x * 3)


def test_exported_program_pass_manager_runs_both_kinds_of_pass():
    class WithConstant(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.ones(3)

        def forward(self, x):
            return x + self.weight

    def add_to_mul(gm):
        nodes = gm.graph.find_nodes(op="call_function", target=exir_ops.edge.aten.add.Tensor)
        for n in nodes:
            n.target = exir_ops.edge.aten.mul.Tensor
        return PassResult(gm, bool(nodes))

    class DoubleConstants(ExportedProgramPassBase):
        def call(self, ep):
            for key, value in ep.constants.items():
                ep.constants[key] = value * 2
            return ExportedProgramPassResult(ep, True)

    ep = to_edge(export(WithConstant(), (torch.randn(3),))).exported_program()
    before = {k: v.clone() for k, v in ep.constants.items()}
    result = ExportedProgramPassManager([add_to_mul, DoubleConstants()])(ep)
    assert result.modified
    new = result.exported_program
    assert not new.graph.find_nodes(op="call_function", target=exir_ops.edge.aten.add.Tensor)
    for key, value in before.items():
        torch.testing.assert_close(new.constants[key], value * 2)
    x = torch.randn(3)
    torch.testing.assert_close(new.module()(x), x * 2)  # x * (ones * 2)


def test_exported_program_pass_manager_adds_an_input_and_rejects_call_method():
    class AddConstant(ExportedProgramPassBase):
        def call(self, ep):
            graph, sig = ep.graph_module.graph, ep.graph_signature
            (user,) = graph.find_nodes(op="placeholder")
            with graph.inserting_before(user):
                ph = graph.placeholder("_c")
            ph.meta["val"] = torch.tensor([1.0, 2.0, 3.0])
            ep.constants["_c"] = torch.tensor([1.0, 2.0, 3.0])
            sig.input_specs = (InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(ph.name),
                                         "_c", persistent=False), sig.input_specs[0])
            return ExportedProgramPassResult(ep, True)

    ep = to_edge(export(torch.nn.Identity(), (torch.randn(3),))).exported_program()
    new = ExportedProgramPassManager([AddConstant()])(ep).exported_program
    assert list(new.constants) == ["_c"] and len(new.graph_signature.input_specs) == 2

    def call_method(gm):
        node = list(gm.graph.nodes)[-2]
        with gm.graph.inserting_after(node):
            gm.graph.call_method("relu", (node,))
        return PassResult(gm, True)

    with pytest.raises(Exception, match="call_method"):
        ExportedProgramPassManager([call_method], run_checks_after_each_pass=True)(ep)


def test_pass_registry():
    from edgetorch.exir.passes.pass_registry import PassRegistry

    @PassRegistry.register()
    def my_test_pass(gm):
        return None

    assert PassRegistry.get("my_test_pass") == [my_test_pass]
    PassRegistry.register_list("my_test_list", [my_test_pass, my_test_pass])
    assert len(PassRegistry.get("my_test_list")) == 2
    with pytest.warns(UserWarning, match="already exists"):
        PassRegistry.register_list("my_test_list", [])
    with pytest.raises(Exception, match="no pass 'nope'"):
        PassRegistry.get("nope")


def test_scalar_to_tensor_pass_keeps_values_and_metadata():
    from edgetorch.exir.passes import ScalarToTensorPass

    class AddScalar(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.add.Tensor(x, 2)

    gm = export(AddScalar(), (torch.randn(2, 3),), strict=True).graph_module
    result = ScalarToTensorPass()(gm)
    assert result.modified
    nodes = [n for n in result.graph_module.graph.nodes if n.op == "call_function"]
    assert all("val" in n.meta for n in nodes)
    x = torch.randn(2, 3)
    torch.testing.assert_close(result.graph_module(x)[0], x + 2)


def _symbolic_size():
    class View(torch.nn.Module):
        def forward(self, x):
            return x.view(x.size(0), -1)

    ep = export(View(), (torch.randn(2, 3),), dynamic_shapes=({0: Dim("b", max=8)},))
    gm = to_edge(ep).exported_program().graph_module
    return next(n.meta["val"] for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.SymInt))


def test_proxy_value_refuses_to_concretize_symbolic_sizes():
    s = _symbolic_size()
    node = torch.fx.Graph().placeholder("x")
    with pytest.raises(ExportPassBaseError, match="boolean context"):
        bool(ProxyValue(s, node))
    with pytest.raises(ExportPassBaseError, match="converted to int"):
        int(ProxyValue(s, node))
    with pytest.raises(ExportPassBaseError, match="index context"):
        ProxyValue(s, node).__index__()
    assert int(ProxyValue(3, node)) == 3


def test_export_pass_checks_symbolic_inputs_survive_replay():
    ep = export(torch.nn.ReLU(), (torch.randn(2, 3),), dynamic_shapes=({0: Dim("b", max=8)},))
    gm = to_edge(ep).exported_program().graph_module

    class Collapse(ExportPass):
        def placeholder(self, name, arg, meta):
            proxy = super().placeholder(name, arg, meta)
            proxy.node.meta["val"] = torch.empty(2, 3, device="meta")
            return proxy

    with pytest.raises(ExportPassBaseError, match="position 0 did not preserve"):
        Collapse()(gm)

    class Allowed(Collapse):
        def should_preserve_symbolic_input_metadata(self):
            return False

    Allowed()(gm)


def test_quant_fusion_pass_makes_one_quantized_add():
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.backend_config.executorch import get_executorch_backend_config
    from torch.ao.quantization.quantize_fx import _convert_to_reference_decomposed_fx, prepare_fx

    from edgetorch.exir import EdgeCompileConfig
    from edgetorch.exir.passes.quant_fusion_pass import QuantFusionPass

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    torch.manual_seed(0)
    example = (torch.rand(1, 5), torch.rand(1, 5))
    m = prepare_fx(Add(), get_default_qconfig_mapping("qnnpack"), example,
                   backend_config=get_executorch_backend_config())
    m(*example)
    m = _convert_to_reference_decomposed_fx(m)
    edge = to_edge(export(m, example, strict=True),
                   compile_config=EdgeCompileConfig(_check_ir_validity=False))
    fused = edge.transform([QuantFusionPass(_fix_node_meta_val=True)])
    targets = [n.target for n in fused.exported_program().graph.nodes if n.op == "call_function"]
    assert exir_ops.edge.quantized_decomposed.add.default in targets
    assert exir_ops.edge.aten.add.Tensor not in targets
    method = Runtime.get().load_program(fused.to_executorch().buffer).load_method("forward")
    # The fused kernel computes what the reference graph computes: same quantized grid.
    torch.testing.assert_close(method.execute(list(example))[0], m(*example), atol=1e-6, rtol=0)


def test_sym_shape_eval_passes_choose_the_planned_size():
    from edgetorch.exir.passes.sym_shape_eval_pass import (
        ConstraintBasedSymShapeEvalPass,
        HintBasedSymShapeEvalPass,
    )

    ep = export(torch.nn.ReLU(), (torch.randn(3, 4),), dynamic_shapes=({0: Dim("b", max=16)},))
    for p, bound in ((ConstraintBasedSymShapeEvalPass(), 16), (HintBasedSymShapeEvalPass(), 3)):
        prog = to_edge(ep).to_executorch(ExecutorchBackendConfig(sym_shape_eval_pass=p))
        method = Runtime.get().load_program(prog.buffer).load_method("forward")
        assert method.metadata.input_tensor_meta(0).sizes() == (bound, 4)
        x = torch.randn(2, 4)
        torch.testing.assert_close(method.execute([x])[0], torch.relu(x))
        big = torch.randn(10, 4)
        if bound == 16:
            torch.testing.assert_close(method.execute([big])[0], torch.relu(big))
        else:
            with pytest.raises(Exception, match="upper bound"):
                method.execute([big])


def test_pattern_op_partitions():
    from edgetorch.exir.backend.canonical_partitioners.pattern_op_partitioner import (
        generate_pattern_op_partitions,
    )

    class AddSupport(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return node.target == exir_ops.edge.aten.add.Tensor

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x + x) + x

    gm = to_edge(export(M(), (torch.randn(3),))).exported_program().graph_module
    parts = generate_pattern_op_partitions(gm, op_support=AddSupport())
    assert sorted(len(p.nodes) for p in parts) == [1, 1]  # relu between the adds splits them
    assert all(n.target == exir_ops.edge.aten.add.Tensor for p in parts for n in p.nodes)


def test_tensor_spec_executorch_fields_and_schema_names():
    from edgetorch.exir.schema import DeviceType, ExecutionPlan
    from edgetorch.exir.tensor import TensorSpec

    t = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    spec = TensorSpec.from_tensor(t)
    assert spec.stride == t.stride() and spec.dim_order == (0, 2, 3, 1)
    assert spec.layout == torch.strided and not spec.is_sparse
    assert spec.shape_dynamism == spec.dynamism
    assert TensorSpec.from_tensor(t, const=True).storage is t
    assert DeviceType.CPU == 0 and ExecutionPlan.__name__ == "ExecutionPlan"
