"""The XNNPACK runtime backend on ExecuTorch-made programs: torch-free on the checked-in
TinyClassifier, and (compat) every example ExecuTorch lowers to XNNPACK, end to end through
``Runtime.load_program(...).load_method("forward").execute(...)`` against eager PyTorch."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ref_process
from refenv import _clean_env, ref_available, ref_python
from xnn_helpers import INVALID, MODELS, GraphBuilder

from edgetorch.backends.xnnpack import BACKEND_ID, XnnpackBackend
from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.serialization import serialize_xnnpack_binary
from edgetorch.errors import (
    ErrorCode,
    FormatError,
    InvalidArgumentError,
    InvalidProgramError,
    KernelError,
)
from edgetorch.runtime import Runtime
from edgetorch.runtime import backends as runtime_backends
from edgetorch.runtime.backends import RUNTIME_BACKENDS
from edgetorch.schema.pte import PteFile

ATOL = 1e-4


@dataclass(frozen=True)
class InitContext:
    """What the runtime should pass to ``Backend.init`` (the proposed BackendInitContext)."""

    method_name: str
    named_data: Any


class WithNamedData:
    """Stands in for the runtime's named-data hook: binds one program's named data."""

    def __init__(self, pte: PteFile) -> None:
        self.backend = XnnpackBackend()
        self.context = InitContext("forward", pte.named_data)

    def is_available(self) -> bool:
        return True

    def init(self, blob, compile_specs, context=None):
        return self.backend.init(blob, compile_specs, context or self.context)

    def execute(self, handle, values, args, context=None):
        self.backend.execute(handle, values, args, context)

    def destroy(self, handle):
        self.backend.destroy(handle)


# Whether the runtime passes named data to Backend.init (the hook this backend needs).
RUNTIME_HAS_HOOK = hasattr(runtime_backends, "BackendInitContext")


def run_method(pte_bytes: bytes, inputs, monkeypatch) -> list[np.ndarray]:
    if not RUNTIME_HAS_HOOK:
        monkeypatch.setitem(RUNTIME_BACKENDS, BACKEND_ID, WithNamedData(PteFile.parse(pte_bytes)))
    method = Runtime.get().load_program(pte_bytes).load_method("forward")
    return method.execute(inputs)


def test_registered_under_executorch_id():
    assert Runtime.get().backend_registry.is_available("XnnpackBackend")


def test_backend_runs_the_blob_directly(tiny_pte, tiny_io):
    pte = PteFile.parse(tiny_pte)
    plan = pte.program.execution_plan[0]
    backend = XnnpackBackend()
    handle = backend.init(pte.delegate_bytes(plan.delegates[0]), {},
                          InitContext("forward", pte.named_data))
    inp, expected = tiny_io
    out = np.zeros((1, 4), np.float32)
    values = [inp, out]
    for _ in range(2):  # a handle runs any number of times
        backend.execute(handle, values, [0, 1])
        assert values[1] is out  # written in place, into the method's planned tensor
        np.testing.assert_allclose(out, expected, atol=ATOL, rtol=0)
    assert "XNNFullyConnected" in str(handle)
    backend.destroy(handle)


def test_program_end_to_end_with_named_data(tiny_pte, tiny_io, monkeypatch):
    inp, expected = tiny_io
    (out,) = run_method(tiny_pte, [inp], monkeypatch)
    np.testing.assert_allclose(out, expected, atol=ATOL, rtol=0)


@pytest.mark.xfail(not RUNTIME_HAS_HOOK, strict=True, raises=InvalidProgramError,
                   reason="the runtime does not pass named data to Backend.init yet (needs the "
                          "BackendInitContext hook in runtime/method.py)")
def test_program_end_to_end_through_the_plain_runtime(tiny_pte, tiny_io):
    inp, expected = tiny_io
    (out,) = Runtime.get().load_program(tiny_pte).load_method("forward").execute([inp])
    np.testing.assert_allclose(out, expected, atol=ATOL, rtol=0)


def test_without_named_data_the_error_says_what_is_missing(tiny_pte):
    pte = PteFile.parse(tiny_pte)
    blob = pte.delegate_bytes(pte.program.execution_plan[0].delegates[0])
    with pytest.raises(InvalidProgramError, match="named data") as e:
        XnnpackBackend().init(blob, {})
    assert e.value.code == ErrorCode.NotFound


def test_runs_without_torch(tiny_pte):
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np\n"
        "from edgetorch.backends.xnnpack import XnnpackBackend\n"
        "from edgetorch.schema.pte import PteFile\n"
        f"pte = PteFile.parse(open({str(_fixture())!r}, 'rb').read())\n"
        "b = XnnpackBackend()\n"
        "class C: named_data = staticmethod(pte.named_data)\n"
        "h = b.init(pte.delegate_bytes(pte.program.execution_plan[0].delegates[0]), {}, C())\n"
        "v = [np.ones((1, 20), np.float32), np.zeros((1, 4), np.float32)]\n"
        "b.execute(h, v, [0, 1]); assert np.isfinite(v[1]).all() and v[1].any()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _fixture() -> Path:
    return Path(__file__).with_name("fixtures") / "et_tiny_classifier_xnnpack.pte"


# ---- behaviour beyond what the example models exercise ------------------------------------


def _run(b: GraphBuilder, inputs, outs, args=None):
    backend = XnnpackBackend()
    handle = backend.init(serialize_xnnpack_binary(b.build()), {},
                          InitContext("forward", b.named.__getitem__))
    values = list(inputs) + list(outs)
    backend.execute(handle, values, args if args is not None else list(range(len(values))))
    return values


def test_arguments_are_found_by_external_id():
    """External ids index the call's arguments; values may sit anywhere in the method."""
    b = GraphBuilder()
    i1, i2 = b.input(3), b.input(3)
    o = b.output(3)
    b.node(x.XNNSubtract(i1, i2, o))
    a, c = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    out = np.zeros(3, np.float32)
    values = [None, out, c, a]  # the method's value list
    backend = XnnpackBackend()
    handle = backend.init(serialize_xnnpack_binary(b.build()), {})
    backend.execute(handle, values, [3, 2, 1])
    np.testing.assert_array_equal(out, a - c)


def test_convert_to_fp16_output():
    b = GraphBuilder()
    i, o = b.input(2, 2), b.tensor(2, 2)
    b.values[o].flags = x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT
    b.values[o].datatype = x.XNNDatatype.xnn_datatype_fp16
    b._outputs.append(o)
    b.node(x.XNNConvert(i, o))
    src = np.array([[1.0, 2.5], [-3.0, 1e-3]], np.float32)
    out = np.zeros((2, 2), np.float16)
    _run(b, [src], [out])
    np.testing.assert_array_equal(out, src.astype(np.float16))


def test_channels_last_tensors_cross_in_memory_order():
    """A delegate argument in channels-last dim order reaches XNNPACK as NHWC."""
    b = GraphBuilder()
    i, o = b.input(1, 2, 3, 4), b.output(1, 2, 3, 4)  # NHWC dims
    b.node(x.XNNClamp(i, o), x.OutputMinMax(-100.0, 100.0))
    nhwc = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    logical = nhwc.transpose(0, 3, 1, 2)  # an NCHW tensor with dim order (0, 2, 3, 1)
    out = np.zeros((1, 2, 3, 4), np.float32).transpose(0, 3, 1, 2)
    _run(b, [logical], [out])
    np.testing.assert_array_equal(out, logical)


def test_wrong_input_dtype_or_argument_count():
    b = GraphBuilder()
    i, o = b.input(2), b.output(2)
    b.node(x.XNNAbs(i, o))
    with pytest.raises(InvalidArgumentError, match="float32"):
        _run(b, [np.zeros(2, np.float64)], [np.zeros(2, np.float32)])
    with pytest.raises(InvalidArgumentError, match="takes 2 arguments"):
        _run(b, [np.zeros(2, np.float32)], [np.zeros(2, np.float32)], args=[0])


def test_a_failing_node_is_named():
    b = GraphBuilder()
    i, f = b.input(2, 3), b.const(np.ones((4, 5), np.float32))
    o = b.output(2, 4)
    b.node(x.XNNFullyConnected(i, f, INVALID, o))
    # (channels that disagree are now refused at init, as xnn_define_fully_connected does)
    with pytest.raises((KernelError, FormatError), match="node 0 XNNFullyConnected"):
        _run(b, [np.zeros((2, 3), np.float32)], [np.zeros((2, 4), np.float32)])


def test_output_size_mismatch_is_an_error():
    b = GraphBuilder()
    i, o = b.input(2, 3), b.output(3, 2)
    b.node(x.XNNStaticTranspose(2, [1, 0], i, o))
    with pytest.raises(KernelError, match="planned"):
        _run(b, [np.zeros((2, 3), np.float32)], [np.zeros((2, 3), np.float32)])


def test_an_output_no_node_writes():
    b = GraphBuilder()
    i = b.input(2)
    b.output(2)
    b.node(x.XNNAbs(i, b.tensor(2)))
    with pytest.raises(KernelError, match="never computed"):
        _run(b, [np.zeros(2, np.float32)], [np.zeros(2, np.float32)])


def test_unsupported_nodes_and_values_fail_at_load():
    b = GraphBuilder()
    q, k, v, s, o = b.input(1, 2, 4), b.input(1, 2, 4), b.input(1, 2, 4), b.input(4), b.output(
        1, 2, 4)
    b.node(x.XNNScaledDotProductAttention(q, k, v, s, INVALID, o))
    with pytest.raises(InvalidProgramError, match="rejects it too") as e:
        XnnpackBackend().init(serialize_xnnpack_binary(b.build()), {})
    assert e.value.code == ErrorCode.NotImplemented

    g = GraphBuilder()
    i, o = g.input(2), g.output(2)
    g.node(x.XNNAbs(i, o))
    graph = g.build()
    graph.xvalues[0] = x.XValue(x.XNNQuantizedTensorValue(
        graph.xvalues[0].tensor, x.PerTensorQuant(0.5, 0)))
    with pytest.raises(InvalidProgramError, match="quantized"):
        XnnpackBackend().init(serialize_xnnpack_binary(graph), {})


def test_dynamic_output_sizes_go_through_the_resize_hook():
    b = GraphBuilder()
    i, o = b.input(10, 4), b.output(10, 2, 2)  # upper bounds
    b.node(x.XNNStaticReshape(3, [0, 2, 2], i, o))
    planned = np.zeros((10, 2, 2), np.float32)
    values = [np.arange(12, dtype=np.float32).reshape(3, 4), planned]
    calls = []

    class Exec:
        @staticmethod
        def resize(index, sizes):
            calls.append((index, sizes))
            values[index] = planned.reshape(-1)[: int(np.prod(sizes))].reshape(sizes)
            return values[index]

    backend = XnnpackBackend()
    handle = backend.init(serialize_xnnpack_binary(b.build()), {})
    backend.execute(handle, values, [0, 1], Exec())
    assert calls == [(1, (3, 2, 2))]
    np.testing.assert_array_equal(values[1], np.arange(12).reshape(3, 2, 2))


# ---- compat: ExecuTorch-lowered examples, end to end ------------------------------------


@pytest.mark.compat
@pytest.mark.parametrize("name", MODELS)
def test_executorch_xnnpack_program_matches_eager(name, xnnpack_exports, monkeypatch):
    export = xnnpack_exports.get(name)
    pte = export.pte.read_bytes()
    ids = {d.id for p in PteFile.parse(pte).program.execution_plan for d in p.delegates}
    assert ids == {"XnnpackBackend"}
    outs = run_method(pte, export.inputs(), monkeypatch)
    expected = export.expected()
    assert len(outs) == len(expected)
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=0, err_msg=name)


@pytest.mark.compat
@pytest.mark.parametrize("name", MODELS)
def test_executorch_xnnpack_program_load_passes_give_the_reference_results(name,
                                                                           xnnpack_exports):
    """ExecuTorch's XNNPACK files: each load pass alone (the backend plan's among them) and
    all together against the reference path."""
    from pass_equivalence import assert_passes_match_the_kernels

    export = xnnpack_exports.get(name)
    assert_passes_match_the_kernels(export.pte.read_bytes(), export.inputs(), name)


@pytest.fixture(scope="module")
def dynamic_export(tmp_path_factory):
    """ExecuTorch's XNNPACK lowering of a model with a dynamic batch (1..10), with inputs and
    ExecuTorch's outputs for batches 1, 3 and 10."""
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    d = tmp_path_factory.mktemp("xnnpack-dynamic")
    ref_process.run([str(ref_python()), str(Path(__file__).with_name("xnn_ref.py")), "dynamic",
                    str(d)], env=_clean_env(), check=True, capture_output=True, timeout=900)
    cases = []
    for batch in (1, 3, 10):
        with np.load(d / f"dynamic.b{batch}.npz") as f:
            cases.append((f["arr_0"], f["arr_1"]))
    return (d / "dynamic.pte").read_bytes(), cases


@pytest.mark.compat
def test_executorch_dynamic_batch_blob(dynamic_export):
    """Dims are upper bounds and reshape infers (0); outputs are resized through the hook."""
    data, cases = dynamic_export
    pte = PteFile.parse(data)
    plan = pte.program.execution_plan[0]
    args = [int(a) for a in plan.chains[0].instructions[0].instr_args.args]
    backend = XnnpackBackend()
    handle = backend.init(pte.delegate_bytes(plan.delegates[0]), {},
                          InitContext("forward", pte.named_data))
    arena = np.zeros(10 * 2 * 2, np.float32)  # the planned output at its upper bound

    class Exec:
        @staticmethod
        def resize(index, sizes):
            values[index] = arena[: int(np.prod(sizes))].reshape(sizes)
            return values[index]

    for inp, want in cases:
        values = [inp, arena.reshape(10, 2, 2)]
        backend.execute(handle, values, args, Exec())
        np.testing.assert_allclose(values[1], want, atol=ATOL, rtol=0)


@pytest.mark.compat
@pytest.mark.xfail(not RUNTIME_HAS_HOOK, strict=True, raises=KernelError,
                   reason="the runtime does not pass BackendExecutionContext.resize to "
                          "Backend.execute yet")
def test_executorch_dynamic_batch_program(dynamic_export, monkeypatch):
    data, cases = dynamic_export
    if not RUNTIME_HAS_HOOK:
        monkeypatch.setitem(RUNTIME_BACKENDS, BACKEND_ID, WithNamedData(PteFile.parse(data)))
    method = Runtime.get().load_program(data).load_method("forward")
    for inp, want in cases:
        (out,) = method.execute([inp])
        np.testing.assert_allclose(out, want, atol=ATOL, rtol=0)
