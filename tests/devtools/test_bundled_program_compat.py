"""BundledProgram across tools: our ``.bpte`` verified by ExecuTorch 1.5.1's runtime
(``_load_bundled_program_from_buffer`` + ``verify_result_with_bundled_expected_output``), and
ExecuTorch's ``.bpte`` loaded and verified by ours; a wrong expected output fails in both."""

from __future__ import annotations

import json

import numpy as np
import pytest
import ref_process
import torch
from torch.export import export

from edgetorch.errors import BundledVerificationError
from edgetorch.runtime.bundled import load_bundled_program

pytestmark = pytest.mark.compat

_REF_VERIFY = """
import json, sys
import numpy as np
from executorch.extension.pybindings import portable_lib
buf = open(sys.argv[1], "rb").read()
bm = portable_lib._load_bundled_program_from_buffer(buf)
results = []
for idx in range(int(sys.argv[2])):
    try:
        outs = bm.verify_result_with_bundled_expected_output("forward", idx, 1e-5, 1e-8)
        results.append(["ok", [np.asarray(o).tolist() for o in outs]])
    except Exception as e:
        results.append(["error", str(e)])
print(json.dumps(results))
"""

_REF_MAKE = """
import sys, torch
from executorch.exir import to_edge
from executorch.devtools import BundledProgram
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer)
torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
    def forward(self, x, y):
        return self.lin(x) + y, torch.relu(x)
m = M().eval()
inputs = [(torch.randn(2, 4), torch.randn(2, 3)) for _ in range(2)]
prog = to_edge(torch.export.export(m, inputs[0])).to_executorch()
cases = []
for i, x in enumerate(inputs):
    out = [t.detach().clone() for t in m(*x)]
    if i == 1 and sys.argv[2] == "bad":
        out[1][0, 1] += 0.25
    cases.append(MethodTestCase(inputs=x, expected_outputs=out))
bp = BundledProgram(prog, [MethodTestSuite("forward", cases)])
open(sys.argv[1], "wb").write(serialize_from_bundled_program_to_flatbuffer(bp))
"""


def _ref(script: str, *args: str) -> str:
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    result = ref_process.run([str(ref_python()), "-c", script, *args], env=_clean_env(),
                             capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


class LinearAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.lin(x) + y, torch.relu(x)


def _our_bpte(path, bad: bool) -> list[tuple[torch.Tensor, ...]]:
    from edgetorch.devtools import BundledProgram
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )
    from edgetorch.exir import to_edge

    torch.manual_seed(0)
    model = LinearAdd().eval()
    inputs = [(torch.randn(2, 4), torch.randn(2, 3)) for _ in range(2)]
    prog = to_edge(export(model, inputs[0])).to_executorch()
    cases = []
    for i, x in enumerate(inputs):
        out = [t.detach().clone() for t in model(*x)]
        if bad and i == 1:
            out[0][1, 0] -= 0.25
        cases.append(MethodTestCase(x, out))
    path.write_bytes(serialize_from_bundled_program_to_flatbuffer(
        BundledProgram(prog, [MethodTestSuite("forward", cases)])))
    return [tuple(t.detach() for t in model(*x)) for x in inputs]


def test_executorch_verifies_our_bpte(tmp_path):
    path = tmp_path / "ours.bpte"
    eager = _our_bpte(path, bad=False)
    results = json.loads(_ref(_REF_VERIFY, str(path), "2").strip().splitlines()[-1])
    assert [r[0] for r in results] == ["ok", "ok"], results
    for (_, outs), want in zip(results, eager):
        for got, w in zip(outs, want):
            np.testing.assert_allclose(np.array(got, np.float32), w.numpy(), rtol=1e-5, atol=1e-5)


def test_executorch_rejects_our_bpte_with_a_wrong_expected_output(tmp_path):
    path = tmp_path / "bad.bpte"
    _our_bpte(path, bad=True)
    results = json.loads(_ref(_REF_VERIFY, str(path), "2").strip().splitlines()[-1])
    assert results[0][0] == "ok"
    assert results[1][0] == "error" and "status 32" in results[1][1], results[1]
    with pytest.raises(BundledVerificationError, match="test case 1 output 0"):
        load_bundled_program(str(path)).verify_result_with_bundled_expected_output("forward", 1)


def test_we_verify_executorchs_bpte(tmp_path):
    good, bad = tmp_path / "good.bpte", tmp_path / "bad.bpte"
    _ref(_REF_MAKE, str(good), "good")
    _ref(_REF_MAKE, str(bad), "bad")
    assert good.read_bytes()[4:8] == b"BP08"
    # Our reader + writer reproduce ExecuTorch's bytes exactly.
    from edgetorch.schema import bundled_program as B

    parsed = B.deserialize_from_flatbuffer_to_bundled_program(good.read_bytes())
    assert B.serialize_from_bundled_program_to_flatbuffer(parsed) == good.read_bytes()
    bm = load_bundled_program(str(good))
    assert bm.verify_all() == ["forward[0]: ok (2 outputs)", "forward[1]: ok (2 outputs)"]
    bm_bad = load_bundled_program(str(bad))
    bm_bad.verify_result_with_bundled_expected_output("forward", 0)
    with pytest.raises(BundledVerificationError, match="test case 1 output 1.*0.25"):
        bm_bad.verify_result_with_bundled_expected_output("forward", 1)
    # And ExecuTorch itself reports the same case as a failure.
    results = json.loads(_ref(_REF_VERIFY, str(bad), "2").strip().splitlines()[-1])
    assert [r[0] for r in results] == ["ok", "error"]


def test_executorch_verifies_our_channels_last_bpte(tmp_path):
    """A channels-last expected output is stored in its own layout (dim order 0,2,3,1), as
    ExecuTorch stores it: its verifier compares layouts and aborts on a contiguous one."""
    from edgetorch.devtools import BundledProgram
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )
    from edgetorch.exir import to_edge

    class Scale(torch.nn.Module):  # exact in every runtime: the check uses rtol 1e-5, atol 1e-8
        def forward(self, x):
            return torch.relu(x) * 2.0

    torch.manual_seed(0)
    model = Scale().eval()
    x = torch.randn(1, 3, 8, 8).to(memory_format=torch.channels_last)
    with torch.no_grad():
        want = model(x)
    assert want.is_contiguous(memory_format=torch.channels_last)
    prog = to_edge(export(model, (x,))).to_executorch()
    path = tmp_path / "cl.bpte"
    path.write_bytes(serialize_from_bundled_program_to_flatbuffer(
        BundledProgram(prog, [MethodTestSuite("forward", [MethodTestCase((x,), [want])])])))
    results = json.loads(_ref(_REF_VERIFY, str(path), "1").strip().splitlines()[-1])
    assert [r[0] for r in results] == ["ok"], results
    np.testing.assert_allclose(np.array(results[0][1][0], np.float32), want.numpy(),
                               rtol=1e-5, atol=1e-5)
    load_bundled_program(str(path)).verify_result_with_bundled_expected_output("forward", 0)
