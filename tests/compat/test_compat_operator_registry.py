"""Our kernel registry against the operators ExecuTorch 1.5.1's runtime registers.

In scope: everything ExecuTorch's runtime reports on its own (the portable library, the prim
ops, and the optimized-only ``_fft_r2c``/``_fft_c2r``): none may be missing. The quantized
library (``quantized_decomposed::*``, registered by importing ``executorch.kernels.quantized``)
is covered by ``edgetorch.kernels.quantized``, also without a gap. The LLM custom ops
(``llama::*``, ``preprocess::*``) belong to ExecuTorch's LLM extension and are out of scope here.
"""

from __future__ import annotations

import functools

import pytest
from refenv import ref_available, ref_operator_names

from edgetorch.kernels import KERNELS
from edgetorch.kernels.support import (
    EXECUTORCH_OPTIMIZED_ONLY,
    EXECUTORCH_PORTABLE,
    EXECUTORCH_PRIM,
)

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]


@functools.cache
def _executorch() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in ref_operator_names().items()}


def test_no_operator_of_executorchs_runtime_is_missing():
    runtime = _executorch()["runtime"]
    assert len(runtime) >= 240
    missing = sorted(runtime - set(KERNELS))
    assert not missing, f"ExecuTorch 1.5.1 registers operators we have no kernel for: {missing}"


def test_our_record_of_executorchs_operators_is_exact():
    """support.py's lists (which the docs print) are what ExecuTorch's runtime reports."""
    ours = EXECUTORCH_PORTABLE | EXECUTORCH_PRIM | EXECUTORCH_OPTIMIZED_ONLY
    theirs = _executorch()["runtime"]
    assert sorted(ours - theirs) == [] and sorted(theirs - ours) == []


def test_executorchs_quantized_library_is_covered():
    quantized = _executorch()["quantized"]
    assert quantized, "importing executorch.kernels.quantized registered nothing"
    missing = sorted(quantized - set(KERNELS))
    assert not missing, f"quantized operators without a kernel: {missing}"
