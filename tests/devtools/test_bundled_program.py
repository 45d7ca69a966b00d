"""BundledProgram (``.bpte``): building and checking test suites, the file format, and the
runtime's verification (ExecuTorch's ``verify_method_outputs`` semantics), checked against
eager PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.export import export

from edgetorch.cli import main as cli_main
from edgetorch.errors import BundledProgramError, BundledVerificationError, ErrorCode, FormatError
from edgetorch.exir import to_edge, to_edge_transform_and_lower
from edgetorch.runtime import Runtime
from edgetorch.runtime.bundled import compare_output, load_bundled_program, tensor_to_numpy
from edgetorch.schema import bundled_program as B
from edgetorch.schema.scalar_type import ScalarType


class LinearAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.lin(x) + y, torch.relu(x)


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model = LinearAdd().eval()
    inputs = [(torch.randn(2, 4), torch.randn(2, 3)) for _ in range(3)]
    et_program = to_edge(export(model, inputs[0])).to_executorch()
    return model, inputs, et_program


def _suite(model, inputs, method_name="forward", expected=True):
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite

    cases = [MethodTestCase(inputs=x, expected_outputs=model(*x) if expected else None)
             for x in inputs]
    return MethodTestSuite(method_name=method_name, test_cases=cases)


def _bpte(et_program, suites) -> bytes:
    from edgetorch.devtools import BundledProgram
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    return serialize_from_bundled_program_to_flatbuffer(BundledProgram(et_program, suites))


def test_seed_snippet_runs_and_verifies():
    # FEATURES.md seed snippet 8 with executorch -> edgetorch.
    from edgetorch.devtools import BundledProgram
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    torch.manual_seed(1)
    model = LinearAdd().eval()
    method_name = "forward"
    inputs = [(torch.randn(2, 4), torch.randn(2, 3)) for _ in range(2)]
    method_graph = export(model, inputs[0])
    et_program = to_edge_transform_and_lower(method_graph).to_executorch()
    method_test_suites = [MethodTestSuite(method_name=method_name, test_cases=[
        MethodTestCase(inputs=input, expected_outputs=(getattr(model, method_name)(*input),))
        for input in inputs])]
    bundled_program = BundledProgram(et_program, method_test_suites)
    serialized_bundled_program = serialize_from_bundled_program_to_flatbuffer(bundled_program)
    assert serialized_bundled_program[4:8] == b"BP08"
    bm = load_bundled_program(serialized_bundled_program)
    for i, x in enumerate(inputs):
        outs = bm.verify_result_with_bundled_expected_output("forward", i)
        for got, want in zip(outs, model(*x)):
            np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_roundtrip_returns_schema_dataclass_with_pte_verbatim(setup):
    from edgetorch.devtools.bundled_program.serialize import (
        deserialize_from_flatbuffer_to_bundled_program,
    )

    model, inputs, et_program = setup
    data = _bpte(et_program, [_suite(model, inputs)])
    assert data[4:8] == b"BP08"
    bp = deserialize_from_flatbuffer_to_bundled_program(data)
    assert isinstance(bp, B.BundledProgram)
    assert bp.version == B.BUNDLED_PROGRAM_SCHEMA_VERSION
    assert bytes(bp.program) == bytes(et_program.buffer)
    (suite,) = bp.method_test_suites
    assert suite.method_name == "forward" and len(suite.test_cases) == 3
    case = suite.test_cases[1]
    assert [len(case.inputs), len(case.expected_outputs)] == [2, 2]
    x0 = tensor_to_numpy(case.inputs[0].val)
    np.testing.assert_array_equal(x0, inputs[1][0].numpy())
    assert case.inputs[0].val.scalar_type == ScalarType.FLOAT
    assert list(case.inputs[0].val.dim_order) == [0, 1]
    y1 = tensor_to_numpy(case.expected_outputs[1].val)
    np.testing.assert_array_equal(y1, torch.relu(inputs[1][0]).numpy())


def test_verify_all_passes_and_outputs_equal_eager(setup):
    model, inputs, et_program = setup
    bm = load_bundled_program(_bpte(et_program, [_suite(model, inputs)]))
    assert bm.method_names == ["forward"] and bm.num_test_cases("forward") == 3
    assert bm.verify_all() == [f"forward[{i}]: ok (2 outputs)" for i in range(3)]
    outs = bm.verify_result_with_bundled_expected_output("forward", 2, rtol=1e-5, atol=1e-8)
    for got, want in zip(outs, model(*inputs[2])):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_mismatch_names_method_case_output_and_error(setup):
    model, inputs, et_program = setup
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite

    good = model(*inputs[0])
    bad0 = good[0].detach().clone()
    bad0[1, 2] += 0.5
    suite = MethodTestSuite("forward", [MethodTestCase(inputs[0], good),
                                        MethodTestCase(inputs[0], (bad0, good[1]))])
    bm = load_bundled_program(_bpte(et_program, [suite]))
    bm.verify_result_with_bundled_expected_output("forward", 0)
    with pytest.raises(BundledVerificationError) as info:
        bm.verify_result_with_bundled_expected_output("forward", 1)
    msg = str(info.value)
    assert info.value.code == ErrorCode.NotFound  # ExecuTorch's status 32
    assert "method 'forward' test case 1 output 0" in msg
    assert "1 of 6 elements" in msg and "flat index 5" in msg and "|diff| 0.5" in msg
    with pytest.raises(BundledVerificationError, match="1 outputs"):
        bm.verify_all()
    # A looser tolerance accepts it, as in ExecuTorch (atol + |rtol * output|).
    bm.verify_result_with_bundled_expected_output("forward", 1, atol=0.51)


def test_case_without_expected_outputs_runs_but_cannot_be_verified(setup):
    model, inputs, et_program = setup
    suite = _suite(model, inputs[:1], expected=False)
    assert suite.test_cases[0].expected_outputs == []
    bm = load_bundled_program(_bpte(et_program, [suite]))
    outs = bm.run_bundled_input("forward", 0)
    np.testing.assert_allclose(outs[0], model(*inputs[0])[0].detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(BundledVerificationError, match="no expected outputs") as info:
        bm.verify_result_with_bundled_expected_output("forward", 0)
    assert info.value.code == ErrorCode.NotSupported
    assert bm.verify_all() == ["forward[0]: ran, no expected outputs to verify"]


def test_bad_index_and_method(setup):
    model, inputs, et_program = setup
    bm = load_bundled_program(_bpte(et_program, [_suite(model, inputs[:1])]))
    with pytest.raises(Exception, match="testset_idx 3 is out of range"):
        bm.verify_result_with_bundled_expected_output("forward", 3)
    with pytest.raises(Exception, match="no bundled test suite for method 'fwd'"):
        bm.load_bundled_input("fwd", 0)


@pytest.mark.parametrize("make, match", [
    (lambda m, x: [("forward2", x, m(*x))], "program has methods \\['forward'\\]"),
    (lambda m, x: [("forward", x[:1], None)], "1 inputs, the method takes 2"),
    (lambda m, x: [("forward", (x[0].double(), x[1]), None)], "input 0: dtype torch.float64"),
    (lambda m, x: [("forward", (torch.randn(3, 4), x[1]), None)], "input 0: sizes \\[3, 4\\] != \\[2, 4\\]"),
    (lambda m, x: [("forward", (x[0], 1.0), None)], "input 1: expected a tensor"),
    (lambda m, x: [("forward", x, m(*x)[:1])], "1 expected outputs, the method returns 2"),
    (lambda m, x: [("forward", x, (m(*x)[0].long(), m(*x)[1]))], "expected output 0: dtype torch.int64"),
    (lambda m, x: [("forward", x, (m(*x)[0][:1], m(*x)[1]))], "expected output 0: sizes \\[1, 3\\]"),
])
def test_suites_are_checked_against_the_program(setup, make, match):
    from edgetorch.devtools import BundledProgram
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite

    model, inputs, et_program = setup
    suites = [MethodTestSuite(name, [MethodTestCase(x, y)]) for name, x, y in make(model, inputs[0])]
    with pytest.raises(BundledProgramError, match=match):
        BundledProgram(et_program, suites)


def test_config_rejects_unsupported_values_and_program_args():
    from edgetorch.devtools import BundledProgram
    from edgetorch.devtools.bundled_program.config import MethodTestCase

    with pytest.raises(BundledProgramError, match="input 1 is str"):
        MethodTestCase((torch.ones(1), "x"))
    case = MethodTestCase({"a": [torch.ones(1), 2], "b": (True, 0.5)})
    assert [type(v) for v in case.inputs] == [torch.Tensor, int, bool, float]
    with pytest.raises(BundledProgramError, match="executorch_program or pte_file_path"):
        BundledProgram(None, [])


def test_multi_method_suites_sorted_and_pte_file_path(tmp_path):
    from edgetorch.devtools import BundledProgram
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    x = torch.randn(3)
    prog = to_edge({"zeta": export(Double(), (x,)), "alpha": export(AddOne(), (x,))}).to_executorch()
    suites = [MethodTestSuite("zeta", [MethodTestCase((x,), (x * 2,))]),
              MethodTestSuite("alpha", [MethodTestCase((x,), (x + 1,)), MethodTestCase((-x,), (1 - x,))])]
    bp = BundledProgram(prog, suites)
    assert [s.method_name for s in bp.method_test_suites] == ["alpha", "zeta"]
    data = serialize_from_bundled_program_to_flatbuffer(bp)
    bm = load_bundled_program(data)
    assert bm.method_names == ["alpha", "zeta"]
    assert len(bm.verify_all()) == 3
    # From a .pte path: same bytes (no checks, as in ExecuTorch).
    pte = tmp_path / "m.pte"
    pte.write_bytes(prog.buffer)
    assert serialize_from_bundled_program_to_flatbuffer(BundledProgram(None, suites, str(pte))) == data


def test_load_program_on_a_bpte_says_how_to_load_it(setup, tmp_path):
    model, inputs, et_program = setup
    path = tmp_path / "m.bpte"
    path.write_bytes(_bpte(et_program, [_suite(model, inputs[:1])]))
    with pytest.raises(FormatError, match="BundledProgram.*load_bundled_program"):
        Runtime.get().load_program(str(path))
    assert load_bundled_program(str(path)).program.method_names == {"forward"}


def test_cli_run_verify(setup, tmp_path, capsys):
    model, inputs, et_program = setup
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite

    ok = tmp_path / "ok.bpte"
    ok.write_bytes(_bpte(et_program, [_suite(model, inputs[:2])]))
    assert cli_main(["run", str(ok), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "forward[1]: ok" in out and "bundled program verified" in out
    assert cli_main(["run", str(ok)]) == 0
    assert "forward[1]: ran, output shapes [[2, 3], [2, 4]]" in capsys.readouterr().out
    good = model(*inputs[0])
    bad = tmp_path / "bad.bpte"
    bad.write_bytes(_bpte(et_program, [MethodTestSuite("forward", [
        MethodTestCase(inputs[0], (good[0] + 1, good[1]))])]))
    assert cli_main(["run", str(bad), "--verify"]) != 0
    assert "test case 0 output 0" in capsys.readouterr().err


def test_compare_output_follows_executorchs_tensors_are_close():
    f32 = ScalarType.FLOAT
    e = np.array([1.0, np.nan, np.inf, -np.inf, 100.0], np.float32)
    assert compare_output(e, e.copy(), 1e-5, 1e-8, f32) is None  # NaN==NaN, same-sign inf
    a = e.copy()
    a[2] = -np.inf
    assert "worst at flat index 2" in compare_output(e, a, 1e-5, 1e-8, f32)
    # Tolerance scales with the method output, not the expected value.
    assert compare_output(np.array([0.0], np.float32), np.array([1.0], np.float32), 1.0, 0.0, f32) is None
    assert compare_output(np.array([1.0], np.float32), np.array([0.0], np.float32), 1.0, 0.0, f32)
    # rtol == atol == 0: exact.
    assert compare_output(np.array([1.0], np.float32), np.array([1.0 + 1e-7], np.float32), 0, 0, f32)
    # Integers compare exactly whatever the tolerance.
    i = np.array([1, 2], np.int64)
    assert "1 of 2 elements differ" in compare_output(i, np.array([1, 3]), 1.0, 1.0, ScalarType.LONG)
    assert "sizes [1, 2]" in compare_output(i, i.reshape(1, 2), 0, 0, ScalarType.LONG)
    assert "dtype int32" in compare_output(i, i.astype(np.int32), 0, 0, ScalarType.LONG)
    assert compare_output(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), 0, 0, f32) is None


def test_tensor_data_is_read_in_its_dim_order():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    t = B.Tensor(ScalarType.FLOAT, [2, 3, 4, 5], channels_last.tobytes(), [0, 2, 3, 1])
    np.testing.assert_array_equal(tensor_to_numpy(t), x)


@pytest.mark.parametrize("t", [torch.tensor(3.5), torch.tensor([True, False]), torch.zeros(0, 3),
                               torch.randn(2, 3).t(), torch.arange(4, dtype=torch.int8)])
def test_bundled_tensor_values_roundtrip(t):
    from edgetorch.devtools.bundled_program.core import _tensor_value

    got = tensor_to_numpy(_tensor_value(t).val)
    assert got.shape == tuple(t.shape)
    np.testing.assert_array_equal(got, t.numpy())
