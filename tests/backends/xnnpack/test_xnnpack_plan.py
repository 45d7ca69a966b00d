"""The compiled plan (``backends/xnnpack/plan.py``): a graph called again with input shapes it
has seen runs one generated function over preallocated buffers. It must give the bits of the
reference path (node by node on the environment), which the node tests compare with torch."""

from __future__ import annotations

import numpy as np
import pytest
from xnn_cases import CASES
from xnn_helpers import GraphBuilder

from edgetorch.backends.xnnpack import XnnpackBackend
from edgetorch.backends.xnnpack import plan as planning
from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.serialization import serialize_xnnpack_binary
from edgetorch.errors import KernelError
from edgetorch.kernels import accel

IDS = [c.name for c in CASES]


class _Context:
    def __init__(self, named: dict[str, bytes]) -> None:
        self.named_data = named.__getitem__


def _handle(b: GraphBuilder):
    backend = XnnpackBackend()
    return backend, backend.init(serialize_xnnpack_binary(b.build()), {}, _Context(b.named))


def _call(backend, handle, b: GraphBuilder, inputs, context=None) -> list[np.ndarray]:
    outs = [np.full(d, np.nan if np.dtype(t).kind == "f" else -1, t)  # (unwritten: visible)
            for d, t in zip(b.output_dims, b.output_dtypes)]
    values = list(inputs) + outs
    backend.execute(handle, values, list(range(len(values))), context)
    return outs


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_plan_gives_the_reference_bits_and_matches_torch(c):
    torch = pytest.importorskip("torch")
    b, inputs, meta = c.build()
    backend, handle = _handle(b)
    reference = _call(backend, handle, b, inputs)  # first call of a shape: reference path
    assert not handle.plans
    built = _call(backend, handle, b, inputs)  # second: builds the plan while running
    assert len(handle.plans) == 1
    planned = [_call(backend, handle, b, inputs) for _ in range(2)]  # the plan itself
    assert _same(reference, built) and all(_same(reference, p) for p in planned), c.name
    with torch.no_grad():
        want = c.reference(torch, [torch.from_numpy(a) for a in inputs], meta)
    for g, w in zip(planned[-1], want):
        np.testing.assert_allclose(g, w.numpy(), atol=c.atol, rtol=1e-5, err_msg=c.name)


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_plan_reads_new_input_values(c):
    """Buffers and fixed views are reused across calls: new data must flow through them."""
    b, inputs, _ = c.build()
    backend, handle = _handle(b)
    for _ in range(3):
        _call(backend, handle, b, inputs)
    other = [np.flip(a).copy() for a in inputs]
    fresh_backend, fresh = _handle(b)
    assert _same(_call(backend, handle, b, other), _call(fresh_backend, fresh, b, other)), c.name


def test_plan_with_and_without_compiled_kernels():
    """The plan follows accel.available() at the time the kernels run (tests compare both)."""
    for c in CASES:
        if c.name not in ("softmax", "gelu", "sigmoid"):
            continue
        b, inputs, _ = c.build()
        results = []
        for ctx in (accel.disabled, _noop):
            with ctx():
                backend, handle = _handle(b)
                results.append([_call(backend, handle, b, inputs) for _ in range(3)][-1])
        for g, w in zip(*results):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=c.name)


class _noop:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _chain() -> tuple[GraphBuilder, list[np.ndarray]]:
    """reshape -> transpose (a view) -> reshape (copies) -> add of a broadcast constant."""
    b = GraphBuilder()
    i = b.input(2, 3, 4)
    r, t, f = b.tensor(6, 4), b.tensor(4, 6), b.tensor(24)
    c = b.const(np.arange(24, dtype=np.float32))
    o = b.output(2, 12)
    b.node(x.XNNStaticReshape(2, [6, 4], i, r))
    b.node(x.XNNStaticTranspose(2, [1, 0], r, t))
    b.node(x.XNNStaticReshape(1, [24], t, f))
    s = b.tensor(24)
    b.node(x.XNNAdd(f, c, s))
    b.node(x.XNNStaticReshape(2, [2, 12], s, o))
    return b, [np.arange(24, dtype=np.float32).reshape(2, 3, 4)]


def test_views_of_inputs_are_made_per_call_and_copies_are_buffered():
    b, inputs = _chain()
    backend, handle = _handle(b)
    want = (inputs[0].reshape(6, 4).T.reshape(24) + np.arange(24)).reshape(2, 12)
    for k in range(4):
        a = inputs[0] * (k + 1)
        got = _call(backend, handle, b, [a])[0]
        np.testing.assert_array_equal(got, (a.reshape(6, 4).T.reshape(24)
                                            + np.arange(24)).reshape(2, 12))
    assert "COPYTO" in str(handle.plan)  # the reshape of the transposed view
    np.testing.assert_array_equal(_call(backend, handle, b, inputs)[0], want)


def test_a_plan_per_input_shape_and_the_resize_hook():
    b = GraphBuilder()
    i, o = b.input(10, 4), b.output(10, 2, 2)  # upper bounds: a dynamic batch
    h = b.tensor(10, 4)
    b.node(x.XNNAbs(i, h))
    b.node(x.XNNStaticReshape(3, [0, 2, 2], h, o))
    backend, handle = _handle(b)
    planned = np.zeros((10, 2, 2), np.float32)

    class Exec:
        @staticmethod
        def resize(index, sizes):
            values[index] = planned.reshape(-1)[: int(np.prod(sizes))].reshape(sizes)
            return values[index]

    for n in (3, 5, 3, 5, 3, 5, 7):
        src = -np.arange(n * 4, dtype=np.float32).reshape(n, 4)
        values = [src, planned]
        backend.execute(handle, values, [0, 1], Exec())
        np.testing.assert_array_equal(values[1], np.abs(src).reshape(n, 2, 2))
    assert sorted(handle.plans) == [((3, 4),), ((5, 4),)]  # 7 came once: no plan for it


def test_a_node_failing_inside_the_plan_is_named():
    b, inputs = _chain()
    backend, handle = _handle(b)
    for _ in range(2):
        _call(backend, handle, b, inputs)
    namespace = handle.plan.fn.__globals__
    name = next(k for k, v in namespace.items() if v is np.add)

    def broken(*args, **kwargs):
        raise ValueError("boom")
    namespace[name] = broken
    with pytest.raises(KernelError, match="node 3 XNNAdd.*boom"):
        _call(backend, handle, b, inputs)


def test_traced_calls_take_the_reference_path_with_an_event_per_node():
    b, inputs = _chain()
    backend, handle = _handle(b)
    events = []

    class Tracer:
        def log_profiling_delegate(self, *args):
            events.append(args[1])

    class Ctx:
        event_tracer = Tracer()
        resize = None

    for _ in range(3):
        _call(backend, handle, b, inputs)
    assert handle.plans
    traced = _call(backend, handle, b, inputs, Ctx())
    assert events == [f"{n} #{k}" for k, n in enumerate(
        ["XNNStaticReshape", "XNNStaticTranspose", "XNNStaticReshape", "XNNAdd",
         "XNNStaticReshape"])]
    assert _same(traced, _call(backend, handle, b, inputs))


def test_plans_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(planning, "PLAN_AFTER", 0)
    b, inputs = _chain()
    backend, handle = _handle(b)
    for _ in range(3):
        _call(backend, handle, b, inputs)
    assert not handle.plans
