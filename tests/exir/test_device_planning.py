"""Device planning as ExecuTorch 1.5.1 does it: a delegate whose compile specs name a
``target_device`` gets its tensors on that device (``PropagateDevicePass``: host-to-device
copies before it, device-to-host copies after it), the planner gives the device its own
arenas, the emitter writes ``non_const_buffer_device`` and the tensors' device, and a runtime
loads such a method only with an allocator for that device (ExecuTorch's
test_program_loads_when_one_method_is_device_planned). Against ExecuTorch itself:
tests/compat/test_compat_device.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from device_partitioner import DeviceAwarePartitioner
from feature_models import device_programs

from edgetorch.errors import MemoryAllocationError
from edgetorch.exir import ExecutorchBackendConfig, to_edge
from edgetorch.exir.passes.propagate_device_config import PropagateDeviceConfig
from edgetorch.exir.passes.propagate_device_pass import PropagateDevicePass
from edgetorch.exir.schema import DeviceType
from edgetorch.runtime import (
    HostDeviceAllocator,
    Runtime,
    register_device_allocator,
    unregister_device_allocator,
)
from edgetorch.schema import program as S

INPUTS = [np.ones((2, 2), np.float32), np.full((2, 2), 2.0, np.float32)]


def _program(partitioner=None, **config):
    edge = to_edge(device_programs()).to_backend({"forward2": partitioner or DeviceAwarePartitioner()})
    return edge.to_executorch(ExecutorchBackendConfig(**config))


def _plans(et):
    return {p.name: p for p in et.executorch_program.execution_plan}


def _ops(plan):
    return [plan.operators[i.instr_args.op_index].qualified_name
            if isinstance(i.instr_args, S.KernelCall) else type(i.instr_args).__name__
            for i in plan.chains[0].instructions]


def _device_values(plan):
    return [i for i, v in enumerate(plan.values) if isinstance(v.val, S.Tensor)
            and v.val.extra_tensor_info is not None
            and v.val.extra_tensor_info.device_type == DeviceType.CUDA]


@pytest.fixture
def cuda_allocator():
    allocator = HostDeviceAllocator(DeviceType.CUDA)
    register_device_allocator(allocator)
    try:
        yield allocator
    finally:
        unregister_device_allocator(DeviceType.CUDA)


def test_device_delegate_gets_copies_and_its_own_arena():
    plans = _plans(_program())  # enable_non_cpu_memory_planning=True is the default
    assert plans["forward"].non_const_buffer_device is None
    dev = plans["forward2"]
    assert dev.non_const_buffer_device == [
        S.NonConstBufferDevice(buffer_idx=2, device_type=DeviceType.CUDA, device_index=0)]
    assert _ops(dev) == ["et_copy::_h2d_copy.out", "et_copy::_h2d_copy.out", "DelegateCall",
                         "et_copy::_d2h_copy.out"]
    # The delegate reads and writes device tensors, planned in the device arena (id 2).
    call = next(i.instr_args for i in dev.chains[0].instructions
                if isinstance(i.instr_args, S.DelegateCall))
    assert sorted(call.args) == _device_values(dev)
    assert {dev.values[i].val.allocation_info.memory_id for i in call.args} == {2}
    assert dev.values[dev.outputs[0]].val.extra_tensor_info is None  # back on the host
    assert dev.delegates[0].compile_specs[-1] == S.CompileSpec("target_device", b"cuda:0")


def test_device_planned_method_needs_a_device_allocator():
    """ExecuTorch's runtime: the other method loads and runs; this one is refused (the
    allocation fails before anything runs), naming the buffer and the device."""
    program = Runtime.get().load_program(_program().buffer)
    assert program.metadata("forward2").memory_planned_buffer_device(1) == (1, 0)
    assert program.metadata("forward2").memory_planned_buffer_device(0) == (0, 0)
    forward = program.load_method("forward")
    np.testing.assert_array_equal(forward.execute(INPUTS)[0], 3.0)
    with pytest.raises(MemoryAllocationError, match=r"Failed to allocate 48 bytes for buffer 1 "
                                                    r"on device 1:0.*register_device_allocator"):
        program.load_method("forward2")
    np.testing.assert_array_equal(forward.execute(INPUTS)[0], 3.0)


def test_device_planned_method_runs_with_a_registered_allocator(cuda_allocator):
    """With an allocator the device arena comes from it, and the copies carry the values
    there and back: eager's numbers."""
    program = Runtime.get().load_program(_program().buffer)
    method = program.load_method("forward2")
    assert cuda_allocator.allocated == [(48, 0)]
    x, y = np.random.default_rng(0).standard_normal((2, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(method.execute([x, y])[0], x + y + y, rtol=1e-6)


def test_without_non_cpu_planning_tensors_are_tagged_and_planned_on_the_host():
    plans = _plans(_program(enable_non_cpu_memory_planning=False))
    dev = plans["forward2"]
    assert dev.non_const_buffer_device is None and len(dev.non_const_buffer_sizes) == 2
    assert _ops(dev) == ["DelegateCall"]
    call = dev.chains[0].instructions[0].instr_args
    assert sorted(call.args) == _device_values(dev)  # tagged as ExecuTorch tags them
    method = Runtime.get().load_program(_program(enable_non_cpu_memory_planning=False).buffer
                                        ).load_method("forward2")
    np.testing.assert_array_equal(method.execute(INPUTS)[0], 5.0)


def test_delegates_without_a_target_device_stay_on_the_host():
    dev = _plans(_program(DeviceAwarePartitioner(target_device=None)))["forward2"]
    assert dev.non_const_buffer_device is None and not _device_values(dev)
    assert _ops(dev) == ["DelegateCall"]


def test_skip_copies_for_method_inputs_and_outputs(cuda_allocator):
    from edgetorch.exir import MemoryPlanningPass

    et = _program(propagate_device_config={"forward2": PropagateDeviceConfig(
        skip_h2d_for_method_inputs=False, skip_d2h_for_method_outputs=True)},
        memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False))
    dev = _plans(et)["forward2"]
    assert _ops(dev) == ["et_copy::_h2d_copy.out", "et_copy::_h2d_copy.out", "DelegateCall"]
    assert dev.outputs[0] in _device_values(dev)  # the output stays on the device
    with pytest.raises(ValueError, match="only meaningful when enable_non_cpu_memory_planning"):
        PropagateDevicePass(skip_h2d_for_method_inputs=True)


def test_bad_target_device_is_named():
    with pytest.raises(Exception, match="Unknown device type 'tpu'"):
        _program(DeviceAwarePartitioner(target_device="tpu:0"))


def test_et_copy_ops_trace_as_clones():
    x = torch.randn(3)
    assert torch.equal(torch.ops.et_copy._h2d_copy(x), x)
    out = torch.empty(3)
    torch.ops.et_copy._d2h_copy.out(x, out=out)
    assert torch.equal(out, x)


def test_lowering_a_lowered_program_again_gives_the_same_file():
    """to_executorch lowers the Edge program in place (as ExecuTorch's); a second call must
    not copy to the device twice."""
    edge = to_edge(device_programs()).to_backend({"forward2": DeviceAwarePartitioner()})
    first = edge.to_executorch().buffer
    assert edge.to_executorch().buffer == first
