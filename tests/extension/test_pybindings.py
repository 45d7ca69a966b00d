"""ExecuTorch's legacy pybindings API (``portable_lib``) on edgetorch's runtime, against eager
torch: modules, programs, methods, metadata, .ptd weights, bundled programs, ETDump."""

from __future__ import annotations

import importlib
import os

import pytest
import torch
from torch.export import export

from edgetorch.exir import ExecutorchBackendConfig, to_edge
from edgetorch.extension.pybindings import portable_lib as rt


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class Multi(torch.nn.Module):
    def forward(self, x, y):
        return x + y

    def forward2(self, x, y):
        return x * y + 1


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(3, 4)

    def forward(self, x):
        return self.linear(x)


class Upsample(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest") * 3


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(2, 2))

    def forward(self, x):
        self.state.add_(1)
        return x + self.state


def _program(model, inputs, **config):
    return to_edge(export(model, inputs, strict=True)).to_executorch(
        ExecutorchBackendConfig(**config))


class Second(torch.nn.Module):
    def forward(self, x, y):
        return Multi().forward2(x, y)


def _multi_program():
    m = Multi()
    x = (torch.randn(2, 2), torch.randn(2, 2))
    eps = {"forward": export(m, x, strict=True), "forward2": export(Second(), x, strict=True)}
    return to_edge(eps).to_executorch(), m, x


@pytest.fixture(scope="module")
def add_program():
    inputs = (torch.randn(2, 2), torch.randn(2, 2))
    return _program(Add(), inputs), inputs


def test_module_forward_call_and_single_tensor(add_program):
    prog, (x, y) = add_program
    module = rt._load_for_executorch_from_buffer(prog.buffer)
    torch.testing.assert_close(module.forward([x, y])[0], x + y)
    torch.testing.assert_close(module((x, y))[0], x + y)
    torch.testing.assert_close(module.run_method("forward", (x, y))[0], x + y)
    assert module.method_names() == ["forward"]
    assert isinstance(module.forward((x, y))[0], torch.Tensor)


def test_single_tensor_call_is_one_input():
    x = torch.randn(2, 2)
    prog = _program(torch.nn.ReLU(), (x,))
    module = rt._load_for_executorch_from_buffer(prog.buffer)
    torch.testing.assert_close(module(x)[0], torch.relu(x))
    method = rt._load_program_from_buffer(prog.buffer).load_method("forward")
    torch.testing.assert_close(method(x)[0], torch.relu(x))


def test_load_from_path_and_plan_execute(add_program, tmp_path):
    prog, (x, y) = add_program
    path = tmp_path / "add.pte"
    path.write_bytes(prog.buffer)
    module = rt._load_for_executorch(str(path))
    torch.testing.assert_close(module.forward((x, y))[0], x + y)
    # plan_execute re-runs the method on the inputs it last received
    torch.testing.assert_close(module.plan_execute("forward")[0], x + y)
    with pytest.raises(RuntimeError, match="no such file"):
        rt._load_for_executorch(str(tmp_path / "missing.pte"))


def test_clone_outputs_false_returns_views_of_the_output_memory(add_program):
    """ExecuTorch's ``clone_outputs=False``: no copy; the next run overwrites the tensor."""
    prog, (x, y) = add_program
    module = rt._load_for_executorch_from_buffer(prog.buffer)
    kept = module.forward((x, y))[0]
    view = module.forward((x, y), clone_outputs=False)[0]
    torch.testing.assert_close(view, x + y)
    assert module.forward((2 * x, y), clone_outputs=False)[0].data_ptr() == view.data_ptr()
    torch.testing.assert_close(view, 2 * x + y)  # overwritten in place, as in ExecuTorch
    torch.testing.assert_close(kept, x + y)  # a clone is the caller's own
    method = rt._load_program_from_buffer(prog.buffer).load_method("forward")
    first = method.call((x, y), clone_outputs=False)[0]
    cloned = method.call((x, y))[0]
    method.call((x, 3 * y))
    torch.testing.assert_close(first, x + 3 * y)
    torch.testing.assert_close(cloned, x + y)


class Reductions(torch.nn.Module):
    def forward(self, x):
        return x.mean(), x.sum(dim=(0, 1)), x.amax(dim=1)


def test_zero_dim_outputs_keep_their_shape():
    """A 0-dim output comes back with shape ``()``, as ExecuTorch's portable_lib returns it
    (``np.ascontiguousarray`` once made it ``(1,)``), cloned or not."""
    x = torch.randn(3, 4)
    prog = _program(Reductions(), (x,))
    module = rt._load_for_executorch_from_buffer(prog.buffer)
    for clone in (True, False):
        got = module.forward((x,), clone_outputs=clone)
        for g, want in zip(got, Reductions()(x), strict=True):
            assert g.shape == want.shape
            torch.testing.assert_close(g, want)


def test_method_meta_matches_executorch_repr(add_program):
    prog, _ = add_program
    meta = rt._load_for_executorch_from_buffer(prog.buffer).method_meta("forward")
    info = "TensorInfo(sizes=[2, 2], dtype=Float, is_memory_planned=True, nbytes=16)"
    assert str(meta) == (f"MethodMeta(name='forward', num_inputs=2, input_tensor_meta=['{info}',"
                         f" '{info}'], num_outputs=1, output_tensor_meta=['{info}'])")
    t = meta.input_tensor_meta(1)
    assert (t.sizes(), t.dtype(), t.is_memory_planned(), t.nbytes()) == ((2, 2), 6, True, 16)
    with pytest.raises(IndexError):
        meta.input_tensor_meta(2)
    with pytest.raises(IndexError):
        meta.attribute_tensor_meta(0)


def test_errors_are_runtime_errors(add_program):
    prog, (x, y) = add_program
    module = rt._load_for_executorch_from_buffer(prog.buffer)
    with pytest.raises(RuntimeError, match="no method 'nope'"):
        module.run_method("nope", (x, y))
    with pytest.raises(RuntimeError, match="Unsupported python type"):
        module(([x, y],))
    with pytest.raises(RuntimeError, match="takes 2 input"):
        module((x, y, 1))
    with pytest.raises(RuntimeError, match="is on device meta"):
        module.forward([x.to("meta"), y])
    with pytest.raises(RuntimeError, match="contiguous or channels-last"):
        module.forward([x.t(), y])


def test_program_and_method_by_parts():
    prog, model, (x, y) = _multi_program()
    program = rt._load_program_from_buffer(prog.buffer)
    assert program.num_methods() == 2
    assert [program.get_method_name(i) for i in range(2)] == ["forward", "forward2"]
    with pytest.raises(RuntimeError):
        program.get_method_name(2)
    method = program.load_method("forward2")
    method.set_inputs((x, y))
    method.execute()
    torch.testing.assert_close(method.get_outputs()[0], model.forward2(x, y))
    torch.testing.assert_close(method.call((x, y))[0], model.forward2(x, y))
    assert method.method_meta().name() == "forward2"
    assert program.method_meta("forward").num_inputs() == 2
    module = rt._load_for_executorch_from_buffer(prog.buffer)
    torch.testing.assert_close(module.run_method("forward2", (x, y))[0], model.forward2(x, y))


def test_channels_last_in_and_out():
    model = Upsample()
    x = torch.randn(1, 2, 3, 4).to(memory_format=torch.channels_last)
    prog = _program(model, (x,))
    out = rt._load_for_executorch_from_buffer(prog.buffer)(x)[0]
    torch.testing.assert_close(out, model(x))
    with pytest.raises(RuntimeError, match="contiguous or channels-last"):
        rt._load_for_executorch_from_buffer(prog.buffer)(
            torch.randn(1, 2, 3, 4, 5).to(memory_format=torch.channels_last_3d))


def test_attributes_of_a_mutable_buffer():
    model = Counter()
    x = torch.randn(2, 2)
    prog = _program(model, (x,), emit_mutable_buffer_names=True)
    program = rt._load_program_from_buffer(prog.buffer)
    meta = program.method_meta("forward")
    assert meta.num_attributes() == 1
    assert meta.attribute_tensor_meta(0).sizes() == (2, 2)
    method = program.load_method("forward")
    torch.testing.assert_close(method((x,))[0], x + 1)
    torch.testing.assert_close(method((x,))[0], x + 2)
    torch.testing.assert_close(method.get_attribute("state"), torch.full((2, 2), 2.0))
    with pytest.raises(RuntimeError, match="attribute 'nope'"):
        method.get_attribute("nope")


def test_pte_with_ptd_from_path_and_bytes(tmp_path):
    model = Linear()
    x = torch.randn(2, 3)
    prog = _program(model, (x,), external_constants=True)
    data = prog._tensor_data["_default_external_constant"]
    pte, ptd = tmp_path / "linear.pte", tmp_path / "linear.ptd"
    pte.write_bytes(prog.buffer)
    ptd.write_bytes(data)
    want = model(x)
    torch.testing.assert_close(rt._load_for_executorch(str(pte), str(ptd)).forward((x,))[0], want)
    torch.testing.assert_close(
        rt._load_for_executorch_from_buffer(prog.buffer, data).forward((x,))[0], want)
    program = rt._load_program(str(pte), data_path=str(ptd))
    torch.testing.assert_close(program.load_method("forward")((x,))[0], want)
    # As in ExecuTorch, a module loads lazily: missing or bad weights fail when it runs.
    for module in (rt._load_for_executorch_from_buffer(prog.buffer),
                   rt._load_for_executorch_from_buffer(prog.buffer, b"invalid bytes")):
        with pytest.raises(RuntimeError):
            module.forward((x,))


def _bundled(prog, model, inputs):
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from edgetorch.devtools.bundled_program.core import BundledProgram
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    cases = [MethodTestCase(inputs=i, expected_outputs=(model(*i),)) for i in inputs]
    suites = [MethodTestSuite(method_name="forward", test_cases=cases)]
    return serialize_from_bundled_program_to_flatbuffer(BundledProgram(prog, suites))


def test_bundled_program_verifies_and_loads_as_module(tmp_path):
    model = Linear()
    inputs = [(torch.randn(2, 3),) for _ in range(2)]
    prog = _program(model, inputs[0])
    bundle = rt._load_bundled_program_from_buffer(_bundled(prog, model, inputs))
    for i, x in enumerate(inputs):
        out = bundle.verify_result_with_bundled_expected_output("forward", i)
        torch.testing.assert_close(out[0], model(*x))
    module = rt._load_for_executorch_from_bundled_program(bundle)
    torch.testing.assert_close(module.forward(inputs[1])[0], model(*inputs[1]))


def test_bundled_program_with_external_weights(tmp_path):
    model = Linear()
    inputs = [(torch.randn(2, 3),)]
    prog = _program(model, inputs[0], external_constants=True)
    data = prog._tensor_data["_default_external_constant"]
    bundle = rt._load_bundled_program_from_buffer(_bundled(prog, model, inputs))
    ptd = tmp_path / "w.ptd"
    ptd.write_bytes(data)
    for source in (data, str(ptd)):
        module = rt._load_for_executorch_from_bundled_program(bundle, source)
        torch.testing.assert_close(module.forward(inputs[0])[0], model(*inputs[0]))
    with pytest.raises(RuntimeError):
        rt._load_for_executorch_from_bundled_program(bundle).forward(inputs[0])


def test_bundled_mismatch_is_a_runtime_error():
    model = Linear()
    x = (torch.randn(2, 3),)
    prog = _program(model, x)
    bundle = rt._load_bundled_program_from_buffer(_bundled(prog, lambda t: model(t) + 1, [x]))
    with pytest.raises(RuntimeError, match="verification failed"):
        bundle.verify_result_with_bundled_expected_output("forward", 0)


def test_etdump_written_for_module_and_program(add_program, tmp_path):
    from edgetorch.schema.etdump import deserialize_from_etdump_flatcc

    prog, (x, y) = add_program
    module = rt._load_for_executorch_from_buffer(prog.buffer, enable_etdump=True,
                                                 debug_buffer_size=1 << 16)
    assert module.has_etdump()
    module.forward((x, y))
    path, dbg = tmp_path / "m.etdp", tmp_path / "m.bin"
    module.write_etdump_result_to_file(str(path), str(dbg))
    assert deserialize_from_etdump_flatcc(path.read_bytes()).run_data
    assert dbg.stat().st_size > 0
    plain = rt._load_program_from_buffer(prog.buffer)
    assert not plain.has_etdump()
    with pytest.raises(RuntimeError, match="No etdump found"):
        plain.write_etdump_result_to_file(str(tmp_path / "none.etdp"))
    assert not os.path.exists(tmp_path / "none.etdp")


def test_registries_profiling_and_threads():
    ops = rt._get_operator_names()
    assert "aten::add.out" in ops and ops == sorted(ops)
    assert "XnnpackBackend" in rt._get_registered_backend_names()
    assert rt._is_available("XnnpackBackend") and not rt._is_available("NoSuchBackend")
    rt._create_profile_block("block")
    rt._reset_profile_results()
    assert rt._dump_profile_results() == b""
    pytest.importorskip("threadpoolctl")
    before = rt._threadpool_get_thread_count()
    rt._unsafe_reset_threadpool(1)
    assert rt._threadpool_get_thread_count() == 1
    rt._unsafe_reset_threadpool(max(before, 1))
    with pytest.raises(RuntimeError, match="positive int"):
        rt._unsafe_reset_threadpool(0)


def test_verification_levels(add_program):
    prog, (x, y) = add_program
    for level in (rt.Verification.Minimal, rt.Verification.InternalConsistency):
        module = rt._load_for_executorch_from_buffer(prog.buffer, program_verification=level)
        torch.testing.assert_close(module.forward((x, y))[0], x + y)


def test_aten_lib_is_a_clear_import_error():
    with pytest.raises(ImportError, match="portable_lib"):
        importlib.import_module("edgetorch.extension.pybindings.aten_lib")
