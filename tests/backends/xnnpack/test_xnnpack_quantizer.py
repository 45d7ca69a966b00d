"""XNNPACKQuantizer: ExecuTorch 1.5.1's specs, patterns and knobs on torchao's PT2E flow; in
the reference environment, its converted graphs equal ExecuTorch's quantizer's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

pytest.importorskip("torchao")

import ref_process  # noqa: E402
from torchao.quantization.pt2e import (  # noqa: E402
    HistogramObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402
from xnn_quant_common import build, converted_module, summarize  # noqa: E402

from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: E402
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from edgetorch.errors import ExportError  # noqa: E402

qd = torch.ops.quantized_decomposed
HERE = Path(__file__).resolve().parent


class ConvLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


def _convert(model, quantizer, inputs):
    prepared = prepare_pt2e(torch.export.export(model.eval(), inputs).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def _targets(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _example():
    torch.manual_seed(0)
    return ConvLinear(), (torch.randn(1, 3, 8, 8),)


def test_config_specs_are_executorchs():
    cfg = get_symmetric_quantization_config(is_per_channel=True)
    assert cfg is get_symmetric_quantization_config(is_per_channel=True)  # lru_cache
    act, w = cfg.input_activation, cfg.weight
    assert (act.dtype, act.quant_min, act.quant_max, act.qscheme) == (
        torch.int8, -128, 127, torch.per_tensor_affine)
    assert (w.dtype, w.quant_min, w.quant_max, w.qscheme, w.ch_axis) == (
        torch.int8, -127, 127, torch.per_channel_symmetric, 0)
    assert cfg.bias is None and cfg.output_activation is act
    assert isinstance(act.observer_or_fake_quant_ctr(), HistogramObserver)
    assert isinstance(w.observer_or_fake_quant_ctr(), PerChannelMinMaxObserver)
    assert act.observer_or_fake_quant_ctr().eps == 2**-12
    dyn = get_symmetric_quantization_config(is_dynamic=True)
    assert dyn.output_activation is None and dyn.input_activation.is_dynamic
    assert isinstance(dyn.input_activation.observer_or_fake_quant_ctr(), PlaceholderObserver)


def test_static_quantizes_conv_pool_and_linear():
    model, x = _example()
    gm = _convert(model, XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True)), x)
    targets = _targets(gm)
    assert targets.count(qd.dequantize_per_channel.default) == 2  # conv and fc weights
    assert targets.count(qd.quantize_per_tensor.default) >= 3
    out = gm(*x)
    assert torch.allclose(out, model(*x), atol=0.05)


def test_dynamic_quantizes_only_gemms():
    model, x = _example()
    gm = _convert(model, XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)), x)
    targets = _targets(gm)
    assert qd.quantize_per_tensor.default not in targets
    assert targets.count(qd.choose_qparams.tensor) >= 1
    assert targets.count(qd.choose_qparams.tensor) == targets.count(qd.quantize_per_tensor.tensor)


def test_module_type_none_keeps_that_part_float():
    model, x = _example()
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    gm = _convert(model, q.set_module_type(nn.Linear, None), x)
    linear = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.linear.default)
    assert linear.args[1].op == "get_attr"  # a float weight, no dequantize
    assert all(u.target != qd.quantize_per_tensor.default for u in linear.users)


def test_module_name_and_operator_type_select_the_linear_only():
    cfg = get_symmetric_quantization_config(is_per_channel=True)
    for q in (XNNPACKQuantizer().set_module_name("fc", cfg),
              XNNPACKQuantizer().set_operator_type(torch.ops.aten.linear.default, cfg)):
        model, x = _example()
        gm = _convert(model, q, x)
        assert _targets(gm).count(qd.dequantize_per_channel.default) == 1
        conv = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.conv2d.default)
        assert conv.args[1].op == "get_attr"


def test_filter_function_keeps_rejected_nodes_float():
    model, x = _example()
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    q.set_filter_function(lambda n: n.target != torch.ops.aten.conv2d.default)
    gm = _convert(model, q, x)
    assert _targets(gm).count(qd.dequantize_per_channel.default) == 1


def test_module_name_none_is_refused_with_a_reason():
    with pytest.raises(ExportError, match="set_module_type"):
        XNNPACKQuantizer().set_module_name("fc", None)


def test_qat_patterns_annotate_conv_bn():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    x = (torch.randn(2, 3, 8, 8),)
    from torchao.quantization.pt2e.quantize_pt2e import prepare_qat_pt2e

    q = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_qat=True))
    prepared = prepare_qat_pt2e(torch.export.export(model.train(), x).module(), q)
    prepared(*x)
    fake_quants = [n for n in prepared.graph.nodes if n.op == "call_module"
                   and "activation_post_process" in n.target]
    assert len(fake_quants) >= 3  # input, weight, output


# ---- against ExecuTorch's quantizer ------------------------------------------------------------

COMPARED = ["cnn:static", "cnn:static_per_tensor", "cnn:dynamic", "mlp:static", "mlp:dynamic",
            "mobilenet_v2:static", "mobilenet_v2:dynamic"]


@pytest.fixture(scope="module")
def executorch_graphs(tmp_path_factory):
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    d = tmp_path_factory.mktemp("xnnpack-quantizer")
    ref_process.run([str(ref_python()), str(HERE / "xnn_quant_ref.py"), "export", str(d),
                    "--graphs-only", *COMPARED], env=_clean_env(), check=True,
                    capture_output=True, timeout=3600)
    return d


@pytest.mark.compat
@pytest.mark.parametrize("case", COMPARED)
def test_converted_graph_equals_executorchs(case, executorch_graphs):
    """Same Q/DQ placement, scales, zero points and int8 weights, node for node."""
    name, mode = case.split(":")
    err = executorch_graphs / f"{name}.{mode}.err.txt"
    assert not err.exists(), err.read_text()[-3000:]
    theirs = json.loads((executorch_graphs / f"{name}.{mode}.graph.json").read_text())
    model, inputs = build(name)
    ours = summarize(converted_module(model, inputs, mode, XNNPACKQuantizer,
                                      get_symmetric_quantization_config))
    assert json.loads(json.dumps(ours)) == theirs
