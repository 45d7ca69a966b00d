"""Per-layer quantization debugging on Arm targets: the TOSA simulation logs every TOSA
operator's output, and the debugger reads them back as the Edge layers' values (mapped by the
lowering, dequantized with each layer's output quantizer, in torch's layout).

The model is the digits CNN with one planted bad layer (tests/devtools/quant_debug/digits.py:
``conv2`` has outlier weights that int8 cannot hold)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from arm_env import in_ci, require_tosa_tools, skip_or_fail

require_tosa_tools()
if importlib.util.find_spec("sklearn") is None:  # the digits data set comes with it
    _why = "scikit-learn is not installed in the Arm venv (make test-arm installs it)"
    if in_ci():
        pytest.fail(_why, pytrace=False)
    pytest.skip(_why, allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parents[2] / "devtools" / "quant_debug"))
import digits  # noqa: E402

from edgetorch.backends.arm.runtime.tosa_sim import TosaGraphRunner  # noqa: E402
from edgetorch.devtools.quant_debug import debug_quantization  # noqa: E402
from edgetorch.devtools.quant_debug.data import load_samples  # noqa: E402
from edgetorch.devtools.quant_debug.recipes import Recipe, lower, quantize  # noqa: E402
from edgetorch.devtools.quant_debug.runtime_values import TosaValues  # noqa: E402
from edgetorch.runtime.event_tracer import DebugEvent, RecordingEventTracer  # noqa: E402

SAMPLES = 32
TARGET = "ethos-u55-128"


@pytest.fixture(scope="module")
def report():
    return debug_quantization(digits.planted_cnn(), digits.example_inputs(),
                              digits.test_loader(SAMPLES), f"{TARGET}:static",
                              stages=["fake_quant", TARGET], show_progress=False)


def test_ethos_u_ranks_the_planted_layer_first(report):
    assert report.stages == ["float", "fake_quant", TARGET] and not report.skipped
    entry = report.entry
    assert (entry.stage, entry.layer, entry.module) == ("fake_quant", "conv2d_1", "conv2")
    assert report.module_ranking()[0] == "conv2"
    # on the NPU's arithmetic too, the first layer whose output is lost is conv2's
    ethos = report.layers().set_index("layer")[TARGET]
    lost = [layer for layer, sqnr in ethos.items() if sqnr < 10.0]
    assert lost[0] == "relu_1" and ethos["relu"] > 40.0


def test_ethos_u_layer_values_come_from_the_tosa_operators(report):
    """Every quantized layer has a value inside the delegate: the output of the TOSA operator
    the lowering made for it. A convolution followed by its ReLU is one CONV2D + RESCALE whose
    saturation is the ReLU: the value is the ReLU's, the convolution has none."""
    ethos = report.layers().set_index("layer")[TARGET]
    for layer in ("relu", "relu_1", "max_pool2d", "flatten", "linear"):
        assert np.isfinite(ethos[layer]), layer
    assert math.isnan(ethos["conv2d"]) and math.isnan(ethos["conv2d_1"])


def test_ethos_u_values_agree_with_fake_quant_within_a_step(report):
    """TOSA computes the int8 arithmetic itself (int32 accumulators, a RESCALE with a 32-bit
    multiplier): a value lands on the fake-quantized model's grid point or, a rounding tie
    broken the other way, the next one -- one output step at the first layer; deeper layers
    read inputs up to a step apart, which stays within a second step on this model. The
    NHWC tensors (conv, max pool) and the flatten behind a TRANSPOSE only match this way if
    the layouts are read back right."""
    qranges = {la.name: la.qrange for la in report.run.layers}
    first = next(la.name for la in report.run.layers if la.qrange is not None)
    checked = 0
    for (layer, stage), acc in report.run.vs_prev.items():
        if stage == TARGET and qranges[layer] is not None:
            steps = acc.max_abs / qranges[layer].scale
            assert steps <= (1 if layer == first else 2) + 1e-4, (layer, steps)
            checked += 1
    assert checked == 5
    out = report.outputs().set_index("stage").sqnr_db
    assert abs(out[TARGET] - out["fake_quant"]) < 0.05


@pytest.fixture(scope="module")
def tosa_delegate():
    """The digits CNN's TOSA delegate (a ``LoweredBackendModule``: the partition and its
    ``.tosa``)."""
    model, example = digits.planted_cnn(), digits.example_inputs()
    samples = load_samples(digits.test_loader(16), example)
    recipe = Recipe.parse("tosa:static")
    lowered = lower(recipe, quantize(recipe, model, example, samples).exported)
    return next(m for _, m in lowered.exported_program().graph_module.named_children()
                if getattr(m, "backend_id", None) == "TOSABackend")


def test_the_simulation_logs_every_operator_output(tosa_delegate):
    """With a tracer that asks for delegate values, the TOSA runner logs each non-constant
    operator's result by tensor name (and returns the same outputs); without, it logs none."""
    runner = TosaGraphRunner(tosa_delegate.processed_bytes)
    x = np.random.default_rng(0).integers(-128, 128, (8, 1, 8, 8), dtype=np.int8)
    plain = runner.run([x])
    quiet = RecordingEventTracer(1 << 24)  # values, but not the delegates' own
    assert [np.array_equal(a, b) for a, b in zip(runner.run([x], quiet), plain)] == [True]
    assert not quiet.run_blocks or not quiet.run_blocks[-1].events
    tracer = RecordingEventTracer(1 << 24, delegate_intermediate_outputs=True)
    out = runner.run([x], tracer)
    assert np.array_equal(out[0], plain[0])
    logged = {e.delegate_debug_id_str: e.value for e in tracer.run_blocks[-1].events
              if isinstance(e, DebugEvent)}
    main = runner.graph.main
    computed = [o for op in main.operators if op.op not in ("CONST", "CONST_SHAPE")
                for o in op.outputs]
    assert list(logged) == computed and main.outputs[0] in logged
    assert np.array_equal(logged[main.outputs[0]], out[0])
    for name, value in logged.items():
        spec = main.tensor(name)
        assert value.shape == spec.shape and value.dtype.name == spec.dtype.lower(), name
    # the output is the last RESHAPE of the last RESCALE: the logged RESCALE holds its values
    last = next(op for op in reversed(main.operators) if op.op == "RESHAPE")
    assert np.array_equal(logged[last.inputs[0]].reshape(out[0].shape), out[0])


def test_vgf_and_tosa_targets_read_the_same_operator_values():
    """VGF delegates are simulated from the TOSA graph they were converted from, as TOSA
    delegates are: both stages give every layer's value, and the same ones (one lowering)."""
    from edgetorch.backends.arm.vgf.model_converter import find_model_converter_binary

    if find_model_converter_binary() is None:
        skip_or_fail("the ML SDK model converter is not installed: pip install "
                     "'edgetorch[vgf]' (make test-arm installs it)")
    model, example = digits.planted_cnn(), digits.example_inputs()
    reports = {target: debug_quantization(model, example, digits.test_loader(16),
                                          f"{target}:static", stages=[target],
                                          show_progress=False)
               for target in ("tosa", "vgf")}
    layers = {t: r.layers().set_index("layer")[t] for t, r in reports.items()}
    assert not reports["vgf"].skipped
    assert list(layers["vgf"].dropna().index) == ["relu", "relu_1", "max_pool2d", "flatten",
                                                  "linear"]
    assert np.allclose(layers["vgf"].dropna(), layers["tosa"].dropna(), rtol=0, atol=0)


def test_the_value_map_is_the_graphs_own(tosa_delegate, caplog):
    """Each quantized layer's tensor: the RESCALE a convolution's ReLU quantizer sets, the
    MAX_POOL2D, the RESHAPE of the flatten, the linear's RESCALE; NHWC inside, torch's order
    after the flatten's TRANSPOSE. Lowering the partition again must give the graph the
    delegate runs: a map of another graph gives no values (and says so)."""
    reader = TosaValues(tosa_delegate, tosa_delegate.processed_bytes)
    main = TosaGraphRunner(tosa_delegate.processed_bytes).graph.main
    producer = {out: op.op for op in main.operators for out in op.outputs}
    ops = sorted(producer[t] for t in reader.by_tensor)
    # conv1+relu, conv2+relu: RESCALE; max pool; the flatten and the linear: a RESHAPE each
    # (the linear is a 1x1 CONV2D, its RESCALE, and a RESHAPE to [8, 10])
    assert ops == ["MAX_POOL2D", "RESCALE", "RESCALE", "RESHAPE", "RESHAPE"]
    perms = {t: v.perm for t, vs in reader.by_tensor.items() for _, v in vs}
    pool = next(t for t in perms if producer[t] == "MAX_POOL2D")
    assert perms[pool] == (0, 2, 3, 1)
    assert {perms[t] for t in perms if producer[t] == "RESHAPE"} == {(0, 1)}
    assert main.outputs[0] in reader.by_tensor  # the linear's, the block's output
    with caplog.at_level("WARNING"):
        other = TosaValues(tosa_delegate, tosa_delegate.processed_bytes + b"\0")
    assert not other.by_tensor and "another TOSA graph" in caplog.text
