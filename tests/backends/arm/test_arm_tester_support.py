"""What ExecuTorch's Arm tester (``backends/arm/test/tester``) calls besides the lowering: the
TOSA lowering context, the 16A8W quantization config, ``TOSAQuantizer._quantize_with_submodules``."""

from __future__ import annotations

import threading

import pytest
import torch

from edgetorch.backends.arm.quantizer import (
    TOSAQuantizer,
    get_symmetric_a8w4_quantization_config,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from edgetorch.backends.arm.tosa.specification import (
    TosaLoweringContext,
    TosaSpecification,
    get_context_shape_env,
    get_context_spec,
)
from edgetorch.errors import LoweringContextError


def test_lowering_context_nests_and_restores():
    fp = TosaSpecification.create_from_string("TOSA-1.0+FP")
    intp = TosaSpecification.create_from_string("TOSA-1.0+INT")
    with pytest.raises(LoweringContextError, match="within a TosaLoweringContext"):
        get_context_spec()
    with TosaLoweringContext(fp):
        assert get_context_spec() is fp
        with pytest.raises(LoweringContextError, match="No ShapeEnv"):
            get_context_shape_env()
        with TosaLoweringContext(intp, shape_env="env"):
            assert get_context_spec() is intp and get_context_shape_env() == "env"
        assert get_context_spec() is fp
        seen = []  # a thread does not see this thread's context
        t = threading.Thread(target=lambda: seen.append(
            pytest.raises(LoweringContextError, get_context_spec)))
        t.start()
        t.join()
        assert seen
    with pytest.raises(RuntimeError):  # ExecuTorch raises RuntimeError: ours is one too
        get_context_spec()


def test_a16w8_config():
    cfg = get_symmetric_a16w8_quantization_config()
    base = get_symmetric_quantization_config()
    act = cfg.input_activation
    assert act.dtype == torch.int16 and (act.quant_min, act.quant_max) == (-32767, 32767)
    assert act.qscheme == torch.per_tensor_symmetric and cfg.output_activation == act
    for got, want in ((cfg.weight, base.weight), (cfg.bias, base.bias)):
        assert (got.dtype, got.quant_min, got.quant_max, got.qscheme) == (
            want.dtype, want.quant_min, want.quant_max, want.qscheme)
    assert get_symmetric_a16w8_quantization_config(is_dynamic=True).output_activation is None
    assert act.observer_or_fake_quant_ctr.p.keywords["eps"] == 2**-12


def test_a8w4_config():
    cfg = get_symmetric_a8w4_quantization_config()
    assert (cfg.weight.quant_min, cfg.weight.quant_max) == (-7, 7) and cfg.is_qat
    assert cfg.input_activation.dtype == torch.int8
    assert (cfg.input_activation.quant_min, cfg.input_activation.quant_max) == (-128, 127)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)) + 1.0


def test_quantize_with_submodules_matches_prepare_convert():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    net = _Net().eval()
    samples = [(torch.randn(1, 3, 8, 8),), (torch.randn(1, 3, 8, 8) * 2,)]
    spec = TosaSpecification.create_from_string("TOSA-1.0+INT")

    def quantizer():
        return TOSAQuantizer(spec).set_global(get_symmetric_quantization_config())

    ours = quantizer()._quantize_with_submodules(
        torch.export.export(net, samples[0]).module(), samples)
    prepared = prepare_pt2e(torch.export.export(net, samples[0]).module(), quantizer())
    for s in samples:
        prepared(*s)
    expected = convert_pt2e(prepared)
    x = torch.randn(1, 3, 8, 8)
    torch.testing.assert_close(ours(x), expected(x), rtol=0, atol=0)
    targets = {str(n.target) for n in ours.graph.nodes}
    assert any("quantize_per_tensor" in t for t in targets)
