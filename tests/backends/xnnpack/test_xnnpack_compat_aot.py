"""Our XNNPACK-lowered programs in ExecuTorch 1.5.1's runtime with the real XNNPACK (the
proof that the blobs are ExecuTorch's format), and our partitioning next to ExecuTorch's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ref_process
import torch
from refenv import _clean_env, ref_available, ref_python
from xnn_aot_cases import CASES, IDS, dynamic_batch_programs, eager, lower, run_ours
from xnn_helpers import MODELS as EXECUTORCH_LOWERED  # what conftest's xnnpack_exports has

from edgetorch.backends.xnnpack.serialization import deserialize_xnnpack_binary
from edgetorch.examples import EXAMPLES
from edgetorch.schema.pte import PteFile

pytestmark = pytest.mark.compat

REF_SCRIPT = Path(__file__).with_name("xnn_ref.py")
EXAMPLE_MODELS = sorted(EXAMPLES)


def _ref_inputs(inputs: tuple) -> list[np.ndarray]:
    """ExecuTorch's Python runtime copies an input's bytes as they lie in memory, whatever
    its dim order: a channels-last input is handed over as its NHWC bytes."""
    out = []
    for t in inputs:
        if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) \
                and not t.is_contiguous():
            t = t.permute(0, 2, 3, 1).contiguous().reshape(t.shape)
        out.append(np.ascontiguousarray(t.numpy()))
    return out


def _run_in_executorch(d: Path, programs: dict[str, tuple[bytes, tuple]]) -> None:
    """Run every program in one subprocess: ``d/NAME.out.npz`` or ``d/NAME.err.txt``."""
    for name, (pte, inputs) in programs.items():
        (d / f"{name}.pte").write_bytes(pte)
        np.savez(d / f"{name}.in.npz", *_ref_inputs(inputs))
    ref_process.run([str(ref_python()), str(REF_SCRIPT), "run", str(d)], env=_clean_env(),
                    check=True, capture_output=True, timeout=1800)


def _executorch_outputs(d: Path, name: str) -> list[np.ndarray]:
    err = d / f"{name}.err.txt"
    if err.exists():
        pytest.fail(f"ExecuTorch could not run our {name} program:\n{err.read_text()[-3000:]}")
    with np.load(d / f"{name}.out.npz") as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """The examples lowered by us and run by ExecuTorch: name -> (pte, eager outputs)."""
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    d = tmp_path_factory.mktemp("xnnpack-aot-examples")
    built, programs = {}, {}
    for name in EXAMPLE_MODELS:
        model, inputs = EXAMPLES[name].build()
        _, et = lower(model, inputs)
        built[name] = (et.buffer, eager(model, inputs))
        programs[name] = (et.buffer, inputs)
    _run_in_executorch(d, programs)
    return d, built


@pytest.fixture(scope="module")
def op_cases(tmp_path_factory):
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    d = tmp_path_factory.mktemp("xnnpack-aot-ops")
    programs, wants = {}, {}
    for c in CASES:
        model, inputs = c.build()
        programs[c.name] = (lower(model, inputs)[1].buffer, inputs)
        wants[c.name] = eager(model, inputs)
    _run_in_executorch(d, programs)
    return d, wants


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_operator_pattern_runs_in_executorch(c, op_cases):
    d, wants = op_cases
    for got, want in zip(_executorch_outputs(d, c.name), wants[c.name]):
        np.testing.assert_allclose(got, want, atol=max(c.atol, 1e-5), rtol=1e-5, err_msg=c.name)


@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_example_model_runs_in_executorch(name, ours):
    d, built = ours
    for got, want in zip(_executorch_outputs(d, name), built[name][1]):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def _delegates_and_kernels(pte: bytes) -> tuple[list[bytes], set[str]]:
    f = PteFile.parse(pte)
    plan = f.program.execution_plan[0]
    return [bytes(f.delegate_bytes(d)) for d in plan.delegates], {o.name for o in plan.operators}


@pytest.mark.parametrize("name", EXECUTORCH_LOWERED)
def test_we_delegate_at_least_what_executorch_delegates(name, ours, xnnpack_exports):
    """Never more delegates, never an operator that ExecuTorch delegated left portable."""
    mine, my_kernels = _delegates_and_kernels(ours[1][name][0])
    theirs, their_kernels = _delegates_and_kernels(xnnpack_exports.get(name).pte.read_bytes())
    assert 1 <= len(mine) <= len(theirs)
    assert my_kernels <= their_kernels


@pytest.mark.parametrize("name", ["tiny_classifier", "cnn", "mlp", "mobilenet_v2", "resnet18"])
def test_xnnpack_graph_and_weights_equal_executorchs(name, ours, xnnpack_exports):
    """Node for node, value for value, weight for weight, and each node's debug handle (the
    Edge node it came from, numbered as ExecuTorch's to_edge numbers them)."""
    mine = PteFile.parse(ours[1][name][0])
    theirs = PteFile.parse(xnnpack_exports.get(name).pte.read_bytes())

    def graphs(f: PteFile):
        return [deserialize_xnnpack_binary(f.delegate_bytes(d)).graph
                for d in f.program.execution_plan[0].delegates]

    assert graphs(mine) == graphs(theirs)
    assert mine.named_data_keys() == theirs.named_data_keys()
    for key in mine.named_data_keys():
        assert bytes(mine.named_data(key)) == bytes(theirs.named_data(key))


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    """Our dynamic-batch programs run by ExecuTorch at each batch size, and ExecuTorch's own
    lowering of the Linear-ReLU-reshape model (``xnn_ref.py dynamic``)."""
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    d = tmp_path_factory.mktemp("xnnpack-aot-dynamic")
    programs, wants = {}, {}
    for name, model, et, batches in dynamic_batch_programs():
        for inputs in batches:
            key = f"{name}.b{inputs[0].shape[0]}"
            programs[key] = (et.buffer, inputs)
            wants[key] = eager(model, inputs)
    _run_in_executorch(d, programs)
    (d / "et").mkdir()
    ref_process.run([str(ref_python()), str(REF_SCRIPT), "dynamic", str(d / "et")],
                    env=_clean_env(), check=True, capture_output=True, timeout=900)
    return d, wants


def test_dynamic_batch_runs_in_executorch(dynamic):
    d, wants = dynamic
    for key, want in wants.items():
        got = _executorch_outputs(d, key)
        assert got[0].shape == want[0].shape, key
        np.testing.assert_allclose(got[0], want[0], atol=1e-5, err_msg=key)


def test_dynamic_blob_equals_executorchs(dynamic):
    d, _ = dynamic
    mine = PteFile.parse((d / "linear_relu_reshape.b1.pte").read_bytes())
    theirs = PteFile.parse((d / "et" / "dynamic.pte").read_bytes())
    graphs = []
    for f in (mine, theirs):
        graphs.append(deserialize_xnnpack_binary(
            f.delegate_bytes(f.program.execution_plan[0].delegates[0])).graph)
    assert graphs[0] == graphs[1]
    assert graphs[0].xvalues[-1].tensor.dims == [10, 2, 2]  # the upper bound


def test_a_weight_shared_with_an_undelegated_user_is_stored_as_executorch_stores_it(tmp_path):
    """A tied table (the Linear's weight in XNNPACK, the Embedding's in the program) is kept
    twice, once per side, as ExecuTorch 1.5.1 keeps it; the program runs like eager."""
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    import xnn_tied

    theirs = tmp_path / "theirs.pte"
    ref_process.run([str(ref_python()), xnn_tied.__file__, "executorch", str(theirs)],
                    env=_clean_env(), check=True, capture_output=True, timeout=600)
    mine = xnn_tied.lower("edgetorch")
    model, inputs = xnn_tied.build()
    table = model.emb.weight.detach().numpy().tobytes()
    assert mine.count(table) == theirs.read_bytes().count(table) == 2
    np.testing.assert_allclose(run_ours(mine, tuple(t.numpy() for t in inputs))[0], eager(model, inputs)[0],
                               rtol=1e-5, atol=1e-5)
