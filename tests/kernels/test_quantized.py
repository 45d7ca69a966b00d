"""The quantized kernel library against torch's reference ops, table-driven.

One record per kernel (all 19 of ExecuTorch's ``quantized.yaml``): a case generator over the
dtypes ``edgetorch.kernels.support`` declares, and a reference built from torch's own
``quantized_decomposed`` ops (``torch.ao.quantization.fx._decomposed``) or plain torch math.
ExecuTorch's numerics differ from torch's references in documented ways (float32 reciprocal
vs float64, its own zero-point choice), so quantized values may differ by one step where the
exact value sits on a rounding boundary; tests/compat/test_compat_quantized.py checks them
bit for bit against ExecuTorch's own kernels.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.ao.quantization.fx._decomposed")  # defines the reference ops

from edgetorch.kernels import get_kernel  # noqa: E402
from edgetorch.kernels.quantized import OPERATORS  # noqa: E402
from edgetorch.kernels.support import EXECUTORCH_QUANTIZED, SUPPORT  # noqa: E402
from edgetorch.schema.scalar_type import from_numpy_dtype, to_numpy_dtype  # noqa: E402

pytestmark = pytest.mark.torch
Q = torch.ops.quantized_decomposed
F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
I8, U8, I16, I32, I64, U16 = (np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32,
                                                     np.int64, np.uint16))
TORCH_OF = {F32: torch.float32, F64: torch.float64, F16: torch.float16, BF16: torch.bfloat16,
            I8: torch.int8, U8: torch.uint8, I16: torch.int16, I32: torch.int32,
            I64: torch.int64, U16: torch.uint16}
RANGE = {U8: (0, 255), I8: (-128, 127), I16: (-32768, 32767), I32: (-(2**31), 2**31 - 1),
         U16: (0, 65535), I64: (0, 255)}


def st(dt) -> int:
    return int(from_numpy_dtype(np.dtype(dt)))


def tt(x):
    if isinstance(x, np.ndarray):
        if x.dtype == BF16:
            return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(x.copy())
    return x


def later(fn, *args, **kwargs) -> Callable:
    """The reference call, made when the test compares."""
    return functools.partial(fn, *args, **kwargs)


def f32(x) -> torch.Tensor:
    """torch's quantize references take float32 only; float64 inputs are compared through it
    (ExecuTorch rounds a float64 product to float32 as well)."""
    return tt(x).float()


def tn(t) -> np.ndarray:
    t = t.detach()
    return t.view(torch.int16).numpy().view(BF16) if t.dtype == torch.bfloat16 else t.numpy()


@dataclass
class Rec:
    name: str
    cases: Callable  # (rng, dtype) -> list of (args, out dtypes/shapes, reference thunk)
    check: str = "float"  # "float" | "quant" (off by one step allowed) | "qparams"
    tol: float = 1e-6
    tol_f16: float = 2e-3


def _scale_for(x: np.ndarray, dt) -> tuple[float, int]:
    lo, hi = RANGE[np.dtype(dt)]
    span = float(np.abs(x.astype(np.float64)).max()) or 1.0
    return span / ((hi - lo) / 2), (lo + hi + 1) // 2 if lo < 0 else 3


# ---- case generators ---------------------------------------------------------------------

QDTYPES = (U8, I8, I16, I32)


def quantize_per_tensor(tensor_args: bool):
    def gen(rng, dt):
        out = []
        for qdt in QDTYPES:
            lo, hi = RANGE[qdt]
            for shape in [(7,), (3, 5), (2, 3, 4), ()]:
                x = np.asarray(rng.standard_normal(shape) * 3).astype(dt)
                scale, zp = _scale_for(x, qdt)
                # some values clamp (not for int32: torch's reference clamps in float32, where
                # 2**31 - 1 rounds up to 2**31 and the cast back to int32 overflows)
                scale *= 0.7 if qdt != I32 else 1.01
                ref = later(Q.quantize_per_tensor, f32(x), scale, zp, lo, hi, TORCH_OF[qdt])
                if tensor_args:
                    args = [x, np.array([scale]), np.array([zp]), lo, hi, st(qdt)]
                else:
                    args = [x, scale, zp, lo, hi, st(qdt)]
                out.append((args, [(shape, qdt)], ref))
        return out
    return gen


def quantize_per_channel(rng, dt):
    out = []
    for shape, axis in [((4, 6), 0), ((2, 3, 5), 1), ((3, 4), -1)]:
        x = (rng.standard_normal(shape) * 2).astype(dt)
        n = shape[axis]
        scales = rng.uniform(0.005, 0.05, n)
        zps = rng.integers(-10, 10, n)
        ref = later(Q.quantize_per_channel, f32(x), torch.tensor(scales), torch.tensor(zps),
                    axis % len(shape), -128, 127, torch.int8)
        out.append(([x, scales, zps, axis, -128, 127, st(I8)], [(shape, I8)], ref))
    return out


def quantize_per_token(rng, dt):
    out = []
    for shape in [(3, 8), (2, 3, 5)]:
        x = rng.standard_normal(shape).astype(dt)
        tokens = int(np.prod(shape[:-1]))
        scales = rng.uniform(0.005, 0.03, (*shape[:-1], 1))
        zps = rng.integers(-5, 5, (*shape[:-1], 1))
        ref = later(Q.quantize_per_token, f32(x), torch.tensor(scales), torch.tensor(zps), -128,
                    127, torch.int8)
        assert scales.size == tokens
        out.append(([x, scales, zps, -128, 127, st(I8)], [(shape, I8)], ref))
    return out


def dequantize_per_tensor(tensor_args: bool):
    def gen(rng, qdt):
        lo, hi = RANGE[qdt]
        out = []
        for odt in (F32, F64, F16, None):
            for shape in [(7,), (3, 5), ()]:
                q = np.asarray(rng.integers(max(lo, -1000), min(hi, 1000) + 1, shape)).astype(qdt)
                scale, zp = 0.0123, (lo + hi) // 2 if lo < 0 else 17
                zp = int(np.clip(zp, -100, 100))
                code = None if odt is None else st(odt)
                ref = later(Q.dequantize_per_tensor, tt(q), scale, zp, lo, hi, TORCH_OF[qdt],
                            out_dtype=None if odt is None else TORCH_OF[odt])
                sc = np.array([scale]) if tensor_args else scale
                zz = np.array([zp]) if tensor_args else zp
                out.append(([q, sc, zz, lo, hi, st(qdt), code], [(shape, odt or F32)], ref))
        return out
    return gen


def dequantize_per_channel(rng, qdt):
    lo, hi = RANGE[qdt]
    out = []
    for shape, axis, sdt, with_zp in [((4, 6), 0, F32, True), ((2, 3, 5), 1, F64, True),
                                      ((3, 4), -1, F32, False), ((5,), 0, F32, True)]:
        q = rng.integers(max(lo, -200), min(hi, 200) + 1, shape).astype(qdt)
        n = shape[axis]
        scales = rng.uniform(0.001, 0.1, n).astype(sdt)
        zps = rng.integers(0, 20, n) if with_zp else None
        # (the reference reads the values as int32: torch cannot promote uint16)
        ref = later(Q.dequantize_per_channel, tt(q.astype(I32)), torch.tensor(scales).float(),
                    None if zps is None else torch.tensor(zps), axis % len(shape), lo, hi,
                    torch.int32)
        out.append(([q, scales, zps, axis, lo, hi, st(qdt), None], [(shape, F32)], ref))
    return out


def dequantize_per_token(rng, qdt):
    lo, hi = RANGE[qdt]
    out = []
    for shape in [(3, 8), (2, 2, 5)]:
        q = rng.integers(max(lo, -100), min(hi, 100) + 1, shape).astype(qdt)
        scales = rng.uniform(0.001, 0.1, (*shape[:-1], 1))
        zps = rng.integers(0, 9, (*shape[:-1], 1))
        # (the reference reads the values as int64: torch cannot promote uint16)
        ref = later(Q.dequantize_per_token, tt(q.astype(I64)), torch.tensor(scales),
                    torch.tensor(zps), lo, hi, torch.int64, torch.float32)
        out.append(([q, scales, zps, lo, hi, st(qdt), st(F32)], [(shape, F32)], ref))
    return out


def choose_qparams(rng, dt):
    out = []
    for shape, shift in [((16,), 0.0), ((4, 8), 2.0), ((3, 5), -4.0), ((9,), None)]:
        # None: a constant tensor (no range: ExecuTorch's 0.1 scale, torch's eps floor)
        x = (np.full(shape, 0.0) if shift is None else rng.standard_normal(shape) + shift
             ).astype(dt)
        for qmin, qmax, qdt in [(-128, 127, torch.int8), (0, 255, torch.uint8)]:
            ref = later(Q.choose_qparams.tensor, tt(x), qmin, qmax, 2**-12, qdt)
            out.append(([x, qmin, qmax, 2**-12, st(I8 if qmin < 0 else U8)],
                        [((1,), F64), ((1,), I64)], ref))
    return out


def choose_qparams_per_token(rng, dt):
    out = []
    for shape in [(4, 16), (2, 3, 8)]:
        x = (rng.standard_normal(shape) + rng.uniform(-1, 1)).astype(dt)
        ref = later(Q.choose_qparams_per_token_asymmetric, tt(x), torch.int8)
        pshape = (*shape[:-1], 1)
        out.append(([x, st(I8)], [(pshape, F64), (pshape, I64)], ref))
    return out


def _pack(values: np.ndarray, nbit: int) -> np.ndarray:
    """An independent packer: ExecuTorch's ``_pack_embedding_weight`` layout."""
    u = (values + (1 << (nbit - 1))).astype(np.uint8)
    if nbit == 4:
        return (u[:, 0::2] << 4) | u[:, 1::2]
    return u[:, 0::4] | (u[:, 1::4] << 2) | (u[:, 2::4] << 4) | (u[:, 3::4] << 6)


def embedding(nbit: int, dtype_variant: bool):
    lo, hi = -(1 << (nbit - 1)), (1 << (nbit - 1)) - 1

    def gen(rng, wdt):
        out = []
        for groups, pdt, odt, with_zp in [(1, F32, F32, False), (2, F32, F32, True),
                                          (4, F16, F16, True), (1, BF16, BF16, False),
                                          (2, F16, F32, True)]:
            if not dtype_variant and pdt != odt:
                continue
            rows, dim = 6, 16
            if nbit == 8 and wdt == U8:
                values = rng.integers(0, 256, (rows, dim))
            else:
                values = rng.integers(lo, hi + 1, (rows, dim))
            weight = values.astype(wdt) if nbit == 8 else _pack(values, nbit)
            scales = rng.uniform(0.01, 0.1, (rows, groups) if groups > 1 else (rows,))
            scales = scales.astype(pdt)
            zps = (rng.integers(-3, 3, scales.shape).astype(odt) if with_zp else None)
            indices = np.array([[0, 5, 2], [2, 2, 1]], I64)

            def ref(values=values, scales=scales, zps=zps, indices=indices, odt=odt,
                    groups=groups, rows=rows, dim=dim):
                s = tt(scales).float().reshape(rows, groups)
                z = (torch.zeros_like(s) if zps is None
                     else tt(zps).float().reshape(rows, groups))
                table = Q.dequantize_per_channel_group(
                    torch.tensor(values, dtype=torch.int32), s, z, -(2**31), 2**31 - 1,
                    torch.int32, dim // groups, torch.float32)
                return torch.nn.functional.embedding(torch.tensor(indices), table).to(
                    TORCH_OF[odt])

            args = [weight, scales, zps, lo if nbit < 8 else -128, hi if nbit < 8 else 127,
                    indices]
            if dtype_variant:
                args.append(st(odt))
            out.append((args, [((2, 3, dim), odt)], ref))
        return out
    return gen


def add(rng, dt):
    out = []
    for shape in [(3, 4), (10,)]:
        top = min(256, np.iinfo(dt).max + 1)  # values a uint8-range kernel can meet
        a = rng.integers(0, top, shape).astype(dt)
        b = rng.integers(0, top, shape).astype(dt)
        params = [0.02, 120, 0, 255, 0.03, 130, 0, 255, 0.05, 125, 0, 255]

        def ref(a=a, b=b, p=params):
            x = Q.dequantize_per_tensor(tt(a).to(torch.uint8), p[0], p[1], 0, 255, torch.uint8)
            y = Q.dequantize_per_tensor(tt(b).to(torch.uint8), p[4], p[5], 0, 255, torch.uint8)
            return Q.quantize_per_tensor(x + y, p[8], p[9], 0, 255, torch.uint8).to(
                TORCH_OF[np.dtype(dt)])

        out.append(([a, *params[:4], b, *params[4:8], *params[8:]], [(shape, dt)], ref))
    return out


def mixed_mm(rng, dt):
    x = rng.standard_normal((3, 8)).astype(dt)
    w = rng.integers(-127, 128, (8, 5)).astype(I8)
    s = rng.uniform(0.01, 0.05, 8).astype(dt)
    ref = lambda: (tt(x).float() @ (torch.tensor(w).float() * tt(s).float()[:, None])).to(  # noqa: E731
        TORCH_OF[dt])
    return [([x, w, s, None], [((3, 5), dt)], ref)]


def mixed_linear(rng, dt):
    out = []
    for groups, odt in [(1, dt), (4, dt), (2, F32)]:
        x = rng.standard_normal((3, 16)).astype(dt)
        w = rng.integers(-127, 128, (5, 16)).astype(I8)
        s = rng.uniform(0.01, 0.05, (5, groups) if groups > 1 else (5,)).astype(dt)

        def ref(x=x, w=w, s=s, groups=groups, odt=odt):
            sc = tt(s).float().reshape(5, groups).repeat_interleave(16 // groups, dim=1)
            return (tt(x).float() @ (torch.tensor(w).float() * sc).t()).to(TORCH_OF[odt])

        out.append(([x, w, s, None, st(odt)], [((3, 5), odt)], ref))
    return out


RECORDS = [
    Rec("quantized_decomposed::quantize_per_tensor.out", quantize_per_tensor(False), "quant"),
    Rec("quantized_decomposed::quantize_per_tensor.Tensor_out", quantize_per_tensor(True),
        "quant"),
    Rec("quantized_decomposed::quantize_per_channel.out", quantize_per_channel, "quant"),
    Rec("quantized_decomposed::quantize_per_token.out", quantize_per_token, "quant"),
    Rec("quantized_decomposed::dequantize_per_tensor.out", dequantize_per_tensor(False)),
    Rec("quantized_decomposed::dequantize_per_tensor.Tensor_out", dequantize_per_tensor(True)),
    Rec("quantized_decomposed::dequantize_per_channel.out", dequantize_per_channel),
    Rec("quantized_decomposed::dequantize_per_token.out", dequantize_per_token),
    Rec("quantized_decomposed::choose_qparams.Tensor_out", choose_qparams, "qparams"),
    Rec("quantized_decomposed::choose_qparams_per_token_asymmetric.out",
        choose_qparams_per_token, "qparams"),
    Rec("quantized_decomposed::embedding_byte.out", embedding(8, False)),
    Rec("quantized_decomposed::embedding_byte.dtype_out", embedding(8, True)),
    Rec("quantized_decomposed::embedding_4bit.out", embedding(4, False)),
    Rec("quantized_decomposed::embedding_4bit.dtype_out", embedding(4, True)),
    Rec("quantized_decomposed::embedding_2bit.out", embedding(2, False)),
    Rec("quantized_decomposed::embedding_2bit.dtype_out", embedding(2, True)),
    Rec("quantized_decomposed::add.out", add, "quant"),
    # float16 accumulates in float16, as ExecuTorch does: a few half ulps from float32 math
    Rec("quantized_decomposed::mixed_mm.out", mixed_mm, tol=2e-5, tol_f16=1.5e-2),
    Rec("quantized_decomposed::mixed_linear.out", mixed_linear, tol=2e-5, tol_f16=1.5e-2),
]
BY_NAME = {r.name: r for r in RECORDS}


def dtypes_of(name: str) -> list[np.dtype]:
    order = [F32, F64, F16, BF16, I8, U8, I16, I32, I64, U16]
    have = {np.dtype(to_numpy_dtype(s)) for s in SUPPORT[name].dtypes}
    return [d for d in order if d in have]


def cases(name: str):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return [(dt, case) for dt in dtypes_of(name) for case in BY_NAME[name].cases(rng, dt)]


def run_case(name: str, args: list, outs_spec: list) -> list[np.ndarray]:
    outs = [np.full(shape, 7, dt) if dt.kind in "iu" else np.full(shape, np.nan, dt)
            for shape, dt in outs_spec]
    got = get_kernel(name).fn(*args, *outs)
    return [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))]


def test_the_table_covers_executorch_quantized_library():
    assert set(BY_NAME) == set(OPERATORS) == EXECUTORCH_QUANTIZED


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_kernel_matches_torch(name):
    rec = BY_NAME[name]
    checked = 0
    for dt, (args, outs_spec, ref) in cases(name):
        ctx = f"{name} dtype={dt}"
        got = run_case(name, args, outs_spec)
        want = [tn(t) for t in (ref() if isinstance(ref(), tuple) else (ref(),))]
        assert len(got) == len(want), ctx
        for g, w, (shape, odt) in zip(got, want, outs_spec):
            assert g.dtype == odt and g.shape == tuple(shape), (ctx, g.dtype, g.shape)
            if rec.check == "quant":
                diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
                # one step, or two float32 ulps where the values outgrow float32 (int32)
                step = np.maximum(1, 2 * np.spacing(np.abs(w).astype(F32)).astype(np.int64))
                assert (diff <= step).all(), ctx
                assert ((diff != 0) & (step == 1)).mean() <= 0.05 if diff.size else True, ctx
            elif rec.check == "qparams":
                if not np.any(args[0]):  # no range: ExecuTorch picks 0.1 (torch: eps)
                    assert g.dtype != F64 or np.all(g == 0.1), ctx
                elif g.dtype == F64:  # scale
                    np.testing.assert_allclose(g, w.astype(F64), rtol=1e-6, err_msg=ctx)
                else:  # zero point: ExecuTorch may nudge from the other end of the range
                    assert np.abs(g - w.astype(I64)).max() <= 1, ctx
            else:
                tol = rec.tol_f16 if F16 in (g.dtype, dt) else {BF16: 1.6e-2}.get(g.dtype, rec.tol)
                np.testing.assert_allclose(g.astype(F64), w.astype(F64), rtol=tol, atol=tol,
                                           err_msg=ctx)
            checked += 1
    assert checked > 0


def test_torch_reference_differs_only_at_rounding_boundaries():
    """x = 2.5 * scale quantizes to 2 (half to even) in both; the float32 reciprocal keeps
    an exactly representable product exact."""
    x = np.array([0.25, 0.35, -0.25, 1e9, -1e9], F32)
    got = run_case("quantized_decomposed::quantize_per_tensor.out",
                   [x, 0.1, 0, -128, 127, st(I8)], [((5,), I8)])[0]
    np.testing.assert_array_equal(got, [2, 4, -2, 127, -128])
    want = tn(Q.quantize_per_tensor(torch.from_numpy(x), 0.1, 0, -128, 127, torch.int8))
    np.testing.assert_array_equal(got, want)
