"""Whole programs in edgetorch: multiple methods, constant methods, dynamic shapes, mutable
state, control flow, external weights -- each against eager PyTorch -- and the typed errors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from feature_models import FEATURES, run_scenario  # noqa: E402

from edgetorch.errors import (  # noqa: E402
    ErrorCode,
    ExternalDataError,
    InvalidArgumentError,
)
from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402
from edgetorch.schema.program import TensorShapeDynamism  # noqa: E402


def _export(feature, tmp_path):
    et = to_edge(feature.programs, constant_methods=feature.constant_methods).to_executorch(
        ExecutorchBackendConfig(**feature.config))
    pte = tmp_path / "program.pte"
    pte.write_bytes(et.buffer)
    if feature.config.get("external_constants"):
        et.write_tensor_data_to_file(tmp_path)
    return et, pte


def _check(feature, got):
    want = feature.expected()
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"output {i}: {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=0, err_msg=f"output {i}")


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_feature_matches_eager(name, tmp_path):
    feature = FEATURES[name]()
    _, pte = _export(feature, tmp_path)
    ptd = tmp_path / "_default_external_constant.ptd"
    kwargs = {"data_path": ptd} if ptd.exists() else {}
    program = Runtime.get().load_program(pte, **kwargs)
    _check(feature, run_scenario(feature, program.load_method))


def test_multi_method_program_plans_each_method(tmp_path):
    feature = FEATURES["multi_method"]()
    et, pte = _export(feature, tmp_path)
    program = Runtime.get().load_program(pte)
    assert program.method_names == {"encode", "decode"}
    assert et.methods == {"encode", "decode"}
    for name in ("encode", "decode"):
        meta = program.metadata(name)
        assert meta.num_memory_planned_buffers() == 1 and meta.memory_planned_buffer_size(0) > 0


def test_constant_methods_are_listed_and_typed(tmp_path):
    feature = FEATURES["constant_methods"]()
    et, pte = _export(feature, tmp_path)
    program = Runtime.get().load_program(pte)
    assert et.config_methods == set(feature.constant_methods)
    assert program.method_names == {"forward"} | set(feature.constant_methods)
    assert program.load_method("get_max_seq_len").execute([]) == [128]
    assert program.load_method("get_eos_ids").execute([]) == [2, 3]
    assert program.load_method("get_temperature").execute([]) == [0.5]
    assert program.load_method("use_kv_cache").execute([]) == [True]


def test_dynamic_shape_metadata_and_bound_error(tmp_path):
    feature = FEATURES["dynamic_shapes"]()
    _, pte = _export(feature, tmp_path)
    method = Runtime.get().load_program(pte).load_method("forward")
    info = method.metadata.input_tensor_meta(0)
    assert info.sizes() == (16, 8) and info.shape_dynamism() == TensorShapeDynamism.DYNAMIC_BOUND
    with pytest.raises(InvalidArgumentError) as e:
        method.execute([np.zeros((17, 8), np.float32)])
    msg = str(e.value)
    assert "input 0" in msg and "dimension 0 is 17" in msg and "upper bound 16" in msg
    assert e.value.code == ErrorCode.InvalidArgument
    # After a rejected call the method still runs at a smaller size.
    assert method.execute([np.ones((3, 8), np.float32)])[0].shape == (24,)


def test_mutable_buffers_read_write_reset(tmp_path):
    feature = FEATURES["mutable_state"]()
    _, pte = _export(feature, tmp_path)
    method = Runtime.get().load_program(pte).load_method("forward")
    assert method.buffer_names == ["cache", "count"]
    x = np.ones((1, 3), np.float32)
    method.execute([x])
    method.execute([x])
    assert method.get_buffer("count").tolist() == [2]
    np.testing.assert_array_equal(method.get_buffer("cache")[-2:], np.ones((2, 3)))
    method.set_buffer("count", np.array([10]))
    out = method.execute([x])[0]
    np.testing.assert_allclose(out, np.full(3, 3.0) * 11)
    method.reset_buffers()
    assert method.get_buffer("count").tolist() == [0]
    assert not method.get_buffer("cache").any()
    with pytest.raises(InvalidArgumentError, match="no mutable buffer 'nope'"):
        method.get_buffer("nope")


def test_control_flow_emits_jumps(tmp_path):
    feature = FEATURES["control_flow"]()
    et, _ = _export(feature, tmp_path)
    kinds = {type(i.instr_args).__name__ for i in et.executorch_program.execution_plan[0].chains[0].instructions}
    assert {"JumpFalseCall", "MoveCall", "KernelCall"} <= kinds


def test_external_weights_need_their_ptd(tmp_path):
    feature = FEATURES["external_weights"]()
    et, pte = _export(feature, tmp_path)
    ptd = tmp_path / "_default_external_constant.ptd"
    assert ptd.exists() and set(et.data_files) == {"_default_external_constant.ptd"}
    program = Runtime.get().load_program(pte)  # loads; the weights are needed at load_method
    with pytest.raises(ExternalDataError, match="no .ptd data file was given") as e:
        program.load_method("forward")
    assert e.value.code == ErrorCode.InvalidExternalData
    # A .ptd written for another program is refused, naming the tensor.
    other = FEATURES["external_weights"]()
    other.programs = {"forward": torch.export.export(torch.nn.Linear(6, 12), (torch.randn(2, 6),))}
    (tmp_path / "other").mkdir()
    et2, _ = _export(other, tmp_path / "other")
    (tmp_path / "wrong").mkdir()
    et2.write_tensor_data_to_file(tmp_path / "wrong")
    wrong = Runtime.get().load_program(pte, data_path=tmp_path / "wrong" / "_default_external_constant.ptd")
    with pytest.raises(ExternalDataError, match="not in the external data file"):
        wrong.load_method("forward")
    assert pte.stat().st_size < 2000  # the weights are not in the .pte


def test_backend_registry_is_listed():
    reg = Runtime.get().backend_registry
    assert isinstance(reg.registered_backend_names, list)
    assert reg.is_available("NoSuchBackend") is False


def test_multi_method_through_to_edge_transform_and_lower(tmp_path):
    from edgetorch.exir import to_edge_transform_and_lower

    feature = FEATURES["multi_method"]()
    et = to_edge_transform_and_lower(feature.programs).to_executorch()
    program = Runtime.get().load_program(et.buffer)
    assert program.method_names == {"encode", "decode"}
    _check(feature, run_scenario(feature, program.load_method))


@pytest.mark.parametrize("names", [True, False])
def test_emit_mutable_buffer_names_is_honoured(names):
    feature = FEATURES["mutable_state"]()
    et = to_edge(feature.programs).to_executorch(
        ExecutorchBackendConfig(emit_mutable_buffer_names=names))
    values = et.executorch_program.execution_plan[0].values
    fqns = {v.val.extra_tensor_info.fully_qualified_name for v in values
            if hasattr(v.val, "extra_tensor_info") and v.val.extra_tensor_info is not None}
    assert fqns == ({"count", "cache"} if names else set())
    _check(feature, run_scenario(feature, Runtime.get().load_program(et.buffer).load_method))
