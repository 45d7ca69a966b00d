"""The Cortex-M ahead-of-time half on its own: target configs, the quantizer's clean-up
passes, the lowering to ``cortex_m::`` operators, ``aot_arm_compiler --target=cortex-m*``, and
the runtime running what it wrote against the quantized eager model."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from cortex_m_models import MODELS

from edgetorch.backends.arm.scripts.aot_arm_compiler import main as aot_main
from edgetorch.backends.arm.scripts.cortex_m import to_edge_cortex_m
from edgetorch.backends.cortex_m.library.cmsis_nn import Backend
from edgetorch.backends.cortex_m.passes import CortexMPassManager
from edgetorch.backends.cortex_m.passes.annotation import (
    DecomposeMeanPass,
    DeduplicateGetAttrPass,
    MatmulToBmmPass,
    ScalarsToAttributePass,
)
from edgetorch.backends.cortex_m.target_config import TARGETS, CortexM, CortexMTargetConfig
from edgetorch.backends.transforms.replace_scalar_with_tensor import (
    ReplaceScalarWithTensorArgPass,
)
from edgetorch.errors import CompileSpecError, FeatureNotAvailableError, InvalidArgumentError
from edgetorch.exir import ExecutorchBackendConfig
from edgetorch.exir.passes.lift_constants import lift_constant_tensor_pass
from edgetorch.exir.tensor import dim_order_of
from edgetorch.runtime import Runtime


def _targets(gm: torch.fx.GraphModule) -> Counter:
    return Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")


# ---- targets --------------------------------------------------------------------------------

def test_every_target_string_round_trips():
    assert TARGETS == ["cortex-m0", "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7",
                       "cortex-m23", "cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85"]
    for target in TARGETS:
        assert CortexMTargetConfig.from_target_string(target).target_string == target


@pytest.mark.parametrize(("target", "backend"), [("cortex-m0", Backend.SCALAR),
                                                 ("cortex-m4", Backend.DSP),
                                                 ("cortex-m33", Backend.DSP),
                                                 ("cortex-m55", Backend.MVE),
                                                 ("cortex-m85", Backend.MVE)])
def test_backend_follows_the_cpu(target, backend):
    assert CortexMTargetConfig.from_target_string(target).backend == backend


def test_bad_targets_are_refused():
    with pytest.raises(CompileSpecError, match="must start with 'cortex-m'"):
        CortexMTargetConfig.from_target_string("ethos-u55-128")
    with pytest.raises(CompileSpecError, match="Supported"):
        CortexMTargetConfig.from_target_string("cortex-m99")
    with pytest.raises(CompileSpecError, match="not supported on M0"):
        CortexMTargetConfig(cpu=CortexM.M0, isa=Backend.MVE)
    assert issubclass(CompileSpecError, ValueError)  # ExecuTorch's tests catch ValueError


# ---- the passes the quantizer runs first ------------------------------------------------------

def _aten(module, *inputs) -> torch.fx.GraphModule:
    return torch.export.export(module, inputs, strict=True).module()


class _Mean(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=(2, 3)), torch.nn.functional.adaptive_avg_pool2d(x, 1), x.mean(dim=1)


def test_decompose_mean_pools_spatial_means_only():
    x = torch.randn(2, 3, 5, 4)
    gm = DecomposeMeanPass().call(_aten(_Mean(), x)).graph_module
    targets = _targets(gm)
    assert targets["aten.avg_pool2d.default"] == 2  # the spatial mean and the 1x1 pool
    assert targets["aten.mean.dim"] == 1  # the channel mean stays
    for got, want in zip(gm(x), _Mean()(x)):
        torch.testing.assert_close(got, want)


class _Matmul(torch.nn.Module):
    def forward(self, a, b, c, d):
        return torch.matmul(a, b), torch.matmul(c, d)


def test_matmul_becomes_bmm_with_batch_dims_folded():
    args = (torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(2, 2, 3, 4),
            torch.randn(2, 2, 4, 5))
    gm = MatmulToBmmPass().call(_aten(_Matmul(), *args)).graph_module
    assert _targets(gm)["aten.bmm.default"] == 2
    assert _targets(gm)["aten.matmul.default"] == 0
    for got, want in zip(gm(*args), _Matmul()(*args)):
        torch.testing.assert_close(got, want)


class _Scalars(torch.nn.Module):
    def forward(self, x):
        return (x + 2.5) * 3.0, x.add(1.5)


def test_float_scalars_become_attributes_and_tensors():
    x = torch.randn(2, 3)
    gm = ScalarsToAttributePass().call(_aten(_Scalars(), x)).graph_module
    consts = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert len(consts) == 3 and all(getattr(gm, str(n.target)).shape == (1, 1) for n in consts)
    gm = ReplaceScalarWithTensorArgPass().call(gm).graph_module
    for got, want in zip(gm(x), _Scalars()(x)):
        torch.testing.assert_close(got, want)


def test_shared_attributes_are_split_per_reader():
    class Shared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randn(3))

        def forward(self, x):
            return x * self.w, x + self.w

    x, module = torch.randn(2, 3), Shared()
    gm = torch.export.export(module, (x,), strict=True).module()
    gm = ScalarsToAttributePass().call(gm).graph_module  # any re-trace: get_attr nodes
    gm = ReplaceScalarWithTensorArgPass().call(gm).graph_module
    gm = DeduplicateGetAttrPass().call(gm).graph_module
    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert len(attrs) == 2 and len({n.target for n in attrs}) == 2
    assert all(len(n.users) == 1 for n in attrs)
    for got, want in zip(gm(x), module(x)):
        torch.testing.assert_close(got, want)


def test_lift_constant_tensor_pass_makes_buffers_before_the_user_inputs():
    class WithConst(torch.nn.Module):
        def forward(self, x):
            return x + 1.0

    ep = torch.export.export(WithConst(), (torch.randn(2),), strict=True)
    gm = ep.graph_module
    first = next(n for n in gm.graph.nodes if n.op == "call_function")
    gm.register_buffer("_c", torch.tensor([2.0]))
    with gm.graph.inserting_before(first):
        attr = gm.graph.get_attr("_c")
    first.args = (first.args[0], attr)
    lift_constant_tensor_pass(ep)
    kinds = [(s.kind.name, s.target) for s in ep.graph_signature.input_specs]
    assert kinds[0] == ("BUFFER", "_lifted_tensor_constant0") and kinds[-1][0] == "USER_INPUT"
    assert not [n for n in ep.graph.nodes if n.op == "get_attr"]
    torch.testing.assert_close(ep.module()(torch.ones(2)), torch.full((2,), 3.0))


def test_dim_order_of_ties_follows_executorch():
    cl = torch.channels_last
    assert dim_order_of(torch.empty(1, 8, 4, 4, memory_format=cl)) == (0, 2, 3, 1)
    assert dim_order_of(torch.empty(1, 8, 1, 1, memory_format=cl)) == (0, 2, 3, 1)
    assert dim_order_of(torch.empty(1, 1, 20, 12, memory_format=cl)) == (0, 2, 1, 3)
    assert dim_order_of(torch.empty(1, 1, 20, 12)) == (0, 1, 2, 3)
    assert dim_order_of(torch.empty(2, 3)) == (0, 1)


# ---- lowering ---------------------------------------------------------------------------------

def _lower(name: str, target: str = "cortex-m55"):
    model, inputs = MODELS[name]()
    model.requires_grad_(False)
    exported = torch.export.export(model, inputs, strict=True)
    quantized, edge, inputs_cl = to_edge_cortex_m(exported.module(), inputs, target)
    return model, quantized, edge, inputs_cl


def test_small_cnn_lowers_to_cmsis_nn_operators():
    _, _, edge, _ = _lower("small_cnn")
    ops = {t.split(".")[1] for t in _targets(edge.exported_program().graph_module)
           if t.startswith("cortex_m.")}
    assert ops == {"quantize_per_tensor", "quantized_conv2d", "quantized_depthwise_conv2d",
                   "quantized_add", "quantized_max_pool2d", "quantized_avg_pool2d",
                   "quantized_linear", "softmax", "dequantize_per_tensor"}
    assert not [t for t in _targets(edge.exported_program().graph_module)
                if ("convolution" in t or "linear" in t) and "cortex_m" not in t]


def test_dsp_linear_keeps_its_bias_mve_takes_a_kernel_sum():
    for target, has_sum in (("cortex-m4", False), ("cortex-m55", True)):
        _, _, edge, _ = _lower("mlp", target)
        linears = [n for n in edge.exported_program().graph.nodes
                   if str(n.target) == "cortex_m.quantized_linear.default"]
        assert len(linears) == 3
        for n in linears:
            bias, kernel_sum = n.args[2], n.args[3]
            assert (kernel_sum is not None) == has_sum and (bias is None) == has_sum


def test_explicit_layout_is_refused_clearly():
    with pytest.raises(InvalidArgumentError, match="explicit-layout"):
        CortexMPassManager(None, use_explicit_layout=True)


@pytest.mark.parametrize("name", ["small_cnn", "mlp", pytest.param(
    "inverted_residual", marks=pytest.mark.slow)])
def test_program_runs_like_the_quantized_model(name):
    """Our .pte in our runtime vs the quantized (fake-quant) eager model: CMSIS-NN's integer
    pipeline rounds differently from float fake quantization, a few output steps at most."""
    _, quantized, edge, inputs = _lower(name)
    scale = next(n.args[1] for n in reversed(list(edge.exported_program().graph.nodes))
                 if str(n.target) == "cortex_m.dequantize_per_tensor.default")
    program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    (got,) = method.execute([x.numpy() for x in inputs])
    with torch.no_grad():
        want = quantized(*inputs).numpy()
    assert np.abs(np.asarray(got) - want).max() / scale <= 2 + 1e-3


# ---- the command --------------------------------------------------------------------------------

def test_aot_arm_compiler_cortex_m55(tmp_path, capsys):
    model_file = tmp_path / "model.py"
    model_file.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(__import__('cortex_m_models').__file__.rsplit('/', 1)[0])!r})\n"
        "from cortex_m_models import MODELS\n"
        "ModelUnderTest, ModelInputs = MODELS['small_cnn']()\n")
    result = aot_main([f"--model_name={model_file}", "--quantize", "--delegate",
                       "--target=cortex-m55", f"--output={tmp_path}", "--evaluate"])
    assert result.output == str(tmp_path / "model_arm_cortex-m55.pte")  # --delegate ignored
    names = {op.name for op in result.program.executorch_program.execution_plan[0].operators}
    assert "cortex_m::quantized_conv2d" in names
    assert result.evaluation["comparison"][0]["max_steps"] <= 2
    assert "quantization steps max" in capsys.readouterr().out
    with pytest.raises(FeatureNotAvailableError, match="explicit-layout"):
        aot_main([f"--model_name={model_file}", "--quantize", "--target=cortex-m55",
                  "--cortex-m-explicit-layout", f"--output={tmp_path}"])
