"""Against ExecuTorch 1.5.1 (``executorch[ethos-u]``, via ``ref_arm.py`` in the Arm reference
venv): for the same seeded model, our ``.tosa`` is byte-equal to ExecuTorch's; ExecuTorch's
TOSA ``.pte`` runs in our runtime (TOSABackend through tosa-tools' reference model) with the
outputs of tosa-tools' reference model run directly, and within 2 quantization steps of
ExecuTorch's quantized eager model."""

from __future__ import annotations

import numpy as np
import pytest
from arm_env import ref_tosa, require_tosa_tools

require_tosa_tools()

from arm_flow import run_flow  # noqa: E402

from edgetorch.backends.arm.runtime.tosa_sim import TosaGraphRunner  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

SPEC = "TOSA-1.0+INT"
# Bound vs the fake-quantized eager model, in output quantization steps: 2 for the small
# models (the issue's bound); integer rescale rounding accumulates over MobileNetV2's 53
# layers (ExecuTorch's own reference-model run is 9-11 steps off at worst, mean ~2).
MAX_STEPS = {"add": 2, "convnet": 2, "nobias": 2, "mv2": 16}
U55 = "TOSA-1.0+INT+int16+int4+u55"   # Ethos-U55/U65 (e.g. ethos-u55-128)
U85 = "TOSA-1.0+INT+int16+int4+cf"    # Ethos-U85 (e.g. ethos-u85-256)
# Small models of issue 9's gaps and operator coverage (tests/backends/arm/arm_models.py).
OP_MODELS = ["gap_linear", "gap_keepdim_linear", "conv_crop", "conv_crop_pad", "hardswish",
             "sigmoid", "tanh", "hardsigmoid", "max_pool2d", "sub", "mul", "cat", "sub_plain",
             "mul_plain"]
ON_ETHOSU = ["gap_linear", "conv_crop"]
# Transformer components (issue 31), each on its own: linear on token tensors, bmm/matmul,
# softmax/log_softmax as ExecuTorch decomposes them, GELU/SiLU tables, means, broadcasts.
TRANSFORMER_OPS = ["linear_3d", "linear_2d", "linear_nobias_4d", "bmm", "matmul_4d",
                   "softmax_last", "log_softmax_last", "gelu", "gelu_tanh", "silu_3d",
                   "mean_last", "mean_tokens", "add_3d", "add_broadcast", "mul_3d", "cat_3d",
                   # layer_norm: its var's mean is fused with its own (FuseDuplicateUsers);
                   # the views and permutes move as ExecuTorch's propagation passes move them
                   "layer_norm_only", "permute_3d", "transpose_4d", "reshape_3d"]
MAX_STEPS.update(dict.fromkeys(OP_MODELS + TRANSFORMER_OPS, 2))
CASES = [pytest.param("add"), pytest.param("convnet"), pytest.param("nobias"),
         pytest.param(f"convnet@{U55}", id="convnet-u55"),
         *[pytest.param(m) for m in OP_MODELS],
         *[pytest.param(m) for m in TRANSFORMER_OPS],
         *[pytest.param(f"{m}@{U55}", id=f"{m}-u55") for m in ON_ETHOSU],
         *[pytest.param(f"{m}@{U85}", id=f"{m}-u85") for m in ON_ETHOSU],
         pytest.param("mv2", marks=pytest.mark.slow)]


def _npz(path):
    with np.load(path) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k[4:]))]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    cache = {}

    def get(case):
        if case not in cache:
            name, _, spec = case.partition("@")
            ref = ref_tosa(name, spec or SPEC, tmp_path_factory.mktemp(f"ref_{name}"))
            ours = run_flow(name, tmp_path_factory.mktemp(f"ours_{name}"), spec or SPEC)
            cache[case] = (ref, ours)
        return cache[case]
    return get


@pytest.mark.compat
@pytest.mark.parametrize("name", CASES)
def test_tosa_byte_equal_to_executorch(cases, name):
    ref, ours = cases(name)
    ref_files = sorted((ref / "inter").glob("output_*.tosa"))
    our_files = ours.tosa_files()
    assert [f.name for f in our_files] == [f.name for f in ref_files]
    for a, b in zip(our_files, ref_files):
        assert a.read_bytes() == b.read_bytes(), f"{a.name} differs from ExecuTorch's"


@pytest.mark.compat
@pytest.mark.parametrize("name", CASES)
def test_executorch_tosa_pte_runs_in_our_runtime(cases, name):
    import tosa_reference_model as trm

    ref, ours = cases(name)
    inputs = _npz(ref / "inputs.npz")
    expected = _npz(ref / "quant_out.npz")[0]
    method = Runtime.get().load_program((ref / "model.pte").read_bytes()).load_method("forward")
    out = np.asarray(method.execute(inputs)[0])
    steps = np.abs(out - expected) / ours.out_scale
    name = name.partition("@")[0]
    print(f"{name}: steps from ExecuTorch's quantized eager model: max {steps.max():.2f} "
          f"mean {steps.mean():.3f} p99 {np.percentile(steps, 99):.2f}")
    assert steps.max() <= MAX_STEPS[name] + 1e-6
    np.testing.assert_array_equal(out, ours.run())  # our .pte gives the same numbers
    # The same int8 tensor through tosa-tools' reference model directly, on ExecuTorch's .tosa.
    blob = sorted((ref / "inter").glob("output_*.tosa"))[0].read_bytes()
    runner = TosaGraphRunner(blob)
    rng = np.random.default_rng(1)
    xs = [rng.integers(-128, 128, size=s.shape, dtype=np.int8) for _, s in runner.input_specs]
    direct, status = trm.run(blob, xs, verbosity="NONE")
    assert status == trm.GraphStatus.TOSA_VALID
    for a, b in zip(runner.run(xs), direct):
        np.testing.assert_array_equal(a, b)


@pytest.mark.compat
@pytest.mark.parametrize("name", CASES)
def test_our_pte_matches_executorch_quantized_model(cases, name):
    ref, ours = cases(name)
    name = name.partition("@")[0]
    expected = _npz(ref / "quant_out.npz")[0]
    np.testing.assert_array_equal(ours.quantized_out, expected)  # same qparams as ExecuTorch
    out = ours.run()
    assert np.abs(out - expected).max() / ours.out_scale <= MAX_STEPS[name] + 1e-6


@pytest.mark.compat
def test_multi_partition_u55_matches_executorch_structure(cases):
    """conv -> gt/where (refused by U55) -> conv -> gt/where -> conv: three delegates. Tag
    numbering and file names, the operators of each delegate and every qparam equal
    ExecuTorch's; the rejected nodes are the comparisons and selects."""
    from edgetorch.backends.arm.runtime.tosa_graph import read_tosa

    ref, ours = cases(f"two_partitions@{U55}")
    ref_files = sorted((ref / "inter").glob("output_*.tosa"))
    assert [f.name for f in ours.tosa_files()] == [f.name for f in ref_files]
    assert len(ref_files) == 3
    for a, b in zip(ours.tosa_files(), ref_files):
        ga, gb = (read_tosa(f.read_bytes()).main for f in (a, b))
        ops = [(o.op, tuple(ga.tensor(t).shape for t in o.outputs if t in
                            {x.name for x in ga.tensors})) for o in ga.operators if o.op != "CONST"]
        ref_ops = [(o.op, tuple(gb.tensor(t).shape for t in o.outputs if t in
                                {x.name for x in gb.tensors})) for o in gb.operators
                   if o.op != "CONST"]
        assert ops == ref_ops, a.name
    rejected = {target for target, _ in ours.partitioner.rejected.values()}
    assert rejected == {"aten.gt.Scalar", "aten.where.self"}
    assert all("Ethos-U55" in why for _, why in ours.partitioner.rejected.values())
    np.testing.assert_array_equal(ours.quantized_out, _npz(ref / "quant_out.npz")[0])


@pytest.mark.compat
@pytest.mark.xfail(strict=True, reason="ExecuTorch turns gt's scalar 0 into a quantized constant "
                   "that the delegate computes and outputs (aten_full_default_pre_computed); "
                   "edgetorch keeps gt.Scalar whole on the CPU, so input names and one output "
                   "differ")
def test_multi_partition_u55_tosa_byte_equal(cases):
    ref, ours = cases(f"two_partitions@{U55}")
    ref_files = sorted((ref / "inter").glob("output_*.tosa"))
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(ours.tosa_files(), ref_files))
