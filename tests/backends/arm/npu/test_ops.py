"""Per-operation checks of the command-stream simulator: single-operator (and tiny) models
lowered to TOSA, compiled by Vela for every U55/U65 MAC config, simulated from the command
stream and compared with tosa-tools' reference model on the same TOSA graph, bit for bit, on
random int8 inputs (full range, so padding, zero points and saturation are all exercised).

The TOSA comes from edgetorch's Ethos-U flow where our lowering covers the operator, otherwise
from ExecuTorch 1.5.1's (compat: needs the Arm reference venv); ``NAME@a16w8`` is ExecuTorch's
int16-activation quantization of the same model.
"""

from __future__ import annotations

import pytest
from npu_models import A16W8
from npu_util import U55_U65, compare_with_reference, vela_blob

OURS = ["conv3x3", "conv3x3_s2", "conv3x3_dil2", "conv5x5_nobias", "conv1x1_wide",
        "conv_valid_rect", "depthwise3x3", "depthwise3x3_s2", "depthwise_mult2", "avgpool2x2",
        "avgpool3x3_s2", "global_avgpool", "mean_dim", "add", "add_bcast", "conv_relu_add"]
ET_OPS = ["maxpool2x2", "maxpool3x3_pad", "add_scalar", "sub", "sub_bcast_c", "mul",
          "mul_scalar", "minimum", "maximum", "abs", "relu", "relu6", "leaky_relu", "sigmoid",
          "tanh", "hardswish", "cat", "linear", "upsample_nearest", "conv_transpose", "sum_dim",
          "softmax", "pad", "exp", "rsqrt"] + [f"{m}@a16w8" for m in A16W8]
ET_XFAIL: dict[str, str] = {}


def _check(tosas: list[bytes], target: str, seed: int) -> None:
    assert tosas, "the flow produced no delegate"
    for k, tosa in enumerate(tosas):
        diffs, prog = compare_with_reference(tosa, vela_blob(tosa, target), trials=3, seed=seed)
        assert prog.last_stats.ops, "the command stream ran no operation"
        assert diffs == [0, 0, 0], f"partition {k}: max |simulator - reference| per trial {diffs}"


@pytest.mark.parametrize("target", U55_U65)
@pytest.mark.parametrize("name", OURS)
def test_op_from_our_tosa(our_tosa, name, target):
    _check(our_tosa(name), target, seed=len(name))


@pytest.mark.compat
@pytest.mark.parametrize("target", U55_U65)
@pytest.mark.parametrize("name", ET_OPS)
def test_op_from_executorch_tosa(et_ops, name, target):
    if name in ET_XFAIL:
        pytest.xfail(ET_XFAIL[name])
    out = et_ops(name)
    _check([f.read_bytes() for f in sorted((out / "inter").glob("output_*.tosa"))], target,
           seed=len(name))
