"""The runtime on its own: these tests must pass where torch is not installed.

Programs come from two places: a checked-in file written by ExecuTorch 1.5.1, and (when the
torch job ran first in the same CI run) the example programs edgetorch exported into
``$EDGETORCH_FIXTURES`` together with their inputs and eager outputs.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from torchless import run_without_torch, torch_job_fixtures

from edgetorch.errors import (
    ErrorCode,
    FormatError,
    InvalidArgumentError,
    MethodNotFoundError,
    OperatorMissingError,
)
from edgetorch.runtime import Runtime
from edgetorch.schema.pte import PteFile, serialize_pte

FIXTURES = Path(__file__).parents[1] / "fixtures"
ET_TINY = FIXTURES / "et_tiny_classifier.pte"


def _io():
    data = np.load(FIXTURES / "et_tiny_classifier.io.npz")
    return data["input_0"], data["output_0"]


@pytest.fixture
def method():
    return Runtime.get().load_program(ET_TINY).load_method("forward")


def test_load_from_path_bytes_and_file():
    x, want = _io()
    rt = Runtime.get()
    assert rt is Runtime.get()
    data = ET_TINY.read_bytes()
    for source in (ET_TINY, str(ET_TINY), data, io.BytesIO(data)):
        program = rt.load_program(source)
        assert program.method_names == {"forward"}
        out = program.load_method("forward").execute([x])
        np.testing.assert_allclose(out[0], want, atol=1e-6, rtol=0)


def test_executorch_program_matches_executorch_runtime(method):
    x, want = _io()
    out = method.execute([x])
    assert isinstance(out[0], np.ndarray) and out[0].dtype == np.float32
    np.testing.assert_allclose(out[0], want, atol=1e-6, rtol=0)
    out[0][...] = 0  # outputs are copies: changing them does not touch the method's memory
    np.testing.assert_allclose(method.execute([x])[0], want, atol=1e-6, rtol=0)


def test_metadata():
    program = Runtime.get().load_program(ET_TINY)
    meta = program.metadata("forward")
    assert meta.name() == "forward"
    assert meta.num_inputs() == 1 and meta.num_outputs() == 1
    inp = meta.input_tensor_meta(0)
    assert inp.sizes() == (1, 20) and inp.dtype().name == "FLOAT" and inp.is_memory_planned()
    assert inp.nbytes() == 80
    assert meta.output_tensor_meta(0).sizes() == (1, 4)
    assert meta.num_memory_planned_buffers() == 1
    assert meta.memory_planned_buffer_size(0) == 8576
    assert meta.num_instructions() == 8
    assert "forward" in str(meta)
    method = program.load_method("forward")
    assert method.metadata == meta


def test_operator_registry_lists_kernels():
    names = Runtime.get().operator_registry.operator_names
    for op in ("aten::addmm.out", "aten::relu.out", "aten::permute_copy.out",
               "aten::convolution.out", "executorch_prim::et_view.default"):
        assert op in names


def test_wrong_input_count(method):
    x, _ = _io()
    with pytest.raises(InvalidArgumentError, match=r"takes 1 input\(s\) \(float\[1, 20\]\), got 2") as e:
        method.execute([x, x])
    assert e.value.code == ErrorCode.InvalidArgument


def test_a_tensor_instead_of_a_list_of_inputs(method):
    """``execute(x)`` for ``execute([x])`` (x is [1, 20]: as a sequence, one row of 20) names
    the mistake instead of a rank error about the row."""
    x, _ = _io()
    torch = pytest.importorskip("torch")
    for wrong in (x, torch.from_numpy(x), 3.0):
        with pytest.raises(InvalidArgumentError, match=r"takes a list or tuple of inputs, one "
                           r"per input \(1 here\); got a .*: call execute\(\[x\]\)") as e:
            method.execute(wrong)
        assert e.value.code == ErrorCode.InvalidArgument
    np.testing.assert_array_equal(method.execute((x,))[0], method.execute([x])[0])


def test_wrong_input_dtype(method):
    x, _ = _io()
    with pytest.raises(InvalidArgumentError, match="expected dtype float .*got float64"):
        method.execute([x.astype(np.float64)])


def test_wrong_input_rank(method):
    with pytest.raises(InvalidArgumentError, match=r"expected rank 2 \(sizes \[1, 20\]\), got rank 1"):
        method.execute([np.zeros(20, np.float32)])


def test_wrong_input_sizes(method):
    with pytest.raises(InvalidArgumentError, match=r"expected sizes \[1, 20\], got \[2, 20\]"):
        method.execute([np.zeros((2, 20), np.float32)])


def test_unknown_method_lists_methods():
    with pytest.raises(MethodNotFoundError, match=r"no method 'encode'.*\['forward'\]"):
        Runtime.get().load_program(ET_TINY).load_method("encode")


def test_missing_operator_fails_at_load_method_naming_it():
    pte = PteFile.parse(ET_TINY.read_bytes())
    args = pte.to_serialize_args()
    program = args.pop("program")
    program.execution_plan[0].operators[2].name = "aten::relu_but_missing"
    data = serialize_pte(program, **args)
    loaded = Runtime.get().load_program(data)
    with pytest.raises(OperatorMissingError, match="aten::relu_but_missing.out") as e:
        loaded.load_method("forward")
    assert e.value.code == ErrorCode.OperatorMissing


def test_malformed_programs_raise_format_error():
    data = ET_TINY.read_bytes()
    for bad in (data[:100], data[:-5000], b"\0" * 64, data[:4] + b"XX12" + data[8:], b""):
        with pytest.raises(FormatError):
            Runtime.get().load_program(bad)


def test_generated_example_programs_match_eager():
    root = torch_job_fixtures()
    paths = sorted(root.glob("*.pte"))
    assert paths, f"no .pte files in $EDGETORCH_FIXTURES={root}"
    for path in paths:
        data = np.load(path.with_suffix(".npz"))
        n_in = sum(1 for k in data.files if k.startswith("input_"))
        inputs = [data[f"input_{i}"] for i in range(n_in)]
        outputs = Runtime.get().load_program(path).load_method("forward").execute(inputs)
        for i, out in enumerate(outputs):
            np.testing.assert_allclose(out, data[f"output_{i}"], atol=1e-5, rtol=0,
                                       err_msg=f"{path.name} output {i}")


def test_runtime_imports_and_runs_with_torch_blocked():
    code = (
        "import numpy as np\n"
        "from edgetorch.runtime import Runtime\n"
        f"m = Runtime.get().load_program({str(ET_TINY)!r}).load_method('forward')\n"
        "print(m.execute([np.zeros((1, 20), np.float32)])[0].shape)\n"
    )
    proc = run_without_torch(code)
    assert proc.returncode == 0, proc.stderr
    assert "(1, 4)" in proc.stdout
