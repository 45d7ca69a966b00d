"""Delegates in the runtime, without torch: a hand-built program calling the demo backend.

The program is written with the schema dataclasses (no compiler involved), so this runs in
the torch-free job; ``tests/exir/test_delegation.py`` covers the compiled side.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from torchless import run_without_torch, torch_job_fixtures

import edgetorch.backends.demo  # noqa: F401  (registers BackendWithCompilerDemo)
from edgetorch.errors import BackendNotFoundError, InvalidProgramError
from edgetorch.runtime import Runtime
from edgetorch.runtime.backends import BackendRegistry
from edgetorch.schema import program as s
from edgetorch.schema.pte import PteFile, serialize_pte
from edgetorch.schema.scalar_type import ScalarType

# out = sin(x) + y * 2, as the demo backend's JSON program.
BLOB = json.dumps({
    "version": 1, "inputs": ["x", "y"], "outputs": ["out"], "constants": {},
    "instructions": [
        {"op": "aten.sin.default", "args": ["%x"], "out": "s", "dtype": "float32"},
        {"op": "aten.mul.Scalar", "args": ["%y", 2.0], "out": "m", "dtype": "float32"},
        {"op": "aten.add.Tensor", "args": ["%s", "%m"], "out": "out", "dtype": "float32"},
    ],
}).encode()


def _tensor(offset: int) -> s.EValue:
    return s.EValue(s.Tensor(scalar_type=ScalarType.FLOAT, storage_offset=0, sizes=[2, 3],
                             dim_order=[0, 1],
                             allocation_info=s.AllocationDetails.of(1, offset)))


def _pte(backend_id: str = "BackendWithCompilerDemo", blob: bytes = BLOB,
         extract: bool = True) -> bytes:
    plan = s.ExecutionPlan(
        name="forward",
        container_meta_type=s.ContainerMetadata("", ""),
        values=[_tensor(0), _tensor(32), _tensor(64)],
        inputs=[0, 1],
        outputs=[2],
        chains=[s.Chain(inputs=[], outputs=[], instructions=[
            s.Instruction(s.DelegateCall(0, [0, 1, 2]))])],
        operators=[],
        delegates=[s.BackendDelegate(
            backend_id, s.BackendDelegateDataReference(s.DataLocation.INLINE, 0),
            [s.CompileSpec("max_value", b"\x04")])],
        non_const_buffer_sizes=[0, 96],
    )
    return serialize_pte(s.Program(version=0, execution_plan=[plan]), constant_buffers=[],
                         delegate_blobs=[blob], named_data=None,
                         extract_delegate_segments=extract)


def _inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((2, 3), dtype=np.float32) for _ in range(2)]


@pytest.mark.parametrize("extract", [True, False])
def test_demo_delegate_runs(extract):
    data = _pte(extract=extract)
    assert bool(PteFile.parse(data).program.segments) == extract
    x, y = _inputs()
    (out,) = Runtime.get().load_program(data).load_method("forward").execute([x, y])
    np.testing.assert_allclose(out, np.sin(x) + y * 2, atol=1e-6, rtol=0)


def test_registry_lists_the_demo_backend():
    assert BackendRegistry().is_available("BackendWithCompilerDemo")


def test_unknown_backend_fails_at_load_method_naming_it():
    program = Runtime.get().load_program(_pte(backend_id="NoSuchBackend"))
    with pytest.raises(BackendNotFoundError) as e:
        program.load_method("forward")
    assert "'NoSuchBackend' is not registered" in str(e.value)
    assert "BackendWithCompilerDemo" in str(e.value)  # what is registered


def test_bad_blob_is_an_invalid_program():
    with pytest.raises(InvalidProgramError, match="not JSON"):
        Runtime.get().load_program(_pte(blob=b"\xff garbage")).load_method("forward")
    old = BLOB.replace(b'"version": 1', b'"version": 99')
    with pytest.raises(InvalidProgramError, match="blob version 99"):
        Runtime.get().load_program(_pte(blob=old)).load_method("forward")


def test_demo_backend_imports_and_runs_with_torch_blocked(tmp_path):
    path = tmp_path / "demo.pte"
    path.write_bytes(_pte())
    code = (
        "import numpy as np\n"
        "import edgetorch.backends.demo\n"
        "from edgetorch.runtime import Runtime\n"
        f"m = Runtime.get().load_program({str(path)!r}).load_method('forward')\n"
        "x = np.ones((2, 3), np.float32)\n"
        "print(float(m.execute([x, x])[0][0, 0]))\n"
    )
    proc = run_without_torch(code)
    assert proc.returncode == 0, proc.stderr
    assert abs(float(proc.stdout) - (np.sin(1.0) + 2.0)) < 1e-6


def test_compiled_delegated_fixture_matches_eager():
    root = torch_job_fixtures("delegation")
    paths = sorted(root.glob("*.pte"))
    assert paths, f"no delegated fixtures in {root}"
    for path in paths:
        data = np.load(path.with_suffix(".npz"))
        n_in = sum(1 for k in data.files if k.startswith("input_"))
        outs = Runtime.get().load_program(path).load_method("forward").execute(
            [data[f"input_{i}"] for i in range(n_in)])
        for i, out in enumerate(outs):
            np.testing.assert_allclose(out, data[f"output_{i}"], atol=1e-5, rtol=0)


def test_delegate_handles_are_destroyed_with_the_method(monkeypatch):
    import gc

    from edgetorch.runtime.backends import RUNTIME_BACKENDS

    destroyed = []
    backend_impl = RUNTIME_BACKENDS["BackendWithCompilerDemo"]
    monkeypatch.setattr(backend_impl, "destroy", lambda handle: destroyed.append(handle),
                        raising=False)
    gc.collect()  # methods left over from earlier tests go first
    method = Runtime.get().load_program(_pte()).load_method("forward")
    handle = method._delegate_handles[0][1]
    assert not any(h is handle for h in destroyed)
    del method
    gc.collect()
    assert any(h is handle for h in destroyed)
