"""The compiled plan (``backends/xnnpack/plan.py``): a graph called again with input shapes it
has seen runs one generated function over preallocated buffers. It must give the bits of the
reference path (node by node on the environment), which the node tests compare with torch."""

from __future__ import annotations

import numpy as np
import pytest
from reduction_tolerance import abs_magnitude, assert_close_reduction  # tests/support
from xnn_cases import CASES
from xnn_helpers import GraphBuilder

from edgetorch.backends.xnnpack import XnnpackBackend
from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.runtime.backend import run_steps
from edgetorch.backends.xnnpack.serialization import serialize_xnnpack_binary
from edgetorch.errors import KernelError
from edgetorch.kernels import accel
from edgetorch.runtime import optimize

IDS = [c.name for c in CASES]
# the built-in examples (edgetorch.examples needs torch: the names are listed here)
EXAMPLE_NAMES = ["bert_encoder", "cnn", "llama_decoder", "mlp", "mobilenet_v2", "resnet18",
                 "shape_ops", "simple_model", "tiny_classifier", "transformer_encoder"]


class _Context:
    def __init__(self, named: dict[str, bytes], static_shapes: bool = True) -> None:
        self.named_data = named.__getitem__
        self.static_shapes = static_shapes  # (as a method whose tensors have static sizes)


def _handle(b: GraphBuilder):
    backend = XnnpackBackend()
    return backend, backend.init(serialize_xnnpack_binary(b.build()), {}, _Context(b.named))


def _call(backend, handle, b: GraphBuilder, inputs, context=None) -> list[np.ndarray]:
    outs = [np.full(d, np.nan if np.dtype(t).kind == "f" else -1, t)  # (unwritten: visible)
            for d, t in zip(b.output_dims, b.output_dtypes)]
    values = list(inputs) + outs
    backend.execute(handle, values, list(range(len(values))), context)
    return outs


def _reference(handle, b: GraphBuilder, inputs) -> list[np.ndarray]:
    """One call on the reference path (each node's step), whatever plans the graph has."""
    outs = [np.full(d, np.nan if np.dtype(t).kind == "f" else -1, t)
            for d, t in zip(b.output_dims, b.output_dtypes)]
    values = list(inputs) + outs
    run_steps(handle, values, list(range(len(values))))
    return outs


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_plan_gives_the_reference_bits_and_matches_torch(c):
    torch = pytest.importorskip("torch")
    b, inputs, meta = c.build()
    backend, handle = _handle(b)
    assert list(handle.plans) == [tuple(a.shape for a in inputs)]  # built at load, on zeros
    reference = _reference(handle, b, inputs)  # node by node on the environment
    planned = [_call(backend, handle, b, inputs) for _ in range(2)]  # the plan itself
    assert len(handle.plans) == 1
    assert all(_same(reference, p) for p in planned), c.name
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
    backend = XnnpackBackend()  # a method with a dynamic batch: no plan at load
    handle = backend.init(serialize_xnnpack_binary(b.build()), {}, _Context(b.named, False))
    assert not handle.plans
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

    class Tracer:  # profiling only, as EventTracer() without a debug buffer
        log_intermediate_outputs = False
        delegate_intermediate_outputs = False

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


def test_plans_can_be_switched_off():
    b, inputs = _chain()
    context = _Context(b.named)
    context.optimize = optimize.options({"xnnpack.fuse_chains"}, optimize.PASSES, "m")
    backend = XnnpackBackend()
    handle = backend.init(serialize_xnnpack_binary(b.build()), {}, context)
    reference = [_call(backend, handle, b, inputs) for _ in range(3)]
    assert not handle.plans and not handle.fusions and all(_same(reference[0], r)
                                                          for r in reference)
    report = context.optimize.report
    assert report["xnnpack.plan"].status == "off" and report["xnnpack.arena"].status == "off"


# ---- fused chains (fusion.py) ---------------------------------------------------------------


def _rope_graph(dims: tuple[int, ...], swap_add: bool = False, cos_sin_const: bool = False,
                expose: bool = False):
    """x -> its two halves -> cat(x1*c - x2*s, x1*s + x2*c), as llama graphs lower RoPE."""
    rng = np.random.default_rng(7)
    h = dims[-1] // 2
    half = list(dims[:-1]) + [h]
    b = GraphBuilder()
    xin = b.input(*dims)
    c_val = rng.standard_normal(dims[-2:-1] + (h,)).astype(np.float32)
    s_val = rng.standard_normal(dims[-2:-1] + (h,)).astype(np.float32)
    if cos_sin_const:
        c, s = b.const(c_val), b.const(s_val)
    else:
        c, s = b.input(*c_val.shape), b.input(*s_val.shape)
    out = b.output(*dims)
    extra = b.output(*half) if expose else None
    x1, x2 = b.tensor(*half), b.tensor(*half)
    zeros = [0] * len(dims)
    b.node(x.XNNStaticSlice(len(dims), zeros, half, xin, x1))
    b.node(x.XNNStaticSlice(len(dims), zeros[:-1] + [h], half, xin, x2))
    m = [b.tensor(*half) for _ in range(4)]
    b.node(x.XNNMultiply(x1, c, m[0]))
    b.node(x.XNNMultiply(s, x2, m[1]))  # (the factor first: either order)
    b.node(x.XNNMultiply(x1, s, m[2]))
    b.node(x.XNNMultiply(x2, c, m[3]))
    first = extra if expose else b.tensor(*half)
    second = b.tensor(*half)
    b.node(x.XNNSubtract(m[0], m[1], first))
    b.node(x.XNNAdd(*((m[3], m[2]) if swap_add else (m[2], m[3])), second))
    b.node(x.XNNConcatenate2(len(dims) - 1, first, second, 0, 0, out))
    xs = rng.standard_normal(dims).astype(np.float32)
    inputs = [xs] if cos_sin_const else [xs, c_val, s_val]
    return b, inputs, (xs, c_val, s_val)


def _rope_torch(torch, xs, c, s):
    xt, ct, st = (torch.from_numpy(a) for a in (xs, c, s))
    h = xs.shape[-1] // 2
    x1, x2 = xt[..., :h], xt[..., h:]
    return torch.cat([x1 * ct - x2 * st, x1 * st + x2 * ct], -1).numpy()


def _fusions(handle) -> list[str]:
    return sorted({f.name for f in handle.fusions.values()})


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("dims,swap_add,const", [((1, 4, 16, 16), False, False),
                                                 ((2, 3, 5, 8), True, True),
                                                 ((6, 10), False, False)])
def test_rope_chain_runs_fused_with_the_reference_bits(dims, swap_add, const, compiled):
    torch = pytest.importorskip("torch")
    if compiled and not accel.available():
        pytest.skip("numba is not installed")
    with (_noop() if compiled else accel.disabled()):
        b, inputs, (xs, c, s) = _rope_graph(dims, swap_add, const)
        backend, handle = _handle(b)
        assert _fusions(handle) == ["rope"]
        runs = [_call(backend, handle, b, inputs) for _ in range(3)]
    assert "# rope: nodes 0, 1, 2, 3, 4, 5, 6, 7, 8" in str(handle.plan)
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    np.testing.assert_allclose(runs[2][0], _rope_torch(torch, xs, c, s), rtol=1e-6, atol=1e-6)


def test_a_chain_whose_inner_value_is_also_an_output_is_not_fused():
    b, inputs, _ = _rope_graph((1, 2, 4, 8), expose=True)
    backend, handle = _handle(b)
    assert not handle.fusions
    runs = [_call(backend, handle, b, inputs) for _ in range(3)]
    assert _same(runs[0], runs[2])


def _rms_graph(n: int = 64, rows: int = 16):
    rng = np.random.default_rng(3)
    b = GraphBuilder()
    xin, m = b.input(1, rows, n), b.input(1, rows, 1)
    weights = rng.standard_normal(n).astype(np.float32)
    eps, w = b.const(np.array([1e-5], np.float32)), b.const(weights)
    out = b.output(1, rows, n)
    t, r, y = b.tensor(1, rows, 1), b.tensor(1, rows, 1), b.tensor(1, rows, n)
    b.node(x.XNNAdd(m, eps, t))
    b.node(x.XNNReciprocalSquareRoot(t, r))
    b.node(x.XNNMultiply(xin, r, y))
    b.node(x.XNNMultiply(y, w, out))
    xs = rng.standard_normal((1, rows, n)).astype(np.float32)
    ms = np.mean(xs * xs, -1, keepdims=True)
    return b, [xs, ms], weights


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
def test_rmsnorm_tail_runs_fused_with_the_reference_bits(compiled):
    torch = pytest.importorskip("torch")
    if compiled and not accel.available():
        pytest.skip("numba is not installed")
    with (_noop() if compiled else accel.disabled()):
        b, inputs, weights = _rms_graph()
        backend, handle = _handle(b)
        assert _fusions(handle) == ["rms_tail"]
        runs = [_call(backend, handle, b, inputs) for _ in range(3)]
        fused = "# rms_tail" in str(handle.plan)
    assert fused == compiled  # NumPy runs the nodes: a fused NumPy chain would be no faster
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    xs, ms = (torch.from_numpy(a) for a in inputs)
    want = (xs * torch.rsqrt(ms + 1e-5) * torch.from_numpy(weights)).numpy()
    np.testing.assert_allclose(runs[2][0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask_dims", [(1, 1, 16, 16), (2, 4, 16, 1), (16,), (2, 4, 16, 16)])
def test_masked_softmax_broadcasts_the_mask_as_the_add_node_does(mask_dims):
    torch = pytest.importorskip("torch")
    if not accel.available():
        pytest.skip("numba is not installed")
    b, inputs, c = _softmax_graph(True, True, False, mask_dims)
    backend, handle = _handle(b)
    runs = [_call(backend, handle, b, inputs) for _ in range(3)]
    assert "# masked_softmax" in str(handle.plan)
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    s, m = (torch.from_numpy(a) for a in inputs[:2])
    want = torch.softmax(s / float(c[0]) + m, -1).numpy()
    np.testing.assert_allclose(runs[2][0], want, rtol=1e-5, atol=1e-6)


def test_large_fully_connected_filters_are_read_transposed_with_the_reference_bits():
    """Filters over PACK_MAX_BYTES stay views of the file (not packed at load): the compiled
    GEMM reads them transposed, on the reference path and in the plan alike."""
    torch = pytest.importorskip("torch")
    from edgetorch.backends.xnnpack.runtime import nodes_nn

    o, k = 300, 256
    assert o * k * 4 > nodes_nn.PACK_MAX_BYTES
    rng = np.random.default_rng(4)
    w, bias, xs = (rng.standard_normal(s).astype(np.float32) for s in ((o, k), (o,), (2, 3, k)))
    b = GraphBuilder()
    i, f, bi, out = b.input(2, 3, k), b.const(w), b.const(bias), b.output(2, 3, o)
    b.node(x.XNNFullyConnected(i, f, bi, out, 0))
    backend, handle = _handle(b)
    runs = [_call(backend, handle, b, [xs]) for _ in range(3)]  # reference, plan build, plan
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    want = torch.nn.functional.linear(*(torch.from_numpy(a) for a in (xs, w, bias)))
    assert_close_reduction(runs[2][0], want.numpy(), k=k + 1,
                           magnitude=abs_magnitude(torch.nn.functional.linear, xs, w, bias))


def _softmax_graph(divide: bool, scale_const: bool, mask_first: bool,
                   mask_dims: tuple[int, ...] = (2, 1, 1, 16)):
    """``softmax(scores / c + mask)`` (``* c``) as attention lowers it; ExecuTorch's graphs
    pass ``c`` in as an input."""
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    scores, mask = b.input(2, 4, 16, 16), b.input(*mask_dims)
    c_val = np.array([4.0 if divide else 0.25], np.float32)
    c = b.const(c_val) if scale_const else b.input(1)
    out = b.output(2, 4, 16, 16)
    t, u = b.tensor(2, 4, 16, 16), b.tensor(2, 4, 16, 16)
    b.node((x.XNNDiv if divide else x.XNNMultiply)(scores, c, t))
    b.node(x.XNNAdd(*((mask, t) if mask_first else (t, mask)), u))
    b.node(x.XNNSoftmax(u, out))
    s = (rng.standard_normal((2, 4, 16, 16)) * 3).astype(np.float32)
    s[1, 2, 3, 5] = np.nan  # a NaN row stays NaN, as on the reference path
    m = (rng.standard_normal(mask_dims) * 2).astype(np.float32)
    m[(-1,) * (m.ndim - 1) + (slice(-5, None),)] = -10000.0  # padded keys of the last row
    return b, [s, m] + ([] if scale_const else [c_val]), c_val


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("divide,scale_const,mask_first",
                         [(True, True, False), (True, False, False), (False, True, True),
                          (False, False, False)])
def test_scaled_masked_softmax_runs_fused_with_the_reference_bits(compiled, divide,
                                                                   scale_const, mask_first):
    torch = pytest.importorskip("torch")
    if compiled and not accel.available():
        pytest.skip("numba is not installed")
    with (_noop() if compiled else accel.disabled()):
        b, inputs, c = _softmax_graph(divide, scale_const, mask_first)
        backend, handle = _handle(b)
        assert _fusions(handle) == ["masked_softmax"]
        runs = [_call(backend, handle, b, inputs) for _ in range(3)]
        fused = "# masked_softmax" in str(handle.plan)
    assert fused == compiled
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    s, m = (torch.from_numpy(a) for a in inputs[:2])
    scaled = s / float(c[0]) if divide else s * float(c[0])
    want = torch.softmax(scaled + m, -1).numpy()
    assert np.isnan(runs[2][0][1, 2, 3]).all() and np.isnan(want[1, 2, 3]).all()
    np.testing.assert_allclose(runs[2][0], want, rtol=1e-5, atol=1e-6)


def _heads_graph(bsz: int = 2, seq: int = 5, heads: int = 3, dim: int = 4, expose: bool = False):
    """Attention's layout: ``[B, S, H*D]`` projections viewed as heads ``[B*H, S, D]`` (a
    reshape of a permuted view: a copy), ``softmax``-free scores ``q @ k^T``, ``@ v``, then
    the heads permuted back to ``[B, S, H*D]`` (another copy)."""
    rng = np.random.default_rng(6)
    b = GraphBuilder()
    ins = [b.input(bsz, seq, heads * dim) for _ in range(3)]
    out = b.output(bsz, seq, heads * dim)
    extra = b.output(bsz * heads, seq, dim) if expose else None
    heads_of = []
    for i in ins:
        split, perm, flat = (b.tensor(bsz, seq, heads, dim), b.tensor(bsz, heads, seq, dim),
                             b.tensor(bsz * heads, seq, dim))
        b.node(x.XNNStaticReshape(4, [bsz, seq, heads, dim], i, split))
        b.node(x.XNNStaticTranspose(4, [0, 2, 1, 3], split, perm))
        b.node(x.XNNStaticReshape(3, [0, seq, dim], perm, flat))
        heads_of.append(flat)
    q, k, v = heads_of
    scores, ctx = b.tensor(bsz * heads, seq, seq), extra or b.tensor(bsz * heads, seq, dim)
    b.node(x.XNNBatchMatrixMultiply(q, k, scores, x.XNN_FLAG_TRANSPOSE_B))
    b.node(x.XNNBatchMatrixMultiply(scores, v, ctx))
    split, perm = b.tensor(bsz, heads, seq, dim), b.tensor(bsz, seq, heads, dim)
    b.node(x.XNNStaticReshape(4, [bsz, heads, seq, dim], ctx, split))
    b.node(x.XNNStaticTranspose(4, [0, 2, 1, 3], split, perm))
    b.node(x.XNNStaticReshape(3, [bsz, seq, heads * dim], perm, out))
    return b, [rng.standard_normal((bsz, seq, heads * dim)).astype(np.float32) for _ in ins]


def _heads_torch(torch, inputs, bsz=2, seq=5, heads=3, dim=4):
    q, k, v = (torch.from_numpy(a).reshape(bsz, seq, heads, dim).transpose(1, 2) for a in inputs)
    return (q @ k.transpose(-1, -2) @ v).transpose(1, 2).reshape(bsz, seq, heads * dim).numpy()


@pytest.mark.parametrize("dims", [(2, 5, 3, 4), (1, 16, 4, 16), (3, 1, 2, 8)])
def test_heads_matmuls_read_and_write_the_permuted_layout_with_the_reference_bits(dims):
    """The reshapes that copy a permuted view are skipped: the GEMMs read the heads where
    they lie and write the product's rows where the final layout puts them."""
    torch = pytest.importorskip("torch")
    b, inputs = _heads_graph(*dims)
    backend, handle = _handle(b)
    assert _fusions(handle) == ["bmm_views"]
    runs = [_call(backend, handle, b, inputs) for _ in range(3)]
    plan = str(handle.plan)
    assert plan.count("# bmm_views") == 2 and "COPYTO(b" not in plan  # no copy of a view
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    np.testing.assert_allclose(runs[2][0], _heads_torch(torch, inputs, *dims), rtol=1e-5,
                               atol=1e-5)


def test_heads_product_also_read_by_the_method_keeps_its_own_layout():
    torch = pytest.importorskip("torch")
    b, inputs = _heads_graph(expose=True)
    backend, handle = _handle(b)
    runs = [_call(backend, handle, b, inputs) for _ in range(3)]
    assert str(handle.plan).count("# bmm_views") == 2  # (its reads fused, its chain not)
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    np.testing.assert_allclose(runs[2][0], _heads_torch(torch, inputs), rtol=1e-5, atol=1e-5)
    q, k, v = (torch.from_numpy(a).reshape(2, 5, 3, 4).transpose(1, 2) for a in inputs)
    np.testing.assert_allclose(runs[2][1], (q @ k.transpose(-1, -2) @ v).reshape(6, 5, 4),
                               rtol=1e-5, atol=1e-5)


# ---- whole programs --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXAMPLE_NAMES))
def test_every_load_pass_on_example_programs_gives_the_reference_results(name):
    """Every example lowered to XNNPACK: each load pass alone and all together (the plans and
    their fused chains included) against the reference path, and eager PyTorch."""
    pytest.importorskip("torch")
    from pass_equivalence import assert_passes_match_the_kernels
    from xnn_aot_cases import eager, lower

    from edgetorch.examples import EXAMPLES
    from edgetorch.runtime import Runtime

    model, inputs = EXAMPLES[name].build()
    _, et = lower(model, inputs)
    args = [x.numpy() for x in inputs]
    assert_passes_match_the_kernels(et.buffer, args, name)
    method = Runtime.get().load_program(et.buffer).load_method("forward", optimize=True)
    runs = [method.execute(args) for _ in range(3)]
    for got, want in zip(runs[-1], eager(model, inputs)):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4, err_msg=name)


def test_dynamic_batch_programs_plan_each_size():
    pytest.importorskip("torch")
    from xnn_aot_cases import dynamic_batch_programs, eager

    from edgetorch.runtime import Runtime

    for name, model, et, batches in dynamic_batch_programs():
        method = Runtime.get().load_program(et.buffer).load_method("forward", optimize=True)
        for inputs in batches * 3:
            got, want = np.asarray(method.execute(list(inputs))[0]), eager(model, inputs)[0]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{name} {want.shape}")


def test_outputs_are_written_in_place_or_stored_through_the_resize_hook():
    """A step whose value is only an output writes the method's tensor itself (as XNNPACK
    does); a tensor of other sizes gets the value through _store and the resize hook."""
    b = GraphBuilder()
    i, o = b.input(10, 4), b.output(10, 4)
    b.node(x.XNNAbs(i, o))
    backend, handle = _handle(b)
    planned = np.zeros((10, 4), np.float32)
    resized = []

    class Exec:
        @staticmethod
        def resize(index, sizes):
            resized.append(sizes)
            values[index] = planned.reshape(-1)[: int(np.prod(sizes))].reshape(sizes)
            return values[index]

    src = -np.arange(12, dtype=np.float32).reshape(3, 4)
    out = planned
    for k in range(4):
        values = [src * (k + 1), out]
        backend.execute(handle, values, [0, 1], Exec())
        np.testing.assert_array_equal(values[1], np.abs(src * (k + 1)))
        out = values[1] if k % 2 == 0 else planned  # the resized view, or the bound again
    assert "t1 = o1 if" in str(handle.plan)
    assert resized and all(r == (3, 4) for r in resized)


@pytest.mark.parametrize("lo,hi", [(0.0, np.inf), (-np.inf, 6.0), (0.0, 6.0), (-1.0, 1.0)],
                         ids=["relu", "min_only", "relu6", "hardtanh"])
def test_a_planned_clamp_gives_the_reference_bits_for_signed_zeros_and_nans(lo, hi):
    # The plan clamps a bound on one side with maximum/minimum alone (clip for both): the
    # very bits of the reference step, -0.0 and NaN included (array_equal would not see
    # -0.0 against 0.0: bytes are compared).
    b = GraphBuilder()
    i1, i2 = b.input(4, 40), b.input(4, 40)
    o = b.output(4, 40)
    b.node(x.XNNAdd(i1, i2, o), x.OutputMinMax(lo, hi))
    a = np.random.default_rng(0).standard_normal((4, 40)).astype(np.float32)
    a[:, ::5] = [-0.0, 0.0, np.nan, -np.inf, 6.0, 1.0, -1.0, 7.0][:a[:, ::5].shape[1]]
    inputs = [a, np.zeros_like(a) * -1.0]  # -0.0 + -0.0 is -0.0
    backend, handle = _handle(b)
    reference = _reference(handle, b, inputs)
    planned = _call(backend, handle, b, inputs)
    (plan,) = handle.plans.values()
    assert ("MAXIMUM(" in str(plan), "MINIMUM(" in str(plan)) == (hi == np.inf, lo == -np.inf)
    assert planned[0].tobytes() == reference[0].tobytes()
    want = np.clip(a + inputs[1], np.float32(lo), np.float32(hi))
    assert planned[0].tobytes() == want.tobytes()
