"""ETDump and .bpte against ExecuTorch 1.5.1 (reference venv, through ``ref_devtools.py``).

(a) we read what ExecuTorch writes (an ETDump from its runtime, a .bpte from its serializer)
and get what its own deserializers get; (b) ExecuTorch reads what we write and gets what we
wrote, re-serializes our .bpte to the same bytes and verifies it in its bundled-program runtime.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from devtools_helpers import jsonable, rich_etdump
from refenv import _run_tool, ref_available

from edgetorch.schema import bundled_program as B
from edgetorch.schema import etdump as E
from edgetorch.schema.scalar_type import ScalarType

pytestmark = pytest.mark.compat

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PTE = FIXTURES / "et_tiny_classifier.pte"
IO = FIXTURES / "et_tiny_classifier.io.npz"
TOOL = Path(__file__).with_name("ref_devtools.py")


def _our_bundled_program() -> B.BundledProgram:
    io = np.load(IO)

    def tensor(a: np.ndarray) -> B.Value:
        return B.Value(B.Tensor(ScalarType.FLOAT, list(a.shape), a.tobytes(), [0, 1]))

    case = B.BundledMethodTestCase([tensor(io["input_0"])], [tensor(io["output_0"])])
    return B.BundledProgram(2, [B.BundledMethodTestSuite("forward", [case])], PTE.read_bytes())


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    if not ref_available():
        pytest.skip("reference ExecuTorch python not available (set EDGETORCH_REF_PYTHON)")
    out = tmp_path_factory.mktemp("devtools")
    (out / "ours.etdp").write_bytes(E.serialize_to_etdump_flatcc(rich_etdump()))
    (out / "ours.bpte").write_bytes(
        B.serialize_from_bundled_program_to_flatbuffer(_our_bundled_program())
    )
    _run_tool(
        [str(PTE), str(IO), str(out), str(out / "ours.etdp"), str(out / "ours.bpte")],
        900.0,
        TOOL,
    )
    return out, json.loads((out / "result.json").read_text())


def test_we_read_executorchs_runtime_etdump(ref):
    out, result = ref
    etdump = E.deserialize_from_etdump_flatcc((out / "et.etdp").read_bytes())
    assert jsonable(etdump) == result["et_etdump"]
    assert [run.name for run in etdump.run_data] == ["Default", "Execute", "Execute"]
    # The program output's DebugEvent points at the output's bytes in the debug buffer.
    debug = (out / "et.debug").read_bytes()
    outputs = [
        e.debug_event.debug_entry
        for e in etdump.run_data[-1].events or []
        if e.debug_event and e.debug_event.debug_entry.output
    ]
    (value,) = outputs
    t = value.tensor
    got = np.frombuffer(debug, np.float32, math.prod(t.sizes), t.offset).reshape(t.sizes)
    np.testing.assert_allclose(got, np.load(IO)["output_0"], rtol=1e-5, atol=1e-6)


def test_we_read_executorchs_bpte(ref):
    out, result = ref
    data = (out / "et.bpte").read_bytes()
    bp = B.deserialize_from_flatbuffer_to_bundled_program(data)
    assert jsonable(bp) == result["et_bpte"]
    assert bytes(bp.program) == PTE.read_bytes()
    assert B.serialize_from_bundled_program_to_flatbuffer(bp) == data


def test_executorch_reads_our_etdump(ref):
    _, result = ref
    assert result["our_etdump"] == jsonable(rich_etdump())


def test_executorch_reads_rewrites_and_verifies_our_bpte(ref):
    out, result = ref
    ours = _our_bundled_program()
    assert result["our_bpte"] == jsonable(ours)
    assert bytes.fromhex(result["our_bpte_reserialized"]) == (out / "ours.bpte").read_bytes()
    np.testing.assert_allclose(
        np.asarray(result["our_bpte_verified_outputs"][0]), np.load(IO)["output_0"], rtol=1e-5
    )

