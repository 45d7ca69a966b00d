"""Every built-in example: export, run in the runtime, equal to eager PyTorch within 1e-5."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")


from pass_equivalence import assert_passes_match_the_kernels  # noqa: E402

from edgetorch.examples import EXAMPLES, get_example  # noqa: E402
from edgetorch.exir import ExecutorchBackendConfig, MemoryPlanningPass, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

ATOL = 1e-5

# Known gaps (xfail strict: the day they are fixed, drop the entry).
KNOWN_FAILURES: dict[str, str] = {}


def _examples():
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[n]))
            if n in KNOWN_FAILURES else n for n in sorted(EXAMPLES)]


@pytest.fixture(scope="module")
def exported():
    cache = {}

    def get(name):
        if name not in cache:
            ex = get_example(name)
            model, inputs = ex.factory(), ex.example_inputs()
            et = to_edge(torch.export.export(model, inputs)).to_executorch()
            cache[name] = (model, inputs, et)
        return cache[name]

    return get


@pytest.mark.parametrize("name", _examples())
def test_example_matches_eager(name, exported):
    model, inputs, et = exported(name)
    method = Runtime.get().load_program(et.buffer).load_method("forward")
    outputs = method.execute(list(inputs))
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert isinstance(got, torch.Tensor)
        assert got.shape == want.shape and got.dtype == want.dtype
        err = (got - want).abs().max().item()
        assert err <= ATOL, f"{name}: max |error| {err:.3g} > {ATOL}"
    # A second run with other inputs reuses the planned memory and still matches.
    other = get_example(name).example_inputs(seed=123)
    got = method.execute(other)[0]
    with torch.no_grad():
        want = model(*other)
    want = want[0] if isinstance(want, tuple) else want
    assert (got - want).abs().max().item() <= ATOL


@pytest.mark.parametrize("name", _examples())
def test_every_load_pass_gives_the_kernels_results(name, exported):
    """Each load pass alone and all together, against every kernel run by its closure."""
    _, inputs, et = exported(name)
    assert_passes_match_the_kernels(et.buffer, [x.numpy() for x in inputs], name)


@pytest.mark.parametrize("name", ["tiny_classifier", "cnn"])
def test_numpy_in_numpy_out(name, exported):
    model, inputs, et = exported(name)
    method = Runtime.get().load_program(et.buffer).load_method("forward")
    out = method.execute([x.numpy() for x in inputs])[0]
    assert isinstance(out, np.ndarray)
    with torch.no_grad():
        want = model(*inputs).numpy()
    np.testing.assert_allclose(out, want, atol=ATOL, rtol=0)


def _check_plan_is_sound(plan):
    """No two planned tensors share bytes while both are alive."""
    specs = plan.specs
    for i, a in enumerate(specs):
        for b in specs[i + 1:]:
            if a.mem_id != b.mem_id:
                continue
            lives = a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]
            bytes_ = (a.mem_offset < b.mem_offset + b.allocated_memory
                      and b.mem_offset < a.mem_offset + a.allocated_memory)
            assert not (lives and bytes_), f"{a} and {b} overlap in time and memory"


@pytest.mark.parametrize("name", ["cnn", "transformer_encoder", "mlp"])
def test_greedy_plan_is_sound_and_no_larger_than_naive(name, exported):
    model, inputs, et = exported(name)
    greedy = et.memory_plan()
    _check_plan_is_sound(greedy)
    naive_et = to_edge(torch.export.export(model, inputs)).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo="naive"))
    )
    naive = naive_et.memory_plan()
    assert greedy.total <= naive.total
    assert greedy.total < naive.total or len(naive.specs) <= 2
    method = Runtime.get().load_program(naive_et.buffer).load_method("forward")
    with torch.no_grad():
        want = model(*inputs)
    assert (method.execute(list(inputs))[0] - want).abs().max().item() <= ATOL


def test_unplanned_inputs_and_outputs(exported):
    model, inputs, _ = exported("cnn")
    et = to_edge(torch.export.export(model, inputs)).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
            alloc_graph_input=False, alloc_graph_output=False)))
    meta = Runtime.get().load_program(et.buffer).metadata("forward")
    assert not meta.input_tensor_meta(0).is_memory_planned()
    assert not meta.output_tensor_meta(0).is_memory_planned()
    method = Runtime.get().load_program(et.buffer).load_method("forward")
    with torch.no_grad():
        want = model(*inputs)
    assert (method.execute(list(inputs))[0] - want).abs().max().item() <= ATOL
