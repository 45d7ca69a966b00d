"""The examples through OpenVINO, both ways against ExecuTorch 1.5.1 and against eager.

Lowered by edgetorch: run in our runtime (f32 precision within 1e-4; device default within
the stated bf16 tolerance) and in ExecuTorch's, which ignores ``inference_precision`` and
must give exactly our device-default numbers (same OpenVINO, same blob). Lowered by
ExecuTorch: run in ours. Delegate structure equal to ExecuTorch's.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np
import pytest
from ov_helpers import (
    CPU,
    F32,
    F32_TOL,
    default_tolerance,
    lower_example,
    max_diff,
    run_ours,
    structure,
)

FAST = ["tiny_classifier", "cnn", "transformer_encoder"]
SLOW = ["mobilenet_v2", "resnet18"]
EXAMPLES = FAST + [pytest.param(n, marks=pytest.mark.slow) for n in SLOW]
_TMP = Path(tempfile.mkdtemp(prefix="edgetorch-ov-tests-"))


@functools.cache
def ours(name: str, f32: bool):
    return lower_example(name, (CPU, F32) if f32 else (CPU,))


@functools.cache
def theirs(name: str):
    from refenv_openvino import ref_ov_export

    return ref_ov_export(name, _TMP / f"et_{name}.pte")


@pytest.mark.parametrize("name", EXAMPLES)
def test_ours_f32_precision_matches_eager(name):
    pte, inputs, eager = ours(name, True)
    assert max_diff(run_ours(pte, inputs), eager) <= F32_TOL


@pytest.mark.parametrize("name", EXAMPLES)
def test_ours_device_default_within_stated_tolerance(name):
    pte, inputs, eager = ours(name, False)
    outs = run_ours(pte, inputs)
    assert max_diff(outs, eager) <= default_tolerance(eager)
    assert max_diff(run_ours(pte, inputs, precision="f32"), eager) <= F32_TOL


@pytest.mark.compat
@pytest.mark.parametrize("name", EXAMPLES)
def test_ours_runs_in_executorch(name, ref_ov, monkeypatch):
    from refenv_openvino import ref_ov_run

    from edgetorch.backends.openvino import runtime

    pte, inputs, eager = ours(name, True)
    path = _TMP / f"ours_{name}.pte"
    path.write_bytes(pte)
    outs = ref_ov_run(path, inputs)
    # ExecuTorch's runtime reads only "device", so it runs in the device default precision:
    # our runtime, told to drop the precision spec, must give the very same numbers.
    assert max_diff(outs, eager) <= default_tolerance(eager)
    parse = runtime.parse_options
    monkeypatch.setattr(runtime, "parse_options", lambda specs, **kw: parse(
        {k: v for k, v in specs.items() if k != "inference_precision"}, **kw))
    for a, b in zip(outs, run_ours(pte, inputs), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.compat
@pytest.mark.parametrize("name", EXAMPLES)
def test_executorch_lowered_runs_in_ours(name, ref_ov):
    path, inputs, eager = theirs(name)
    pte = path.read_bytes()
    assert max_diff(run_ours(pte, inputs), eager) <= default_tolerance(eager)
    assert max_diff(run_ours(pte, inputs, precision="f32"), eager) <= F32_TOL


@pytest.mark.compat
@pytest.mark.parametrize("name", EXAMPLES)
def test_delegate_structure_equals_executorch(name, ref_ov):
    path, _, _ = theirs(name)
    assert structure(ours(name, False)[0]) == structure(path.read_bytes())
