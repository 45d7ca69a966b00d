"""Every portable kernel against PyTorch, table-driven (in the style of JAX's lax_test).

The records live in ``table_*.py`` (one line per operator string: torch reference, case
generator, tolerance); the dtypes each record runs with are the ones the kernel library
declares in ``edgetorch.kernels.support``. Each case calls the kernel *through the registry*
with pre-allocated outputs of torch's result shape and dtype, emulates the runtime's copy of a
returned array into ``out``, and compares with torch: shapes and dtypes exactly, integers
exactly, floats within the record's per-dtype tolerance.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import table_elementwise  # noqa: E402, F401  (each table module appends to OPS)
import table_nn  # noqa: E402, F401
import table_reduction  # noqa: E402, F401
import table_tensor  # noqa: E402, F401
from kernel_harness import (  # noqa: E402
    ALL_DTYPES,
    F32,
    F64,
    NUMPY_OF,
    OPS,
    A,
    Case,
    call_kernel,
    cases_for,
    compare,
    describe,
    run_record,
    run_tensor_case,
    to_numpy,
    to_torch,
    torch_expected,
)

from edgetorch.kernels import get_kernel, operator_names  # noqa: E402

pytestmark = pytest.mark.torch

RECORDS = {r.name: r for r in OPS}
assert len(RECORDS) == len(OPS), "duplicate records"


# One test per (operator, dtype): a failing dtype reports alone and does not hide the others.
_OP_DTYPES = [(name, dt) for name in sorted(RECORDS) for dt in RECORDS[name].dtypes]


@pytest.mark.parametrize("name,dt", _OP_DTYPES, ids=[f"{n}-{d}" for n, d in _OP_DTYPES])
def test_kernel_matches_torch(name, dt):
    assert run_record(RECORDS[name], dt) > 0


def _has_empty_tensor(args) -> bool:
    return any((isinstance(a, np.ndarray) and a.size == 0)
               or (isinstance(a, list) and _has_empty_tensor(a)) for a in args)


@pytest.mark.parametrize("name", sorted(n for n, r in RECORDS.items() if r.kind != "scalar"))
def test_torch_rejects_the_undeclared_dtypes(name):
    """The declared dtypes are all torch accepts: for any other dtype, every case (with
    non-empty inputs; torch skips dispatch on empty ones) must fail in torch too."""
    rec = RECORDS[name]
    accepted = []
    for dt in ALL_DTYPES:
        if dt in rec.dtypes:
            continue
        for case in cases_for(rec, dt):
            if _has_empty_tensor(case.args):
                continue
            try:
                results = torch_expected(rec, case)
            except (RuntimeError, TypeError, ValueError, NotImplementedError):
                continue
            if all(t.numel() == 0 for t in results):
                continue  # nothing computed: inconclusive
            accepted.append(f"{dt} {describe(case.args)}")
            break
    assert not accepted, (f"torch runs {name} for dtypes the kernel table does not declare "
                          f"(edgetorch/kernels/support.py): {accepted}")


# ---- coverage and conventions ----------------------------------------------------------

NAMESPACES = ("aten::", "dim_order_ops::", "executorch_prim::", "et_copy::")


def test_every_kernel_has_a_record():
    missing = [n for n in operator_names() if n.startswith(NAMESPACES) and n not in RECORDS]
    assert not missing, f"registered kernels without a test record: {missing}"


def test_every_record_is_registered():
    unknown = [n for n in RECORDS if n not in operator_names()]
    assert not unknown, f"records for operators that are not registered: {unknown}"


def _torch_schema(name: str):
    ns, rest = name.split("::")
    op_name, _, ov = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), op_name)
    return getattr(packet, ov or "default")._schema


# ExecuTorch's own schemas (exir/passes/dim_order_ops_registry.py, prim_ops/register_prim_ops.cpp)
ET_ARITY = {
    "dim_order_ops::_to_dim_order_copy.out": ["self", "non_blocking", "dim_order", "out"],
    "dim_order_ops::_clone_dim_order.out": ["self", "non_blocking", "dim_order", "out"],
    "dim_order_ops::_empty_dim_order.out": ["size", "dim_order", "out"],
    "executorch_prim::et_view.default": ["self", "size"],
    "executorch_prim::sym_ite.Scalar": ["b", "t", "f"],
    "executorch_prim::et_copy_index.tensor": ["copy_to", "copy_from", "index"],
    "et_copy::_h2d_copy.out": ["self", "out"],
    "et_copy::_d2h_copy.out": ["self", "out"],
}


@pytest.mark.parametrize("name", sorted(n for n in RECORDS if n.startswith("aten::")))
def test_kernel_signature_matches_torch_schema(name):
    """Schema order, kwarg-only and out arguments included: the runtime's calling convention."""

    schema = _torch_schema(name)
    expected = [a.name for a in schema.arguments]
    params = [p.name for p in inspect.signature(get_kernel(name).fn).parameters.values()]
    assert get_kernel(name).num_args == len(expected), (name, params, expected)
    assert params == expected, (name, params, expected)


def test_executorch_op_signatures():

    for name, expected in ET_ARITY.items():
        params = [p.name for p in inspect.signature(get_kernel(name).fn).parameters.values()]
        assert params == expected, (name, params)
    for name in operator_names():
        if name.startswith("executorch_prim::") and name not in ET_ARITY:
            unary_ops = ("neg", "sym_float", "sym_int", "ceil", "round", "trunc", "sym_not")
            want = 1 if name.split("::")[1].split(".")[0] in unary_ops else 2
            assert get_kernel(name).num_args == want, name


# ---- layouts ---------------------------------------------------------------------------


def channels_last(x: np.ndarray) -> np.ndarray:
    """The same logical tensor, stored NHWC (a non-contiguous NCHW view)."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


_TENSOR_RECORDS = sorted(n for n, r in RECORDS.items() if r.kind in ("tensor", "list_out"))


def _channels_last_args(args):
    def conv(a):
        if isinstance(a, np.ndarray) and a.ndim == 4 and a.size:
            return channels_last(a)
        if isinstance(a, list):
            return [conv(x) for x in a]
        return a

    return [conv(a) for a in args]


@pytest.mark.parametrize("name", _TENSOR_RECORDS)
def test_channels_last_inputs(name):
    """Every kernel reads 4-D inputs stored NHWC (ExecuTorch's channels-last dim order, a
    strided view here) exactly as it reads contiguous ones."""
    rec = RECORDS[name]
    dt = rec.dtypes[0]
    n = 0
    for case in cases_for(rec, dt):
        args = _channels_last_args(case.args)
        if all(a is b for a, b in zip(args, case.args)):
            continue
        run_tensor_case(rec, Case(args, case.out_dtype), dt)
        n += 1


@pytest.mark.parametrize("name", _TENSOR_RECORDS)
def test_dynamic_shape_outputs(name):
    """Dynamic shapes: the program plans ``out`` at an upper bound; the kernel must return
    the result at its real shape (the runtime then resizes ``out`` to it), not write into the
    bound's shape."""
    rec = RECORDS[name]
    dt = rec.dtypes[0]
    for case in cases_for(rec, dt):
        expected = torch_expected(rec, case, dt)
        if any(t.ndim == 0 for t in expected):
            continue
        # (outputs planned empty, like batch norm's unused statistics, stay empty)
        outs = [np.zeros(tuple(d + 1 for d in t.shape) if t.numel() else t.shape,
                         NUMPY_OF[t.dtype]) for t in expected]
        ctx = f"{name} {describe(case.args)}"
        got = call_kernel(rec, case.args, outs, ctx)
        for g, e in zip(got, expected):
            assert g.shape == tuple(e.shape), f"{ctx}: returned {g.shape}, want {tuple(e.shape)}"
            want = to_numpy(e)
            compare(np.asarray(g).astype(want.dtype), want, rec.tolerance(want.dtype), ctx)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_convolution_channels_last_input_and_out(groups):
    rng = np.random.default_rng(0)
    x = channels_last(rng.standard_normal((2, 4, 9, 9)).astype(F32))
    w = rng.standard_normal((8, 4 // groups, 3, 3)).astype(F32)
    b = rng.standard_normal(8).astype(F32)
    assert not x.flags.c_contiguous
    args = [x, w, b, [2, 1], [1, 1], [1, 1], False, [0, 0], groups]
    want = A.convolution.default(*to_torch(args)).numpy()
    out = channels_last(np.zeros(want.shape, F32))
    got = get_kernel("aten::convolution.out").fn(*args, out)
    if got is not out:
        np.copyto(out, got)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_elementwise_channels_last():
    rng = np.random.default_rng(1)
    a = channels_last(rng.standard_normal((2, 3, 4, 5)).astype(F32))
    b = rng.standard_normal((2, 3, 4, 5)).astype(F32)
    want = (torch.from_numpy(a.copy()) + 2 * torch.from_numpy(b)).numpy()
    out = channels_last(np.zeros((2, 3, 4, 5), F32))
    got = get_kernel("aten::add.out").fn(a, b, 2, out)
    if got is not out:
        np.copyto(out, got)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    got = get_kernel("aten::relu.out").fn(a, np.zeros((2, 3, 4, 5), F32))
    np.testing.assert_array_equal(got, np.maximum(a, 0))


def test_to_dim_order_copy_into_channels_last_out():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4, 5)).astype(F32)
    out = channels_last(np.zeros((2, 3, 4, 5), F64))
    got = get_kernel("dim_order_ops::_to_dim_order_copy.out").fn(x, False, [0, 2, 3, 1], out)
    assert got is out and out.strides[1] == 8
    np.testing.assert_array_equal(out, x.astype(F64))


def test_erf_accuracy():
    from edgetorch.kernels.portable.elementwise import erf

    xs = np.concatenate([np.linspace(-7, 7, 20001), [0.0, -0.0, 1e-300, np.inf, -np.inf]])
    want = torch.special.erf(torch.from_numpy(xs)).numpy()
    np.testing.assert_allclose(erf(xs), want, rtol=1e-14, atol=1e-15)
    assert np.isnan(erf(np.array([np.nan])))[0]
