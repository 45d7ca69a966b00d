"""``FusePatternsPass``'s fusions into ``et_vk`` operators: each fused graph holds its
operator, the fused program (the operators' torch references) and the lowered ``.pte`` (the
NumPy Vulkan interpreter) both give eager PyTorch's numbers: float within 1e-5, int8 within
one quantization step (the same arithmetic in another order may round a tie the other way)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from vk_cases import run

import edgetorch.backends.vulkan.custom_ops_lib  # noqa: F401 (defines the et_vk operators)
from edgetorch.backends.transforms.utils import get_param_tensor
from edgetorch.backends.vulkan import utils as vk_utils
from edgetorch.backends.vulkan._passes import FusePatternsPass
from edgetorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from edgetorch.backends.vulkan.patterns.rope import LlamaRope
from edgetorch.errors import ParamMutationConflictError
from edgetorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower

pytestmark = pytest.mark.torch


class QuantizedPixelShuffle(torch.nn.Module):
    def forward(self, x):
        dq = torch.ops.quantized_decomposed.dequantize_per_tensor(x, 0.1, 0, -128, 127,
                                                                   torch.int8)
        y = torch.nn.functional.pixel_shuffle(dq, 2)
        return torch.ops.quantized_decomposed.quantize_per_tensor(y, 0.05, 1, -128, 127,
                                                                   torch.int8)


class TwoLinears(torch.nn.Module):
    def __init__(self, out_features: int = 64):
        super().__init__()
        self.l1 = torch.nn.Linear(128, out_features)
        self.l2 = torch.nn.Linear(out_features, 32, bias=False)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class Embedding(torch.nn.Module):
    def __init__(self, dim: int = 128):
        super().__init__()
        self.emb = torch.nn.Embedding(64, dim)

    def forward(self, x, y):
        return self.emb(x) + self.emb(y)  # one table, two lookups


def _static_int8(model: torch.nn.Module, inputs: tuple) -> torch.export.ExportedProgram:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False))
    prepared = prepare_pt2e(torch.export.export(model, inputs, strict=True).module(), quantizer)
    prepared(*inputs)
    return torch.export.export(convert_pt2e(prepared), inputs)


def _int4_embedding(dim: int = 128) -> torch.nn.Module:
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import IntxWeightOnlyConfig, quantize_
    from torchao.utils import unwrap_tensor_subclass

    model = Embedding(dim)
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32
              if dim % 32 == 0 else 16)),
              filter_fn=lambda mod, fqn: isinstance(mod, torch.nn.Embedding))
    return unwrap_tensor_subclass(model)


def _int4_linears(out_features: int = 64, dynamic: bool = False) -> torch.nn.Module:
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
        quantize_,
    )
    from torchao.utils import unwrap_tensor_subclass

    model = TwoLinears(out_features)
    config = Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerGroup(32)) if dynamic else \
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32))
    quantize_(model, config,
              filter_fn=lambda mod, fqn: isinstance(mod, torch.nn.Linear)
              and mod.in_features % 32 == 0)
    return unwrap_tensor_subclass(model)


def _case(name: str):
    """``(exported program, inputs, eager outputs, fused operator, count, atol)``."""
    torch.manual_seed(0)
    if name == "rope":
        inputs = (torch.randn(1, 5, 4, 16), torch.randn(1, 5, 2, 16), torch.randn(5, 8),
                  torch.randn(5, 8))
        model = LlamaRope()
        return torch.export.export(model, inputs), inputs, model(*inputs), \
            "apply_rotary_emb", 1, 1e-5
    if name == "pixel_shuffle":
        inputs = (torch.randint(-128, 127, (1, 16, 4, 6), dtype=torch.int8),)
        model = QuantizedPixelShuffle()
        return torch.export.export(model, inputs), inputs, (model(*inputs),), \
            "q8ta_pixel_shuffle", 1, 1
    if name in ("q8ta_linear", "q8ta_linear_gemv"):
        rows, oc = (4, 64) if name == "q8ta_linear" else (1, 9)  # 9: channels not 4-aligned
        inputs = (torch.randn(rows, 128),)
        ep = _static_int8(TwoLinears(oc), inputs)
        # one step of the output's scale (the last dequantize's)
        step = [n.args[1] for n in ep.graph.nodes if "dequantize_per_tensor" in str(n.target)][-1]
        # the second linear's 9 input channels are not 4-aligned: only the first fuses
        return ep, inputs, (ep.module()(*inputs),), name, 2 if oc % 4 == 0 else 1, step
    if name == "embedding_q4gsw":
        inputs = (torch.tensor([[0, 1, 2], [3, 4, 63]]), torch.tensor([[5, 6, 7], [8, 9, 10]]))
        model = _int4_embedding()
        return torch.export.export(model, inputs, strict=True), inputs, (model(*inputs),), \
            name, 2, 1e-5
    if name in ("linear_q4gsw", "linear_q4gsw_padded"):
        # 10: scales and bias padded past the output channels; the second linear (10
        # input channels) stays float
        oc = 64 if name == "linear_q4gsw" else 10
        inputs = (torch.randn(4, 128),)
        model = _int4_linears(oc)
        return torch.export.export(model, inputs, strict=True), inputs, (model(*inputs),), \
            "linear_q4gsw", 2 if oc % 4 == 0 else 1, 1e-5
    if name == "linear_dq8ca_q4gsw":
        inputs = (torch.randn(4, 128),)
        model = _int4_linears(dynamic=True)
        return torch.export.export(model, inputs, strict=True), inputs, (model(*inputs),), \
            name, 2, 1e-5
    raise KeyError(name)


def _fused(ep: torch.export.ExportedProgram):
    edge = to_edge(ep, compile_config=EdgeCompileConfig(
        _check_ir_validity=False, preserve_ops=[torch.ops.aten.pixel_shuffle.default]))
    program = edge._edge_programs["forward"]
    fuse = FusePatternsPass()
    fuse._exported_program = program
    result = fuse.call(program.graph_module)
    return program, result


def _count(gm: torch.fx.GraphModule, op: str) -> int:
    return sum(1 for n in gm.graph.nodes
               if n.op == "call_function" and f"et_vk.{op}.default" in str(n.target))


def _assert_close(got, want, atol):
    got = (got,) if isinstance(got, torch.Tensor) else got
    for g, w in zip(got, want):
        g = g.detach() if isinstance(g, torch.Tensor) else g
        g, w = np.asarray(g, np.float64), np.asarray(w.detach(), np.float64)
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, atol=atol * 1.001, rtol=1e-5 if atol < 1e-3 else 0)


CASES = ["rope", "pixel_shuffle", "q8ta_linear", "q8ta_linear_gemv", "embedding_q4gsw",
         "linear_q4gsw", "linear_q4gsw_padded", "linear_dq8ca_q4gsw"]


@pytest.mark.parametrize("name", CASES)
def test_fused_graph_holds_the_op_and_computes_eagers_numbers(name):
    ep, inputs, want, op, count, atol = _case(name)
    program, result = _fused(ep)
    assert result.modified and _count(program.graph_module, op) == count
    _assert_close(program.module()(*inputs), want, atol)


@pytest.mark.parametrize("name", CASES)
def test_lowered_fusion_runs_in_the_vulkan_interpreter(name):
    ep, inputs, want, op, count, atol = _case(name)
    pte = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()]).to_executorch()
    outs, handles = run(pte.buffer, inputs)
    ran = sum((Counter(h.operators_run) for h in handles), Counter())  # over delegates
    assert ran.get(f"et_vk.{op}.default") == count
    _assert_close(outs, want, atol)


def test_shared_embedding_table_is_packed_once_in_the_linear_4bit_layout():
    ep, *_ = _case("embedding_q4gsw")
    program, _ = _fused(ep)
    fused = [n for n in program.graph_module.graph.nodes if "embedding_q4gsw" in str(n.target)]
    assert len(fused) == 2 and fused[0].args[0] is fused[1].args[0]
    assert fused[0].args[2] == 32 and fused[0].args[4] is True
    packed = get_param_tensor(program, fused[0].args[0])
    assert packed.dtype == torch.uint8 and tuple(packed.shape) == (64, 64)


def test_embedding_whose_rows_are_not_32_wide_stays_unfused():
    model = _int4_embedding(dim=48)
    inputs = (torch.tensor([0, 1]), torch.tensor([2, 3]))
    program, _ = _fused(torch.export.export(model, inputs, strict=True))
    assert _count(program.graph_module, "embedding_q4gsw") == 0


def test_dequantize_relu_quantize_is_not_a_pixel_shuffle():
    class DqReluQ(torch.nn.Module):
        def forward(self, x):
            dq = torch.ops.quantized_decomposed.dequantize_per_tensor(x, 0.1, 0, -128, 127,
                                                                       torch.int8)
            return torch.ops.quantized_decomposed.quantize_per_tensor(
                torch.relu(dq), 0.1, 0, -128, 127, torch.int8)

    inputs = (torch.randint(-128, 127, (1, 16, 4, 6), dtype=torch.int8),)
    program, _ = _fused(torch.export.export(DqReluQ(), inputs))
    assert _count(program.graph_module, "q8ta_pixel_shuffle") == 0


def test_register_param_mutation_is_a_once_per_weight_guard():
    model = torch.nn.Linear(8, 4)
    edge = to_edge(torch.export.export(model, (torch.randn(2, 8),)))
    ep = edge._edge_programs["forward"]
    weight = next(n for n in ep.graph_module.graph.nodes
                  if n.op == "placeholder" and vk_utils.is_param(ep, n))
    assert vk_utils.register_param_mutation(ep, weight, "fmt_a")
    assert not vk_utils.register_param_mutation(ep, weight, "fmt_a")
    with pytest.raises(ParamMutationConflictError, match="fmt_a"):
        vk_utils.register_param_mutation(ep, weight, "fmt_b")
    assert issubclass(ParamMutationConflictError, RuntimeError)  # as ExecuTorch raises


def test_q8ta_linear_constants_are_padded_to_four_channels():
    ep, *_ = _case("q8ta_linear_gemv")  # 9 output channels
    program, _ = _fused(ep)
    (fused,) = [n for n in program.graph_module.graph.nodes if "q8ta_linear" in str(n.target)]
    x, in_scale, in_zp, weight, sums, scales, out_scale, out_zp, bias, act = fused.args
    assert act == "relu" and isinstance(in_scale, float) and isinstance(out_zp, int)
    assert tuple(get_param_tensor(program, weight).shape) == (9, 128)
    for constant in (sums, scales, bias):
        values = get_param_tensor(program, constant)
        assert values.shape == (12,) and not values[9:].any()
    w = get_param_tensor(program, weight).to(torch.int32)
    assert torch.equal(get_param_tensor(program, sums)[:9], w.sum(dim=1).to(torch.int32))


def test_linear_q4gsw_stores_packed_weights_and_transposed_padded_scales():
    ep, *_ = _case("linear_q4gsw_padded")
    scales_before = [get_param_tensor(ep, n).clone() for n in ep.graph.nodes
                     if n.op == "placeholder" and n.name.endswith("original1")][0]
    program, _ = _fused(ep)
    (fused,) = [n for n in program.graph_module.graph.nodes if "linear_q4gsw" in str(n.target)]
    x, weight, scales, group_size, bias = fused.args
    assert group_size == 32
    assert get_param_tensor(program, weight).dtype == torch.uint8
    assert tuple(get_param_tensor(program, weight).shape) == (10, 64)
    stored = get_param_tensor(program, scales)
    assert tuple(stored.shape) == (4, 12) and not stored[:, 10:].any()
    assert torch.equal(stored[:, :10], scales_before.reshape(10, 4).T)
    assert tuple(get_param_tensor(program, bias).shape) == (12,)
