"""The load-time fast path (runtime/optimize, kernels/portable/prepared.py) gives the very
bits of the kernels it stands in for, and falls back to them off its fast cases.

Each preparer is checked against its own kernel on the same arguments (the kernel is the
oracle, itself tested against torch); whole programs are checked against the closures (fast
path off) bit for bit and against eager PyTorch within float32 tolerance.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch
from optimized_pair import assert_same_bits_and_eager, fast_and_slow

from edgetorch.examples import get_example
from edgetorch.exir import to_edge
from edgetorch.kernels import accel
from edgetorch.kernels.registry import KERNELS
from edgetorch.runtime import Runtime

R = np.random.default_rng(0)
F32 = np.float32


def _t(*shape, dtype=F32):
    return R.standard_normal(shape).astype(dtype)


def _o(*shape, dtype=F32):
    return np.full(shape, np.nan, dtype)


# (operator, arguments without out, out shape, out dtype)
CASES = [
    ("aten::mm.out", lambda: (_t(3, 5), _t(5, 4)), (3, 4), F32),
    ("aten::mm.out", lambda: (_t(1, 20), _t(64, 20).T), (1, 64), F32),  # transposed weight
    ("aten::bmm.out", lambda: (_t(2, 3, 5), _t(2, 5, 4)), (2, 3, 4), F32),
    ("aten::addmm.out", lambda: (_t(4), _t(3, 5), _t(5, 4), 1, 1), (3, 4), F32),
    ("aten::addmm.out", lambda: (_t(3, 4), _t(3, 5), _t(5, 4), 1, 1.0), (3, 4), F32),
    ("aten::addmm.out", lambda: (_t(4, dtype=np.float64), _t(3, 5, dtype=np.float64),
                                 _t(5, 4, dtype=np.float64), 0, 1), (3, 4), np.float64),
    ("aten::linear.out", lambda: (_t(2, 3, 5), _t(4, 5), _t(4)), (2, 3, 4), F32),
    ("aten::linear.out", lambda: (_t(3, 5), _t(4, 5), None), (3, 4), F32),
    ("aten::add.out", lambda: (_t(2, 3, 4), _t(3, 1), 1), (2, 3, 4), F32),
    ("aten::add.Scalar_out", lambda: (_t(2, 3), 0.1, 1), (2, 3), F32),
    ("aten::sub.out", lambda: (_t(2, 3), _t(2, 3), 1), (2, 3), F32),
    ("aten::sub.Scalar_out", lambda: (_t(2, 3), 3, 1), (2, 3), F32),
    ("aten::mul.out", lambda: (_t(2, 3), _t(3)), (2, 3), F32),
    ("aten::mul.Scalar_out", lambda: (_t(2, 3), 0.125), (2, 3), F32),
    ("aten::div.out", lambda: (_t(2, 3), _t(2, 1)), (2, 3), F32),
    ("aten::div.Scalar_out", lambda: (_t(2, 3), 7), (2, 3), F32),
    ("aten::relu.out", lambda: (np.array([-1, 0, np.nan, 2, -0.0], F32),), (5,), F32),
    ("aten::exp.out", lambda: (_t(4, 7),), (4, 7), F32),
    ("aten::tanh.out", lambda: (_t(4, 7),), (4, 7), F32),
    ("aten::sqrt.out", lambda: (np.abs(_t(4, 7)),), (4, 7), F32),
    ("aten::rsqrt.out", lambda: (np.abs(_t(4, 7)),), (4, 7), F32),
    ("aten::pow.Tensor_Scalar_out", lambda: (_t(4, 7), 2), (4, 7), F32),
    ("aten::pow.Tensor_Scalar_out", lambda: (np.abs(_t(4, 7)), 0.5), (4, 7), F32),
    ("aten::sigmoid.out", lambda: (np.concatenate([_t(4, 7) * 30, [[np.inf, -np.inf, 0, -0.0,
                                                                    np.nan, 88, -88]]]).astype(F32),),
     (5, 7), F32),
    ("aten::where.self_out", lambda: (_t(3, 4) > 0, _t(3, 4), _t(1, 4)), (3, 4), F32),
    ("aten::clone.out", lambda: (_t(3, 4), None), (3, 4), F32),
    ("aten::alias_copy.out", lambda: (_t(3, 4),), (3, 4), F32),
    ("aten::_to_copy.out", lambda: (_t(3, 4), False, None), (3, 4), np.float64),
    ("dim_order_ops::_clone_dim_order.out", lambda: (_t(3, 4), False, [0, 1]), (3, 4), F32),
    ("dim_order_ops::_to_dim_order_copy.out", lambda: (_t(3, 4), False, None), (3, 4), F32),
    ("aten::view_copy.out", lambda: (_t(3, 4), [2, 6]), (2, 6), F32),
    ("aten::view_copy.out", lambda: (_t(4, 3).T, [12]), (12,), F32),  # no view: kernel runs
    ("aten::permute_copy.out", lambda: (_t(2, 3, 4), [2, 0, -2]), (4, 2, 3), F32),
    ("aten::t_copy.out", lambda: (_t(3, 4),), (4, 3), F32),
    ("aten::transpose_copy.int_out", lambda: (_t(2, 3, 4), 0, -1), (4, 3, 2), F32),
    ("aten::expand_copy.out", lambda: (_t(3, 1), [2, -1, 4], False), (2, 3, 4), F32),
    ("aten::unsqueeze_copy.out", lambda: (_t(3, 4), -1), (3, 4, 1), F32),
    ("aten::squeeze_copy.dim_out", lambda: (_t(3, 1, 4), 1), (3, 4), F32),
    ("aten::squeeze_copy.dims_out", lambda: (_t(1, 3, 1), [0, -1]), (3,), F32),
    ("aten::squeeze_copy.out", lambda: (_t(1, 3, 1),), (3,), F32),
    ("aten::slice_copy.Tensor_out", lambda: (_t(5, 4), 0, 1, 100, 2), (2, 4), F32),
    ("aten::slice_copy.Tensor_out", lambda: (_t(5, 4), -1, None, -1, 1), (5, 3), F32),
    ("aten::select_copy.int_out", lambda: (_t(3, 4, 5), 1, -1), (3, 5), F32),
    ("aten::cat.out", lambda: ([_t(2, 3), _t(2, 5)], -1), (2, 8), F32),
    ("aten::_softmax.out", lambda: (_t(2, 3, 5), -1, False), (2, 3, 5), F32),
    ("aten::_softmax.out", lambda: (np.array([[-np.inf, -np.inf], [1, -np.inf]], F32), 1, False),
     (2, 2), F32),
    ("aten::_softmax.out", lambda: (_t(4, 6), 0, False), (4, 6), F32),
    ("aten::mean.out", lambda: (_t(1, 16, 64) * 3, [-1], True, None), (1, 16, 1), F32),
    ("aten::mean.out", lambda: (_t(3, 7, 33) ** 2, [2], False, None), (3, 7), F32),
    ("aten::mean.out", lambda: (_t(5, 300, dtype=np.float64), [1], True, None), (5, 1),
     np.float64),
    ("aten::any.out", lambda: (_t(1, 4, 16, 16) > 1.5, -1, True), (1, 4, 16, 1), np.bool_),
    ("aten::any.out", lambda: (_t(3, 5, 2) > 1, 1, False), (3, 2), np.bool_),
    ("aten::any.out", lambda: (np.zeros((6, 3), np.bool_), -1, False), (6,), np.bool_),
    ("aten::embedding.out", lambda: (_t(10, 4), np.array([[1, 9], [0, 1]]), -1, False, False),
     (2, 2, 4), F32),
    # convolution: each algorithm of conv.dispatch (1x1 GEMM, im2col, Winograd, depthwise
    # channels-last and on planes, grouped, 1-D)
    ("aten::convolution.out", lambda: (_t(2, 8, 5, 5), _t(16, 8, 1, 1), _t(16), [1, 1],
                                       [0, 0], [1, 1], False, [0, 0], 1), (2, 16, 5, 5), F32),
    ("aten::convolution.out", lambda: (_t(1, 3, 9, 9), _t(4, 3, 3, 3), _t(4), [2, 2], [1, 1],
                                       [1, 1], False, [0, 0], 1), (1, 4, 5, 5), F32),
    ("aten::convolution.out", lambda: (_t(1, 16, 6, 6), _t(16, 16, 3, 3), None, [1], [1], [1],
                                       False, [0], 1), (1, 16, 6, 6), F32),
    ("aten::convolution.out", lambda: (_t(1, 8, 7, 7), _t(8, 1, 3, 3), _t(8), [1, 1], [1, 1],
                                       [1, 1], False, [0, 0], 8), (1, 8, 7, 7), F32),
    ("aten::convolution.out", lambda: (_t(1, 4, 40, 40), _t(4, 1, 3, 3), _t(4), 1, 1, 1, False,
                                       0, 4), (1, 4, 40, 40), F32),
    ("aten::convolution.out", lambda: (_t(1, 8, 6, 6, dtype=np.float64),
                                       _t(8, 4, 3, 3, dtype=np.float64), None, [1, 1], [1, 1],
                                       [1, 1], False, [0, 0], 2), (1, 8, 6, 6), np.float64),
    ("aten::convolution.out", lambda: (_t(2, 3, 10), _t(5, 3, 3), _t(5), [1], [0], [1], False,
                                       [0], 1), (2, 5, 8), F32),
]


def _fast(name: str, args: tuple, out_shape, out_dtype):
    entry = KERNELS[name]
    out = _o(*out_shape, dtype=out_dtype)
    steps = entry.prepare(*args, out)
    if steps is None:
        return None
    for step in steps:
        step()
    return out


def _kernel(name: str, args: tuple, out_shape, out_dtype):
    out = _o(*out_shape, dtype=out_dtype)
    res = KERNELS[name].fn(*args, out)
    if res is not out:
        np.copyto(out, res, casting="unsafe")
    return out


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_preparer_gives_its_kernels_bits(case):
    name, make, shape, dtype = case
    args = make()
    got = _fast(name, args, shape, dtype)
    want = _kernel(name, args, shape, dtype)
    if got is None:  # declined: only the one case built for it
        assert name == "aten::view_copy.out" and not args[0].flags.c_contiguous
        return
    assert got.tobytes() == want.tobytes(), f"{name}: {got} != {want}"


def _arrays(args):
    for a in args:
        if isinstance(a, np.ndarray):
            yield a
        elif isinstance(a, list):
            yield from _arrays(a)


_RUNTIME_CASES = CASES + [("aten::select_copy.int_out", lambda: (_t(4), 0, 2), (), F32)]


@pytest.mark.parametrize("case", _RUNTIME_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(_RUNTIME_CASES)])
def test_each_preparer_reads_its_inputs_when_it_runs(case):
    """A prepared call is bound to its arrays, never to their values at load: after new
    values are written into the inputs (same memory), it computes what the kernel computes."""
    name, make, shape, dtype = case
    args = make()
    out = _o(*shape, dtype=dtype)
    steps = KERNELS[name].prepare(*args, out)
    if steps is None:
        return
    for a in _arrays(args):
        if a.size > 1:  # a rotation keeps indices valid and changes every element's place
            a.reshape(-1)[:] = np.roll(a.reshape(-1).copy(), 1)
        elif a.dtype.kind == "f":
            a[...] = a * 2 + 1
    for step in steps:
        step()
    assert out.tobytes() == _kernel(name, args, shape, dtype).tobytes(), name


_CONV_CASES = [c for c in CASES if c[0] == "aten::convolution.out"]


@pytest.mark.parametrize("case", _CONV_CASES, ids=[str(i) for i in range(len(_CONV_CASES))])
def test_convolution_preparer_gives_its_kernels_bits_without_the_compiled_loops(case):
    """(NumPy's depthwise paths: channels-last on small planes, tap by tap on the others.)"""
    name, make, shape, dtype = case
    args = make()
    with accel.disabled():
        got = _fast(name, args, shape, dtype)
        want = _kernel(name, args, shape, dtype)
    assert got is not None and got.tobytes() == want.tobytes()


def test_convolution_preparer_declines_what_the_kernel_computes_otherwise():
    prep = KERNELS["aten::convolution.out"].prepare
    x, w = _t(1, 4, 6, 6), _t(4, 4, 3, 3)
    params = ([1, 1], [1, 1], [1, 1])
    assert prep(x, w, None, *params, True, [0, 0], 1, _o(1, 4, 6, 6)) is None  # transposed
    assert prep(x, w.astype(np.float64), None, *params, False, [0, 0], 1,
                _o(1, 4, 6, 6)) is None  # mixed dtypes
    assert prep(x, w, None, *params, False, [0, 0], 1, _o(1, 4, 5, 5)) is None  # out's size
    assert prep(x, w, None, *params, False, [0, 0], 1, x) is None  # out is the input
    assert prep(x, w, None, *params, False, [0, 0], 3, _o(1, 4, 6, 6)) is None  # groups


def test_layer_norm_preparer_gives_its_kernels_bits():
    x, w, b = _t(2, 5, 8), _t(8), _t(8)
    outs_fast = [_o(2, 5, 8), _o(2, 5, 1), _o(2, 5, 1)]
    outs_kernel = [_o(2, 5, 8), _o(2, 5, 1), _o(2, 5, 1)]
    name = "aten::native_layer_norm.out"
    for step in KERNELS[name].prepare(x, [8], w, b, 1e-5, *outs_fast):
        step()
    KERNELS[name].fn(x, [8], w, b, 1e-5, *outs_kernel)
    for a, k in zip(outs_fast, outs_kernel):
        assert a.tobytes() == k.tobytes()


def test_preparers_decline_what_they_do_not_cover():
    add = KERNELS["aten::add.out"].prepare
    assert add(_t(2, 3), _t(2, 3), 2, _o(2, 3)) is None  # alpha
    assert add(_t(2, 3), _t(2, 3).astype(np.float64), 1, _o(2, 3)) is None  # mixed dtypes
    assert add(_t(2, 3), _t(3), 1, _o(4, 2, 3)) is None  # broadcast beyond the operands
    x = _t(4, 4)
    assert KERNELS["aten::mm.out"].prepare(x, _t(4, 4), x) is None  # out overlaps an input
    assert KERNELS["aten::addmm.out"].prepare(_t(4), _t(3, 5), _t(5, 4), 1, 2, _o(3, 4)) is None
    ints = np.arange(6).reshape(2, 3)
    assert add(ints, ints, 1, np.zeros((2, 3), np.int64)) is None  # integers: the kernel
    idx = np.array([0, 1], np.int32)
    assert KERNELS["aten::embedding.out"].prepare(_t(4, 2), idx, -1, False, False,
                                                  _o(2, 2)) is None


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
def test_prepared_embedding_still_checks_its_indices(compiled):
    from edgetorch.kernels import accel

    if compiled and not accel.available():
        pytest.skip("numba is not installed")
    idx = np.array([[0, 1], [3, 3]])
    out, table = _o(2, 2, 3), _t(4, 3)
    with (accel.enabled() if compiled else accel.disabled()):
        (run,) = KERNELS["aten::embedding.out"].prepare(table, idx, -1, False, False, out)
        run()
        assert np.array_equal(out, table[idx])
        idx[1, 0] = 4
        before = out.copy()
        with pytest.raises(Exception, match="index out of range"):
            run()
        idx[1, 0] = -1  # negative: out of range too (torch's embedding has no wraparound)
        with pytest.raises(Exception, match="index out of range"):
            run()
        assert np.array_equal(out, before)  # nothing gathered from a bad call


# ---- whole programs ------------------------------------------------------------------------


_methods = fast_and_slow


def _kinds(method):
    """How many instructions run prepared/folded steps rather than their closure."""
    steps, owner = method._steps
    closures = {r.index for r in method.records
                if any(s is r.run for s, o in zip(steps, owner) if o == r.index)}
    return len(method.records) - len(closures)


@pytest.mark.parametrize("name", ["tiny_classifier", "transformer_encoder", "llama_decoder",
                                  "bert_encoder"])
def test_example_programs_give_the_closures_bits_and_eager_numbers(name):
    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    fast, slow = _methods(model, inputs)
    assert slow._steps is None and _kinds(fast) >= len(fast.records) // 2
    assert_same_bits_and_eager(fast, slow, model, inputs)


class _Masked(torch.nn.Module):
    """A causal mask built from arange (foldable) applied to the input (not)."""

    def forward(self, x):
        n = x.shape[-1]
        i = torch.arange(n)
        mask = torch.where(i[None, :] <= i[:, None], 0.0, float("-inf"))
        return torch.softmax(x + mask, dim=-1)


def test_constant_chains_fold_at_load():
    x = torch.randn(2, 6, 6)
    fast, slow = _methods(_Masked(), (x,))
    folded = [r for r in fast.records if not any(o == r.index for o in fast._steps[1])
              or all(getattr(s, "func", None) is np.copyto
                     for s, o in zip(*fast._steps) if o == r.index)]
    assert any("arange" in r.name for r in folded)
    got = fast.execute([x.numpy()])[0]
    assert got.tobytes() == slow.execute([x.numpy()])[0].tobytes()
    np.testing.assert_allclose(got, _Masked()(x).numpy(), rtol=1e-6, atol=1e-7)


class _Counter(torch.nn.Module):
    """A mutable buffer: its value must carry from call to call, never be folded."""

    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros(3))

    def forward(self, x):
        self.n.add_(torch.ones(3))
        return x * self.n


def test_mutable_buffers_keep_their_state():
    x = torch.randn(2, 3)
    fast, slow = _methods(_Counter(), (x,))
    for k in range(1, 4):
        got = fast.execute([x.numpy()])[0]
        assert got.tobytes() == slow.execute([x.numpy()])[0].tobytes()
        np.testing.assert_allclose(got, x.numpy() * k, rtol=1e-6)


class _PickFromInput(torch.nn.Module):
    def forward(self, x, pos):
        return x * pos[0]  # select_copy of a 1-d input: the prepared copy must read it per call


def test_select_of_a_1d_input_reads_the_call_s_value():
    # Regression: x[i] of a 1-d array is a NumPy scalar copied at load, not a view; the prepared
    # select then replayed load-time zeros (ExecuTorch's llama .pte selects input_pos[0] so).
    x = torch.randn(2, 3)
    fast, slow = _methods(_PickFromInput(), (x, torch.tensor([1.0])))
    for p in (2.0, -3.0, 5.0):
        pos = np.array([p], dtype=np.float32)
        got = fast.execute([x.numpy(), pos])[0]
        assert got.tobytes() == slow.execute([x.numpy(), pos])[0].tobytes()
        np.testing.assert_allclose(got, x.numpy() * p, rtol=1e-6)


def test_dynamic_shapes_fall_back_to_the_kernels():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x @ x.T) + 1

    x = torch.randn(5, 4)
    dim = torch.export.Dim("n", min=2, max=8)
    ep = torch.export.export(M(), (x,), dynamic_shapes={"x": {0: dim}})
    method = Runtime.get().load_program(to_edge(ep).to_executorch().buffer).load_method("forward")
    for n in (5, 3, 8):
        xn = torch.randn(n, 4)
        got = method.execute([xn.numpy()])[0]
        np.testing.assert_allclose(got, M()(xn).numpy(), rtol=1e-5, atol=1e-5)


def _peak_of_one_call(method, args, **kw) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        method.execute(args, **kw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.norm = torch.nn.Linear(256, 512), torch.nn.LayerNorm(512)

    def forward(self, x):
        y = torch.softmax(self.norm(self.fc(x)), dim=-1)
        return (y * 2 - 1).permute(1, 0) / 3


def test_a_call_allocates_no_temporaries():
    """Activations of 512 KB: the kernels allocate several per call; the prepared steps none
    (NumPy's iterator may still take its own small buffers while broadcasting)."""
    model = _Block().eval()
    x = torch.randn(256, 256)
    fast, slow = _methods(model, (x,))
    args = [x.numpy()]
    for m in (fast, slow):
        m.execute(args)
    activation = 256 * 512 * 4
    assert _peak_of_one_call(slow, args, copy_outputs=False) >= activation  # what is avoided
    assert _peak_of_one_call(fast, args, copy_outputs=False) < activation // 4
    assert _peak_of_one_call(fast, args) < activation // 4 + activation  # + the output
    with torch.no_grad():
        np.testing.assert_allclose(fast.execute(args)[0], model(x).numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_constants_of_a_mapped_file_count_as_immutable(tmp_path):
    """Kernels pack weights once per immutable constant (winograd.constant_cache); the
    constants of a program loaded from a path are views of a read-only map and qualify,
    those of a caller's bytearray do not (the caller may change it)."""
    from edgetorch.kernels.conv.winograd import _immutable

    model = torch.nn.Linear(8, 4).eval()
    pte = to_edge(torch.export.export(model, (torch.randn(2, 8),))).to_executorch().buffer
    path = tmp_path / "linear.pte"
    path.write_bytes(pte)
    for source, expected in ((path, True), (bytes(pte), True), (bytearray(pte), False)):
        method = Runtime.get().load_program(source).load_method("forward")
        consts = [v for i, v in enumerate(method._vals)
                  if isinstance(v, np.ndarray) and i not in method._slots]
        assert consts and all(_immutable(c) is expected for c in consts), source


class _TransposedWeights(torch.nn.Module):
    """ExecuTorch's programs transpose linear weights with a permute_copy of the constant,
    which the matrix product reads; ``out_too`` also returns one transposed weight, and
    ``maximum`` reads one through a kernel without a preparer."""

    def __init__(self, out_too: bool) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 5))
        self.b = torch.nn.Parameter(torch.randn(8))
        self.out_too = out_too

    def forward(self, x):
        y = torch.addmm(self.b, x, self.w.permute(1, 0)) + torch.mm(x, self.w.t())
        if self.out_too:
            wt = self.w.t() * 1.0
            return y, wt, torch.maximum(self.w.permute(1, 0), x.sum(0, keepdim=True).t())
        return y


@pytest.mark.parametrize("out_too", [False, True])
def test_folded_copies_nobody_reads_are_dropped(out_too):
    model, x = _TransposedWeights(out_too).eval(), torch.randn(3, 5)
    fast, slow = _methods(model, (x,))
    copies = [s for s in fast._steps[0] if getattr(s, "func", None) is np.copyto]
    folded = [r for r in fast.records if "permute_copy" in r.name]
    if not out_too:
        assert folded and not copies  # both permuted weights are read by prepared products
    for _ in range(2):
        got, want = fast.execute([x.numpy()]), slow.execute([x.numpy()])
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()
    with torch.no_grad():
        eager = model(x)
    for g, e in zip(got, [eager] if isinstance(eager, torch.Tensor) else eager):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-5)


class _BigTransposedWeight(torch.nn.Module):
    """A 4.4 MB weight transposed by a permute_copy the product reads (beyond what is folded
    as a copy: the view of the constant stands in for it)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(1000, 1100))
        self.b = torch.nn.Parameter(torch.randn(1000))

    def forward(self, x):  # (the weight read twice: edgetorch's export keeps the permutes)
        return torch.addmm(self.b, x, self.w.permute(1, 0)) + torch.mm(x, self.w.t())


def test_large_transposed_constants_are_read_in_place():
    model, x = _BigTransposedWeight().eval(), torch.randn(2, 1100)
    fast, slow = _methods(model, (x,))
    perms = [r.index for r in fast.records if "permute_copy" in r.name]
    assert perms and not set(perms) & set(fast._steps[1])  # no step copies the weight
    for _ in range(2):
        got, want = fast.execute([x.numpy()])[0], slow.execute([x.numpy()])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-4)


_POOLS = [  # (input, kernel_size, stride, padding, dilation, ceil_mode)
    (lambda: _t(1, 8, 20, 20), [3, 3], [2, 2], [1, 1], [1, 1], False),  # ResNet's stem pool
    (lambda: _t(2, 3, 9, 7), [3, 2], [2, 1], [1, 1], [1, 1], True),
    (lambda: _t(1, 4, 10, 11), [3, 3], [1, 1], [1, 1], [2, 2], False),
    (lambda: _t(3, 5, 6), [2, 2], [2, 2], [0, 0], [1, 1], True),  # 3-D input
    (lambda: np.where(_t(1, 2, 6, 6) > 0, np.nan, -np.inf).astype(F32), [3, 3], [2, 2],
     [1, 1], [1, 1], False),  # NaN and all -inf windows
    (lambda: np.round(_t(1, 3, 8, 8)), [2, 2], [2, 2], [0, 0], [1, 1], False),  # ties
]


@pytest.mark.parametrize("case", range(len(_POOLS)))
def test_max_pool_preparer_without_indices_gives_the_kernels_maxima(case):
    """Indices nothing reads come as None (``prepares(unread_outputs=True)``): the preparer
    computes the maxima alone, the kernel's values; with indices to write it declines."""
    make, *params = _POOLS[case]
    x = make()
    name = "aten::max_pool2d_with_indices.out"
    shape = tuple(torch.ops.aten.max_pool2d_with_indices(torch.from_numpy(x), *params)[0].shape)

    def kernel_values():
        out = _o(*shape)
        res = KERNELS[name].fn(x, *params, out, np.zeros(shape, np.int64))[0]
        return res if res is out else np.asarray(res, F32)
    out = _o(*shape)
    steps = KERNELS[name].prepare(x, *params, out, None)
    assert steps is not None and KERNELS[name].prepare_unread
    for _ in range(2):
        for step in steps:
            step()
        assert out.tobytes() == kernel_values().tobytes()
        x[...] = np.roll(x, 1)  # bound to the input's memory, not its values at load
    assert KERNELS[name].prepare(x, *params, _o(*shape), np.zeros(shape, np.int64)) is None


class _PoolNet(torch.nn.Module):
    def __init__(self, return_indices: bool) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(3, 2, 1, return_indices=return_indices)

    def forward(self, x):
        y = self.pool(torch.relu(self.conv(x)))
        return (y[0] * 2, y[1]) if isinstance(y, tuple) else y * 2


@pytest.mark.parametrize("return_indices", [False, True])
def test_max_pool_indices_skipped_only_when_nothing_reads_them(return_indices):
    """A network's max pool whose indices are unread runs the values-only preparer (no
    kernel call); when the indices are a method output they are computed as before. Same
    bits as the closures, eager's numbers."""
    model = _PoolNet(return_indices).eval()
    inputs = (torch.randn(1, 3, 16, 16),)
    fast, slow = fast_and_slow(model, inputs)
    (pool,) = [r for r in fast.records if r.name == "aten::max_pool2d_with_indices.out"]
    assert (pool.run in fast._steps[0]) == return_indices
    assert_same_bits_and_eager(fast, slow, model, inputs)
