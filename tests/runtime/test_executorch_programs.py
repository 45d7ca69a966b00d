"""ExecuTorch-written programs that need more than straight-line kernels: ``map``/``scan`` loops
(``et_copy_index`` without a return slot) and FFTs (complex64 tensors). torch-free: the
expected values are the eager outputs stored with each fixture."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgetorch.runtime import Runtime

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _io(name: str, n_inputs: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    with np.load(FIXTURES / f"{name}.io.npz") as data:
        arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
    return arrays[:n_inputs], arrays[n_inputs:]


@pytest.mark.parametrize("name, n_inputs", [("et_map", 2), ("et_scan", 1), ("et_rfft", 1)])
def test_executorch_program_runs_like_eager(name, n_inputs):
    method = Runtime.get().load_program(FIXTURES / f"{name}.pte").load_method("forward")
    inputs, expected = _io(name, n_inputs)
    for _ in range(2):  # a second run restarts the loops and re-grows the outputs
        outs = method.execute(inputs)
        assert len(outs) == len(expected)
        for got, want in zip(outs, expected):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_et_copy_index_is_called_without_a_return_slot():
    program = Runtime.get().load_program(FIXTURES / "et_map.pte")
    plan = program.program.execution_plan[0]
    ops = [o.name for o in plan.operators]
    calls = [i.instr_args for i in plan.chains[0].instructions
             if getattr(i.instr_args, "op_index", None) == ops.index("executorch_prim::et_copy_index")]
    assert calls and all(len(c.args) == 3 for c in calls)
    assert "in place" in str(program.load_method("forward"))


def test_map_with_other_inputs_matches_numpy():
    method = Runtime.get().load_program(FIXTURES / "et_map.pte").load_method("forward")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.full(3, 0.5, np.float32)
    np.testing.assert_array_equal(method.execute([x, y])[0], x * 2 + y)


def test_rfft_matches_numpy():
    method = Runtime.get().load_program(FIXTURES / "et_rfft.pte").load_method("forward")
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    spectrum, back = method.execute([x])
    assert spectrum.dtype == np.complex64 and spectrum.shape == (3, 5)
    np.testing.assert_allclose(spectrum, np.fft.rfft(x, norm="ortho"), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(back, x, rtol=1e-5, atol=1e-5)
