"""Non-delegated quantized programs in edgetorch's own runtime (no reference env needed):
PT2E-quantized models keep their Q/DQ as ``quantized_decomposed`` kernel calls and match the
converted (fake-quant) model within one output quantization step; weight-only quantized
embeddings fuse into one ``embedding_*`` kernel under ``do_quant_fusion_and_const_prop``.
tests/compat/test_compat_quantized.py runs the same models against ExecuTorch itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
from quant_models import build  # noqa: E402

from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402
from edgetorch.schema.pte import PteFile  # noqa: E402

pytestmark = pytest.mark.torch


def _lower(name: str, **config):
    ep, example, eager = build(name)
    pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(**config)).buffer
    with torch.no_grad():
        expected = eager(*example).numpy()
    method = Runtime.get().load_program(pte).load_method("forward")
    got = np.asarray(method.execute([t.numpy() for t in example])[0])
    return pte, got, expected, eager


def _operators(pte: bytes) -> list[str]:
    plan = PteFile.parse(pte).program.execution_plan[0]
    return [f"{o.name}.{o.overload}" for o in plan.operators]


def _output_scale(eager) -> float:
    out = next(n for n in eager.graph.nodes if n.op == "output").args[0]
    node = out[0] if isinstance(out, (tuple, list)) else out
    assert "dequantize_per_tensor" in str(node.target)
    return float(node.args[1])


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_static_pt2e_program_keeps_qdq_kernels_and_matches_fake_quant(name):
    pte, got, expected, eager = _lower(name)
    ops = _operators(pte)
    for op in ("quantize_per_tensor.out", "dequantize_per_tensor.out",
               "dequantize_per_channel.out"):
        assert f"quantized_decomposed::{op}" in ops
    np.testing.assert_allclose(got, expected, rtol=0, atol=_output_scale(eager) * 1.0001)


def test_dynamic_pt2e_program_chooses_qparams_at_run_time():
    pte, got, expected, _ = _lower("mlp_dynamic")
    ops = _operators(pte)
    for op in ("choose_qparams.Tensor_out", "quantize_per_tensor.Tensor_out",
               "dequantize_per_tensor.Tensor_out"):
        assert f"quantized_decomposed::{op}" in ops
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,kernel,weight", [
    ("embedding_int8", "embedding_byte.out", (np.int8, (20, 64))),
    ("embedding_int4", "embedding_4bit.out", (np.uint8, (20, 32))),
    ("embedding_int2", "embedding_2bit.out", (np.uint8, (20, 16))),
])
def test_quant_fusion_makes_one_embedding_kernel(name, kernel, weight):
    pte, got, expected, _ = _lower(name, do_quant_fusion_and_const_prop=True)
    ops = _operators(pte)
    assert [o for o in ops if o.startswith("quantized_decomposed::")] == [
        f"quantized_decomposed::{kernel}"]
    assert "aten::embedding.out" not in ops and "aten::sub.out" not in ops
    np.testing.assert_array_equal(got, expected)
    # the only integer constant is the (packed) table; the float weights are gone
    plan = PteFile.parse(pte).program.execution_plan[0]
    consts = [v.val for v in plan.values
              if type(v.val).__name__ == "Tensor" and v.val.data_buffer_idx > 0]
    dtype, shape = weight
    code = {np.int8: "CHAR", np.uint8: "BYTE"}[dtype]
    assert [(t.scalar_type.name, tuple(t.sizes)) for t in consts
            if t.scalar_type.name in ("CHAR", "BYTE")] == [(code, shape)]


def test_without_fusion_the_embedding_runs_decomposed():
    pte, got, expected, _ = _lower("embedding_int4")
    assert not [o for o in _operators(pte) if o.startswith("quantized_decomposed::")]
    np.testing.assert_array_equal(got, expected)


def test_a_dequantized_weight_that_is_not_an_embedding_is_left_alone():
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 8)).eval()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    x = torch.randn(2, 64)
    ep = torch.export.export(model, (x,))
    pte = to_edge(ep).to_executorch(
        ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)).buffer
    assert not [o for o in _operators(pte) if o.startswith("quantized_decomposed::")]
    got = Runtime.get().load_program(pte).load_method("forward").execute([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_the_fusion_pass_is_a_step_of_to_executorch():
    from edgetorch.exir.lowering import STEPS

    assert STEPS[0][0].startswith("quant fusion")


def test_out_variants_of_the_quantized_operators():
    """Each functional op finds ExecuTorch's out variant (``.dtype`` keeps its dtype)."""
    from edgetorch.exir.ops import out_variant

    q = torch.ops.quantized_decomposed
    pairs = {
        q.quantize_per_tensor.default: q.quantize_per_tensor.out,
        q.quantize_per_tensor.tensor: q.quantize_per_tensor.Tensor_out,
        q.dequantize_per_tensor.tensor: q.dequantize_per_tensor.Tensor_out,
        q.choose_qparams.tensor: q.choose_qparams.Tensor_out,
        q.choose_qparams_per_token_asymmetric.default:
            q.choose_qparams_per_token_asymmetric.out,
        q.embedding_byte.default: q.embedding_byte.out,
        q.embedding_byte.dtype: q.embedding_byte.dtype_out,
        q.embedding_4bit.dtype: q.embedding_4bit.dtype_out,
        q.mixed_linear.default: q.mixed_linear.out,
        q.add.default: q.add.out,
    }
    for functional, out in pairs.items():
        assert out_variant(functional) == out, functional


@pytest.mark.parametrize("dynamic", [False, True])
def test_edgetorch_xnnpack_quantizer_without_a_delegate(dynamic):
    """edgetorch's own XNNPACKQuantizer, lowered with no partitioner: portable + quantized
    kernels, equal to the converted model within one output step (float output: 1e-5)."""
    from quant_models import MLP
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.xnnpack.quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    torch.manual_seed(0)
    x = torch.randn(4, 16)
    gm = torch.export.export(MLP().eval(), (x,)).module()
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=dynamic))
    prepared = prepare_pt2e(gm, quantizer)
    prepared(x)
    converted = convert_pt2e(prepared)
    pte = to_edge(torch.export.export(converted, (x,))).to_executorch().buffer
    assert any(o.startswith("quantized_decomposed::") for o in _operators(pte))
    got = Runtime.get().load_program(pte).load_method("forward").execute([x.numpy()])[0]
    with torch.no_grad():
        want = converted(x).numpy()
    atol = 1e-5 if dynamic else _output_scale(converted) * 1.0001
    np.testing.assert_allclose(got, want, rtol=1e-5 if dynamic else 0, atol=atol)
