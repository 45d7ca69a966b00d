"""The runtime's EthosUBackend runs ExecuTorch's .pte without torch (tosa-tools only)."""

from __future__ import annotations

import pytest
from torchless import run_without_torch

pytestmark = pytest.mark.compat


def test_executorch_pte_runs_without_torch(ref_arm):
    out = ref_arm("convnet", "ethos-u85-256")
    code = f"""
import numpy as np, sys
from edgetorch.runtime import Runtime
with np.load({str(out / 'inputs.npz')!r}) as d:
    inputs = [d['arr_0']]
with np.load({str(out / 'qeager.npz')!r}) as d:
    want = d['arr_0']
got = Runtime.get().load_program({str(out / 'model.pte')!r}).load_method('forward').execute(inputs)
assert 'torch' not in sys.modules
print(float(np.abs(got[0] - want).max()))
"""
    proc = run_without_torch(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.strip().splitlines()[-1]) < 0.01
