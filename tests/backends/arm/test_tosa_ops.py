"""Operators and patterns beyond the original seed models (issue 9's gaps): each small model
lowers into one delegate whose simulation (tosa-tools' reference model) stays within 2
quantization steps of the quantized eager model, with the TOSA operators ExecuTorch 1.5.1
emits for it (byte equality with ExecuTorch's own ``.tosa`` is in ``test_tosa_compat.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from arm_env import require_tosa_tools

require_tosa_tools()

from arm_flow import run_flow  # noqa: E402

from edgetorch.backends.arm.runtime.tosa_graph import read_tosa  # noqa: E402

Q_STEPS = 2

# model -> TOSA operators (besides CONST / CONST_SHAPE) ExecuTorch's graph has for it.
EXPECTED_OPS = {
    # mean((2, 3)) decomposes to sum + mul(1/N) (DecomposeMeanDimPass); Linear -> 1x1 CONV2D
    "gap_linear": {"TRANSPOSE": 1, "CONV2D": 2, "RESCALE": 7, "REDUCE_SUM": 2, "MUL": 1,
                   "RESHAPE": 1},
    "gap_keepdim_linear": {"TRANSPOSE": 1, "CONV2D": 2, "RESCALE": 7, "REDUCE_SUM": 2,
                           "MUL": 1, "RESHAPE": 1},
    # 3x3 stride 2 without padding on 8x8: the input is SLICEd to 7x7 (SizeAdjustInputPass)
    "conv_crop": {"TRANSPOSE": 2, "SLICE": 1, "CONV2D": 1, "RESCALE": 1},
    "conv_crop_pad": {"TRANSPOSE": 2, "SLICE": 2, "CONV2D": 2, "RESCALE": 2},
}


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = run_flow(name, tmp_path_factory.mktemp(name))
        return cache[name]
    return get


@pytest.mark.parametrize("name", sorted(EXPECTED_OPS))
def test_single_delegate_with_executorch_ops(flow, name):
    f = flow(name)
    assert f.partitioner.rejected == {}, f.partitioner.rejected_nodes_report()
    files = f.tosa_files()
    assert [p.name for p in files] == ["output_tag0_TOSA-1.0+INT.tosa"]
    counts = read_tosa(files[0].read_bytes()).main.op_counts()
    ops = {k: v for k, v in counts.items() if k not in ("CONST", "CONST_SHAPE")}
    assert ops == EXPECTED_OPS[name]


@pytest.mark.parametrize("name", sorted(EXPECTED_OPS))
def test_simulation_within_two_steps_of_quantized_eager(flow, name):
    f = flow(name)
    out = f.run()
    assert out.shape == f.quantized_out.shape
    steps = np.abs(out - f.quantized_out).max() / f.out_scale
    assert steps <= Q_STEPS, f"{name}: {steps:.2f} quantization steps from the eager model"


def test_crop_slices_to_what_the_kernel_reaches(flow):
    main = read_tosa(flow("conv_crop_pad").tosa_files()[0].read_bytes()).main
    slices = [main.tensor(o.outputs[0]).shape for o in main.operators if o.op == "SLICE"]
    # 11 -> 9 for 3x3 stride 3 (11 - 3) % 3 = 2; then 3 -> 2 for 2x2 stride 2
    assert slices == [(1, 9, 9, 3), (1, 2, 2, 4)]
