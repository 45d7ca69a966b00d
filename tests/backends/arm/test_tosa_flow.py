"""edgetorch's own TOSA flow: quantizer rules, partitioner, lowering and the runtime
TOSABackend (tosa-tools' reference model) against the quantized eager model."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from arm_env import require_tosa_tools

require_tosa_tools()

import arm_models  # noqa: E402
from arm_flow import quantize, run_flow  # noqa: E402

from edgetorch.backends.arm.runtime.tosa_graph import read_tosa  # noqa: E402
from edgetorch.backends.arm.runtime.tosa_sim import TosaGraphRunner, run_tosa  # noqa: E402
from edgetorch.errors import InvalidArgumentError, InvalidProgramError  # noqa: E402

Q_STEPS = 2  # the bound vs the quantized eager model, in output quantization steps


@pytest.fixture(scope="module")
def flows(tmp_path_factory):
    return {name: run_flow(name, tmp_path_factory.mktemp(name))
            for name in ("add", "convnet", "convnet_f_relu6", "nobias")}


@pytest.mark.parametrize("name", ["add", "convnet", "convnet_f_relu6", "nobias"])
def test_simulation_matches_quantized_eager(flows, name):
    flow = flows[name]
    out = flow.run()
    steps = np.abs(out - flow.quantized_out).max() / flow.out_scale
    assert out.shape == flow.quantized_out.shape
    assert steps <= Q_STEPS, f"{name}: {steps:.2f} quantization steps from the eager model"


def test_one_delegate_int8_io_boundary_qdq_on_cpu(flows):
    for name, flow in flows.items():
        files = flow.tosa_files()
        assert [f.name for f in files] == ["output_tag0_TOSA-1.0+INT.tosa"], name
        gm = flow.edge.exported_program().graph_module
        ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        assert sum("executorch_call_delegate" in op for op in ops) == 1, ops
        assert any("quantize_per_tensor" in op and "dequantize" not in op for op in ops), ops
        assert any("dequantize_per_tensor" in op for op in ops), ops
        main = read_tosa(files[0].read_bytes()).main
        assert all(main.tensor(n).dtype == "INT8" for n in main.inputs + main.outputs), name


def test_tosa_structure(flows):
    add = read_tosa(flows["add"].tosa_files()[0].read_bytes()).main
    assert add.op_counts() == {"CONST": 12, "RESCALE": 3, "ADD": 1}
    conv = read_tosa(flows["convnet"].tosa_files()[0].read_bytes()).main
    counts = conv.op_counts()
    assert counts["CONV2D"] == 2 and counts["DEPTHWISE_CONV2D"] == 1  # the Linear is a 1x1 conv
    assert counts["AVG_POOL2D"] == 1 and counts["TRANSPOSE"] == 1 and counts["RESHAPE"] == 1
    names = {t.name: t for t in conv.tensors}
    assert names["aten_convolution_default_weight_ohwi"].shape == (8, 3, 3, 3)
    assert names["aten_convolution_default_1_weight_hwicm"].shape == (3, 3, 8, 1)
    assert names["b__frozen_param1"].dtype == "INT32"  # int32 bias
    assert "CLAMP" not in counts  # ReLU and ReLU6 fold into the RESCALE saturation


def test_f_relu6_is_quantized_like_nn_relu6(flows):
    """ExecuTorch leaves F.relu6 float (two delegates and a CPU hardtanh); we do not."""
    a = flows["convnet"].tosa_files()[0].read_bytes()
    b = flows["convnet_f_relu6"].tosa_files()[0].read_bytes()
    assert a == b
    np.testing.assert_array_equal(flows["convnet"].quantized_out,
                                  flows["convnet_f_relu6"].quantized_out)


def test_simulation_equals_reference_model_run_directly(flows):
    import tosa_reference_model as trm

    blob = flows["convnet"].tosa_files()[0].read_bytes()
    runner = TosaGraphRunner(blob)
    (name, spec), = runner.input_specs
    x = np.random.default_rng(0).integers(-128, 128, size=spec.shape, dtype=np.int8)
    direct, status = trm.run(blob, [x], verbosity="NONE")
    assert status == trm.GraphStatus.TOSA_VALID
    np.testing.assert_array_equal(runner.run([x])[0], direct[0])


def test_simulation_input_errors(flows):
    blob = flows["add"].tosa_files()[0].read_bytes()
    with pytest.raises(InvalidArgumentError, match="takes 2"):
        run_tosa(blob, [np.zeros((1, 3, 8, 8), np.int8)])
    with pytest.raises(InvalidArgumentError, match="INT8"):
        run_tosa(blob, [np.zeros((1, 3, 8, 8), np.float32)] * 2)
    with pytest.raises(InvalidProgramError, match="not a TOSA flatbuffer"):
        TosaGraphRunner(b"\0" * 64)


def test_quantizer_works_without_check_guards_false():
    model, inputs = arm_models.convnet()
    converted = quantize(model, inputs)  # export(...).module() with its guard call
    targets = [str(n.target) for n in converted.graph.nodes]
    assert any("quantize_per_tensor" in t for t in targets)
    assert any("dequantize_per_channel" in t for t in targets)  # int8 per-channel weights


def test_quantizer_int8_weights_int32_bias():
    model, inputs = arm_models.convnet()
    converted = quantize(model, inputs)
    dq = [n for n in converted.graph.nodes if "dequantize_per_channel" in str(n.target)]
    dtypes = [n.args[-1] for n in dq]
    assert dtypes.count(torch.int8) == 3 and dtypes.count(torch.int32) == 3
    assert all(n.args[4:6] == (-127, 127) for n in dq if n.args[-1] == torch.int8)


def test_set_module_type_none_keeps_float_and_partitioner_reports_why(caplog):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from edgetorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from edgetorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    model, inputs = arm_models.convnet()
    cs = TosaCompileSpec("TOSA-1.0+INT")
    q = TOSAQuantizer(cs).set_global(get_symmetric_quantization_config())
    q.set_module_type(torch.nn.Linear, None)
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), q)
    prepared(*inputs)
    converted = convert_pt2e(prepared)
    part = TOSAPartitioner(cs)
    with caplog.at_level(logging.INFO, logger="edgetorch.backends.arm.tosa.partitioner"):
        to_edge_transform_and_lower(torch.export.export(converted, inputs), partitioner=[part])
    report = part.rejected_nodes_report()
    assert "addmm" in report and "operator support list" in report  # float: decomposed
    assert "rejected nodes" in caplog.text


class _Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        return torch.where(y > 0, y, x.mean() * y)


def test_u55_rejects_comparisons_with_the_u55_reason():
    from edgetorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from edgetorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model, inputs = _Gate().eval(), (torch.randn(1, 3, 4, 4),)
    reports = {}
    for spec in ("TOSA-1.0+INT+int16+int4+u55", "TOSA-1.0+INT+int16+int4+cf"):
        cs = TosaCompileSpec(spec)
        converted = quantize(model, inputs, cs)
        part = TOSAPartitioner(cs)
        to_edge_transform_and_lower(torch.export.export(converted, inputs), partitioner=[part])
        reports[spec] = part.rejected_nodes_report()
    assert "not supported on Ethos-U55/U65" in reports["TOSA-1.0+INT+int16+int4+u55"]
    assert "not supported on Ethos-U55/U65" not in reports["TOSA-1.0+INT+int16+int4+cf"]
    assert "aten.gt" in reports["TOSA-1.0+INT+int16+int4+cf"]  # rejected there for another reason


class _Unlowered(torch.nn.Module):
    """Ops the lowering does not cover yet must stay on the CPU, not fail the export."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = torch.nn.functional.hardtanh(self.conv(x), -0.5, 0.5)  # a CLAMP (delegated)
        # permute (lowered) then a strided slice (no rule yet) and a standalone relu
        return torch.relu(y.permute(0, 2, 3, 1)[..., ::2])


def test_unlowered_ops_fall_back_to_cpu_with_reasons(tmp_path):
    from edgetorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from edgetorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from edgetorch.runtime import Runtime

    torch.manual_seed(0)
    model, inputs = _Unlowered().eval(), (torch.randn(1, 3, 4, 4),)
    cs = TosaCompileSpec("TOSA-1.0+INT")
    converted = quantize(model, inputs, cs)
    part = TOSAPartitioner(cs)
    edge = to_edge_transform_and_lower(torch.export.export(converted, inputs), partitioner=[part])
    report = part.rejected_nodes_report()
    print(report)
    assert "slice_copy" in report and "step 2 is not lowered yet" in report
    assert "permute_copy" not in report
    assert "hardtanh" not in report and "relu" not in report  # CLAMPs, delegated
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    out = Runtime.get().load_program(pte).load_method("forward").execute([inputs[0].numpy()])[0]
    with torch.no_grad():
        expected = converted(*inputs).numpy()
    np.testing.assert_allclose(out, expected, atol=1e-5)
