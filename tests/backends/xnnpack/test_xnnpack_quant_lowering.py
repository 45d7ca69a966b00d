"""Quantized programs lowered to XNNPACK: ExecuTorch 1.5.1's encodings (static qint8, dynamic
qdint8, torchao 8da4w qbint4), nothing quantized left outside the delegate, and never a
fully connected/convolution node whose weight is not a constant. In the reference
environment: our blobs equal ExecuTorch's and run in its runtime within one output step
(static) or 1% of the output range (dynamic, 8da4w) of the fake-quantized eager model."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("torchao")

import ref_process  # noqa: E402
from xnn_quant_common import build, quantize  # noqa: E402

from edgetorch.backends.xnnpack import schema as x  # noqa: E402
from edgetorch.backends.xnnpack.aot.quant import pack_int4  # noqa: E402
from edgetorch.backends.xnnpack.partition import (  # noqa: E402
    ConfigPrecisionType,
    XnnpackPartitioner,
)
from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: E402
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from edgetorch.backends.xnnpack.serialization import deserialize_xnnpack_binary  # noqa: E402
from edgetorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower  # noqa: E402
from edgetorch.schema.pte import PteFile  # noqa: E402

HERE = Path(__file__).resolve().parent
DT = x.XNNDatatype


def lower(name: str, mode: str, partitioner: XnnpackPartitioner | None = None):
    """(pte bytes, inputs, quantized eager callable, exported program) for a case."""
    model, inputs = build(name)
    ep, qmodel = quantize(model, inputs, mode, XNNPACKQuantizer,
                          get_symmetric_quantization_config)
    et = to_edge_transform_and_lower(ep, partitioner=[partitioner or XnnpackPartitioner()])
    return et.to_executorch().buffer, inputs, qmodel, ep


def graphs(pte: bytes) -> tuple[PteFile, list[x.XNNGraph]]:
    f = PteFile.parse(pte)
    return f, [deserialize_xnnpack_binary(f.delegate_bytes(d)).graph
               for d in f.program.execution_plan[0].delegates]


def assert_weights_constant(pte: bytes) -> None:
    """ExecuTorch's XNNPACK crashes on a computed fully connected/convolution filter."""
    for g in graphs(pte)[1]:
        for n in g.xnodes:
            u = n.xnode_union
            if isinstance(u, (x.XNNFullyConnected, x.XNNNodeConv)):
                assert g.xvalues[u.filter_id].tensor.constant_buffer_idx, u


def datatypes(g: x.XNNGraph) -> list[DT]:
    return [v.tensor.datatype for v in g.xvalues]


def test_seed_snippet_xnnpack_quantization():
    """FEATURES.md section 10, snippet 5, with ``executorch`` renamed ``edgetorch``."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from edgetorch.exir import to_edge_transform_and_lower

    model, sample_inputs = build("cnn")
    qparams = get_symmetric_quantization_config(is_per_channel=True)
    quantizer = XNNPACKQuantizer()
    quantizer.set_global(qparams)
    training_ep = torch.export.export(model, sample_inputs).module()
    prepared_model = prepare_pt2e(training_ep, quantizer)  # the snippet does not calibrate
    quantized_model = convert_pt2e(prepared_model)
    et_program = to_edge_transform_and_lower(
        torch.export.export(quantized_model, sample_inputs),
        partitioner=[XnnpackPartitioner()],
    ).to_executorch()
    f, (g,) = graphs(et_program.buffer)
    assert not f.program.execution_plan[0].operators
    assert DT.xnn_datatype_qcint8 in datatypes(g)


def test_static_mlp_is_one_delegate_with_executorchs_types():
    pte, *_ = lower("tiny_classifier", "static")
    f, (g,) = graphs(pte)
    assert not f.program.execution_plan[0].operators  # no Q/DQ kernel left outside
    kinds = [type(n.xnode_union) for n in g.xnodes]
    assert kinds[0] is x.XNNConvert and kinds[-1] is x.XNNConvert
    assert kinds.count(x.XNNFullyConnected) == 3
    types = datatypes(g)
    assert types[0] == DT.xnn_datatype_fp32 and types[-1] == DT.xnn_datatype_fp32
    assert {DT.xnn_datatype_qint8, DT.xnn_datatype_qcint8, DT.xnn_datatype_qcint32} <= set(types)
    fc = next(n.xnode_union for n in g.xnodes if isinstance(n.xnode_union, x.XNNFullyConnected))
    bias, weight = g.xvalues[fc.bias_id].xvalue_union, g.xvalues[fc.filter_id].xvalue_union
    assert isinstance(weight.quant_params, x.PerChannelQuant) and weight.quant_params.scale == []
    keys = {c.named_key for c in g.constant_data}
    assert any(k.startswith("scale_") for k in keys)
    assert bias.tensor_value.datatype == DT.xnn_datatype_qcint32
    assert_weights_constant(pte)


def test_dynamic_linear_has_per_token_activations_and_float_bias():
    pte, *_ = lower("mlp", "dynamic")
    f, (g,) = graphs(pte)
    assert not f.program.execution_plan[0].operators
    dyn = [v.xvalue_union for v in g.xvalues if v.tensor.datatype == DT.xnn_datatype_qdint8]
    assert dyn and all(q.quant_params == x.PerTokenDynamicQuant(1) for q in dyn)
    for n in g.xnodes:
        if isinstance(n.xnode_union, x.XNNFullyConnected):
            assert g.xvalues[n.xnode_union.bias_id].tensor.datatype == DT.xnn_datatype_fp32


def test_8da4w_weights_are_qbint4_groups_with_bf16_scales():
    pte, *_ = lower("linear_heavy", "8da4w")
    f, (g,) = graphs(pte)
    assert not f.program.execution_plan[0].operators
    w = [v.xvalue_union for v in g.xvalues if v.tensor.datatype == DT.xnn_datatype_qbint4]
    assert len(w) == 3
    q = w[0].quant_params
    assert isinstance(q, x.PerChannelGroupQuant) and q.group_size == 32 and q.channel_dim == 0
    scale = g.constant_data[q.scale_buffer_idx]
    assert scale.named_key.startswith("scale_") and scale.size == 512 * (256 // 32) * 2  # bf16
    assert g.constant_data[w[0].tensor_value.constant_buffer_idx].size == 512 * 256 // 2


def test_pack_int4_puts_even_channels_in_the_low_nibble():
    q = torch.tensor([[-8, 7, 0, -1], [1, 2, 3, 4]], dtype=torch.int8)
    packed = pack_int4(q)
    assert packed.tolist() == [[(15 << 4) | 0, (7 << 4) | 8], [(10 << 4) | 9, (12 << 4) | 11]]
    assert pack_int4(torch.tensor([[1, 2, 3]], dtype=torch.int8)).tolist() == [
        [(10 << 4) | 9, (8 << 4) | 11]]  # odd input channel count: padded with 0 (+8)


class ComputedWeight(nn.Module):
    """A linear whose weight is computed at run time (as a weight dequantized outside)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 8))

    def forward(self, x):
        return nn.functional.linear(torch.relu(x), self.w * 2.0)


def test_fully_connected_never_gets_a_computed_weight():
    torch.manual_seed(0)
    model, x_in = ComputedWeight().eval(), (torch.randn(2, 8),)
    et = to_edge_transform_and_lower(torch.export.export(model, x_in),
                                     partitioner=[XnnpackPartitioner()]).to_executorch()
    assert_weights_constant(et.buffer)


def test_precisions_select_what_is_delegated():
    model, inputs = build("tiny_classifier")
    ep, _ = quantize(model, inputs, "static", XNNPACKQuantizer, get_symmetric_quantization_config)

    def tagged(*precisions):
        edge = to_edge(copy.deepcopy(ep), compile_config=EdgeCompileConfig(
            _check_ir_validity=False, preserve_ops=[torch.ops.aten.linear.default]))
        p = XnnpackPartitioner(config_precisions=list(precisions))
        result = p.partition(edge.exported_program())
        return {str(n.target) for n in result.tagged_exported_program.graph.nodes
                if n.op == "call_function" and "delegation_tag" in n.meta}

    static = tagged(ConfigPrecisionType.STATIC_QUANT, ConfigPrecisionType.FP32)
    assert "aten.linear.default" in static and any("quantize" in t for t in static)
    assert "aten.linear.default" not in tagged(ConfigPrecisionType.FP32)  # never as float
    assert not any("quantize" in t for t in tagged(ConfigPrecisionType.DYNAMIC_QUANT))


def test_cli_exports_quantized_xnnpack_with_a_progress_bar(tmp_path, capsys, monkeypatch):
    from edgetorch.cli import main

    monkeypatch.setenv("EDGETORCH_PROGRESS", "1")  # (stderr is not a terminal here)

    model, inputs = build("tiny_classifier")
    for i in range(3):
        np.save(tmp_path / f"{i}.npy", torch.randn(inputs[0].shape).numpy())
    out = tmp_path / "q.pte"
    assert main(["export", "tiny_classifier", "-o", str(out), "--delegate", "xnnpack",
                 "--quantize", "static", "--calibration", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "calibrating:" in err and "/3 [" in err  # (cleared when done: no 3/3 kept)
    f, (g,) = graphs(out.read_bytes())
    assert DT.xnn_datatype_qcint8 in datatypes(g)


# ---- against ExecuTorch 1.5.1 ------------------------------------------------------------------

CASES = ["cnn:static", "cnn:static_per_tensor", "cnn:dynamic", "mlp:static", "mlp:dynamic",
         "mlp:8da4w", "linear_heavy:static", "linear_heavy:dynamic", "linear_heavy:8da4w",
         "mobilenet_v2:static", "mobilenet_v2:dynamic", "llama_decoder:static",
         "llama_decoder:dynamic", "llama_decoder:8da4w"]


def _bound(qmodel, mode: str, want: np.ndarray) -> float:
    """One output quantization step (static), else 1% of the output range."""
    out = next(n for n in qmodel.graph.nodes if n.op == "output").args[0][0] \
        if mode.startswith("static") else None
    if out is not None and out.target == torch.ops.quantized_decomposed.dequantize_per_tensor.default:
        return float(out.args[1]) * 1.001
    return 0.01 * float(want.max() - want.min())  # (a float output: shape_ops)


class _Compared:
    """Per case, built once: ExecuTorch's lowering, ours, and ours run in its runtime."""

    def __init__(self, d: Path) -> None:
        from refenv import _clean_env, ref_python

        self.d, self.env = d, _clean_env()
        self.tool = [str(ref_python()), str(HERE / "xnn_quant_ref.py")]
        self.built: dict[str, tuple[bytes, np.ndarray, float]] = {}

    def _case_dir(self, case: str) -> Path:
        d = self.d / case.replace(":", ".")
        d.mkdir(exist_ok=True)
        return d

    def ours(self, case: str) -> tuple[bytes, np.ndarray, float]:
        if case not in self.built:
            name, mode = case.split(":")
            pte, inputs, qmodel, _ = lower(name, mode)
            d = self._case_dir(case)
            (d / "ours.pte").write_bytes(pte)
            np.savez(d / "ours.in.npz", *[t.numpy() for t in inputs])
            with torch.no_grad():
                want = qmodel(*inputs)
            want = (want[0] if isinstance(want, (tuple, list)) else want).numpy()
            self.built[case] = (pte, want, _bound(qmodel, mode, want))
        return self.built[case]

    def theirs(self, case: str) -> PteFile:
        d = self._case_dir(case)
        stem = d / case.replace(":", ".")
        if not Path(f"{stem}.pte").exists() and not Path(f"{stem}.err.txt").exists():
            ref_process.run([*self.tool, "export", str(d), case], env=self.env, check=True,
                            capture_output=True, timeout=3600)
        err = Path(f"{stem}.err.txt")
        if err.exists():
            pytest.fail(f"ExecuTorch could not lower {case}:\n{err.read_text()[-3000:]}")
        return PteFile.parse(Path(f"{stem}.pte").read_bytes())

    def run_ours(self, case: str) -> np.ndarray:
        self.ours(case)
        d = self._case_dir(case)
        if not (d / "ours.out.npz").exists() and not (d / "ours.err.txt").exists():
            ref_process.run([*self.tool, "run", str(d)], env=self.env, check=True,
                            capture_output=True, timeout=3600)
        err = d / "ours.err.txt"
        assert not err.exists(), err.read_text()[-3000:]
        with np.load(d / "ours.out.npz") as f:
            return f["arr_0"]


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    from refenv import ref_available

    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    return _Compared(tmp_path_factory.mktemp("xnnpack-quant"))


LLAMA_DIFFERS = pytest.mark.xfail(
    strict=True, reason="the float32 partitioning of llama_decoder already differs from "
    "ExecuTorch's (it leaves mul/expand_copy portable: 10 delegates to our 8)")
HEAVY = ("mobilenet_v2", "llama_decoder")


def _params(cases: list[str], llama_xfail: bool = False) -> list:
    out = []
    for c in cases:
        marks = [pytest.mark.slow] if c.startswith(HEAVY) else []
        if llama_xfail and c.startswith("llama"):
            marks.append(LLAMA_DIFFERS)
        out.append(pytest.param(c, marks=marks))
    return out


@pytest.mark.compat
@pytest.mark.parametrize("case", _params(CASES, llama_xfail=True))
def test_blob_equals_executorchs(case, compared):
    mine, theirs = PteFile.parse(compared.ours(case)[0]), compared.theirs(case)

    def graphs_of(f: PteFile):
        out = []
        for dl in f.program.execution_plan[0].delegates:
            g = deserialize_xnnpack_binary(f.delegate_bytes(dl)).graph
            for n in g.xnodes:
                n.debug_handle = 0
            out.append(g)
        return out

    assert graphs_of(mine) == graphs_of(theirs)
    assert mine.named_data_keys() == theirs.named_data_keys()
    for key in mine.named_data_keys():
        assert bytes(mine.named_data(key)) == bytes(theirs.named_data(key)), key
    assert {o.name for o in mine.program.execution_plan[0].operators} == \
        {o.name for o in theirs.program.execution_plan[0].operators}


@pytest.mark.compat
@pytest.mark.parametrize("case", _params(CASES))
def test_runs_in_executorch_like_the_fake_quantized_model(case, compared):
    got = compared.run_ours(case)
    _, want, bound = compared.ours(case)
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= bound, case


def _example_cases() -> list:
    from edgetorch.examples import EXAMPLES

    light = ("tiny_classifier", "simple_model", "mlp", "cnn", "shape_ops")
    return [pytest.param(f"{name}:{mode}", marks=[] if name in light else [pytest.mark.slow])
            for name in EXAMPLES for mode in ("static", "dynamic")] + [
        pytest.param("llama_decoder:8da4w", marks=[pytest.mark.slow])]


@pytest.mark.compat
@pytest.mark.parametrize("case", _example_cases())
def test_every_quantized_example_runs_in_executorch(case, compared):
    """Never a .pte ExecuTorch cannot run: every example, quantized and lowered by us, loads
    and runs in ExecuTorch 1.5.1 (float32 ones: test_xnnpack_compat_aot). Deep networks
    accumulate XNNPACK's requantization roundings (ResNet-18 static: 2 output steps), so
    the bound here is 5% of the output range; the strict bounds hold for CASES above."""
    got = compared.run_ours(case)
    pte, want, _ = compared.ours(case)
    assert_weights_constant(pte)
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 0.05 * float(want.max() - want.min()), case


SIZED = ["cnn:static", "mlp:static", "mlp:dynamic", "linear_heavy:static",
         "linear_heavy:dynamic", "linear_heavy:8da4w"]


@pytest.mark.parametrize("case", SIZED)
def test_quantized_programs_are_small(case):
    """int8 <= 0.35x float32 (static, dynamic); 8da4w <= 0.2x on a linear-heavy model.
    (cnn:dynamic is no case: dynamic quantization leaves its convolutions float, as in
    ExecuTorch; MobileNetV2 is 0.27x static, checked by hand, too slow here.)"""
    name, mode = case.split(":")
    ratio = len(lower(name, mode)[0]) / len(lower(name, "fp32")[0])
    assert ratio <= (0.2 if mode == "8da4w" else 0.35), ratio
