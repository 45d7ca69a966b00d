"""Device planning against ExecuTorch 1.5.1 (ExecuTorch's DeviceAwarePartitioner, ours with the
same compile specs): the same ``.pte`` byte for byte, and each runtime treats the other's file
as its own -- the CPU method runs, the device-planned one is refused ("... on device 1:0")
when no device allocator is registered, and the refusal leaves the loaded method usable."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from device_partitioner import DeviceAwarePartitioner  # noqa: E402
from feature_models import device_programs  # noqa: E402
from refenv import ref_available, ref_device_export, ref_device_run  # noqa: E402

from edgetorch.errors import MemoryAllocationError  # noqa: E402
from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]

INPUTS = [np.ones((2, 2), np.float32), np.full((2, 2), 2.0, np.float32)]


def _ours() -> bytes:
    edge = to_edge(device_programs()).to_backend({"forward2": DeviceAwarePartitioner()})
    config = ExecutorchBackendConfig(enable_non_cpu_memory_planning=True, fold_constants=False,
                                     fuse_batch_norm=False,
                                     emit_mutable_buffer_names=False)
    return edge.to_executorch(config).buffer


def test_device_planned_program_equals_executorchs(tmp_path):
    """Every method as ExecuTorch writes it: values (device tensors' ExtraTensorInfo),
    instructions (the et_copy copies), operators, arenas and ``non_const_buffer_device``.
    Only the delegate's blob differs: edgetorch's demo backend serializes its own format."""
    ours = Runtime.get().load_program(_ours()).program
    theirs = Runtime.get().load_program(ref_device_export(tmp_path / "device.pte")).program
    assert [p.name for p in ours.execution_plan] == [p.name for p in theirs.execution_plan]
    for a, b in zip(ours.execution_plan, theirs.execution_plan):
        assert a.non_const_buffer_sizes == b.non_const_buffer_sizes, a.name
        assert a.non_const_buffer_device == b.non_const_buffer_device, a.name
        assert a.values == b.values, a.name
        assert a.chains == b.chains and a.operators == b.operators, a.name
        assert (a.inputs, a.outputs) == (b.inputs, b.outputs), a.name
        assert [(d.id, d.compile_specs) for d in a.delegates] == \
            [(d.id, d.compile_specs) for d in b.delegates], a.name


def test_executorch_device_planned_pte_in_edgetorch(tmp_path):
    program = Runtime.get().load_program(ref_device_export(tmp_path / "device.pte"))
    forward = program.load_method("forward")
    np.testing.assert_array_equal(forward.execute(INPUTS)[0], 3.0)
    with pytest.raises(MemoryAllocationError, match="on device 1:0"):
        program.load_method("forward2")
    np.testing.assert_array_equal(forward.execute(INPUTS)[0], 3.0)


def test_edgetorch_device_planned_pte_in_executorch(tmp_path):
    pte = tmp_path / "ours.pte"
    pte.write_bytes(_ours())
    result = ref_device_run(pte)
    assert result["forward"] == [[3.0, 3.0], [3.0, 3.0]]
    assert result["forward2_error"] is not None and "on device 1:0" in result["forward2_error"]
    assert result["forward_after"] == result["forward"]
