"""qdint8 x qbint4 fully connected (8da4w): the compiled loop on packed int4 tiles, the NumPy
path on float32 blocks, and the BLAS path of long prompts agree bit for bit, and with eager
torch (dequantized operands in float64) within float32 rounding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from edgetorch.backends.xnnpack.runtime import kernels_qb4w as QB
from edgetorch.backends.xnnpack.runtime import kernels_quant as Q
from edgetorch.kernels import accel
from edgetorch.runtime import Runtime

FIXTURES = Path(__file__).resolve().parent / "fixtures"
needs_numba = pytest.mark.skipif(not accel.available(), reason="numba (the accel extra) absent")


def _pack(w: np.ndarray) -> np.ndarray:
    """int8 ``[O, K]`` in -8..7 -> the ``.pte``'s bytes (even column in the low nibble, +8)."""
    n = (w + 8).astype(np.uint8)
    return n[:, 0::2] | (n[:, 1::2] << 4)


def _case(o: int, k: int, group: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = rng.integers(-8, 8, size=(o, k)).astype(np.int8)
    raw = rng.uniform(0.002, 0.05, size=(o, k // group)).astype(np.float32)
    scale = ((raw.view(np.uint32) >> 16) << 16).view(np.float32)  # bf16 values, as loaded
    bias = rng.normal(size=o).astype(np.float32)
    return w, scale, bias


def _torch_ref(d: Q.DynQ, w: np.ndarray, scale: np.ndarray, group: int,
               bias: np.ndarray | None) -> np.ndarray:
    zp = d.zero_point.reshape(d.zero_point.shape + (1,))
    xq = (torch.from_numpy(d.q.astype(np.float64)) - torch.from_numpy(zp.astype(np.float64))) \
        * torch.from_numpy(d.scale.astype(np.float64))[..., None]
    o, k = w.shape
    wf = torch.from_numpy(w.astype(np.float64)).reshape(o, k // group, group) \
        * torch.from_numpy(scale.astype(np.float64))[:, :, None]
    b = None if bias is None else torch.from_numpy(bias.astype(np.float64))
    return torch.nn.functional.linear(xq, wf.reshape(o, k), b).numpy()


SHAPES = [(6, 64, 32), (70, 96, 32), (192, 576, 32), (130, 256, 64), (64, 128, 128)]


@needs_numba
@pytest.mark.parametrize("o,k,group", SHAPES)
@pytest.mark.parametrize("lead", [(1,), (3,), (1, 5), (QB.BLAS_ROWS + 3,)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_compiled_numpy_and_torch_agree(o, k, group, lead, with_bias):
    w, scale, bias = _case(o, k, group, seed=o + k)
    b = bias if with_bias else None
    x = np.random.default_rng(1).normal(size=lead + (k,)).astype(np.float32) * 3
    d = Q.quantize_dynamic(x, 1)
    with accel.enabled():
        fast = QB.dynamic_fc_blockwise(d, QB.Blockwise(_pack(w), o, k, scale, group), b)
    wb = QB.Blockwise(_pack(w), o, k, scale, group)
    with accel.disabled():
        slow = QB.dynamic_fc_blockwise(d, wb, b)
    assert fast.shape == slow.shape == lead + (o,) and fast.dtype == slow.dtype == np.float32
    np.testing.assert_array_equal(fast, slow)
    ref = _torch_ref(d, w, scale, group, b)
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


def test_weights_stay_packed_and_the_numpy_blocks_are_made_on_demand():
    o, k, group = 192, 96, 32
    w, scale, _ = _case(o, k, group)
    wb = QB.Blockwise(_pack(w), o, k, scale, group)
    np.testing.assert_array_equal(wb.int_weights(), w)
    packed = wb.nbytes
    assert wb.tiles.nbytes == o * k // 2
    assert packed == o * k // 2 + 4 * o * (k // group)  # + float32 scales
    d = Q.quantize_dynamic(np.ones((2, k), np.float32), 1)
    with accel.disabled():
        QB.dynamic_fc_blockwise(d, wb, None)
    # the NumPy path keeps float32 blocks (and their scales in its own layout)
    assert wb.nbytes == packed + 4 * o * k + 4 * o * (k // group)


def test_file_pages_of_packed_weights_are_released(tmp_path):
    """A constant mapped from the program file: its pages are dropped after re-tiling, and
    reading it again still gives the file's bytes."""
    import mmap

    data = np.arange(8 * mmap.PAGESIZE, dtype=np.uint8)
    path = tmp_path / "w.bin"
    path.write_bytes(data.tobytes())
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    a = np.frombuffer(memoryview(mm).cast("B"), np.uint8)[100:]
    assert int(a.sum()) == int(data[100:].sum())  # touched: resident
    QB.release_file_pages(a)
    np.testing.assert_array_equal(a, data[100:])
    QB.release_file_pages(np.ones(10 * mmap.PAGESIZE, np.uint8))  # not mapped: a no-op
    del a
    mm.close()


@needs_numba
def test_long_prompts_do_not_keep_float32_blocks():
    o, k, group = 192, 576, 32
    w, scale, bias = _case(o, k, group)
    wb = QB.Blockwise(_pack(w), o, k, scale, group)
    before = wb.nbytes + 4 * o * (k // group)  # + the block scales in the BLAS layout
    d = Q.quantize_dynamic(np.random.default_rng(2).normal(size=(QB.BLAS_ROWS, k))
                           .astype(np.float32), 1)
    with accel.enabled():
        out = QB.dynamic_fc_blockwise(d, wb, bias)
    assert wb.nbytes == before
    np.testing.assert_allclose(out, _torch_ref(d, w, scale, group, bias), rtol=1e-5,
                               atol=1e-5 * float(np.abs(out).max()))


@needs_numba
@pytest.mark.parametrize("nnb", [1, 2, 3])
def test_dynamic_quantization_compiled_equals_numpy(nnb):
    rng = np.random.default_rng(3)
    for x in [rng.normal(size=(4, 3, 40)).astype(np.float32) * s for s in (1e-4, 1.0, 1e3)] + [
            np.zeros((2, 2, 8), np.float32), np.abs(rng.normal(size=(2, 3, 7))).astype(np.float32),
            -np.abs(rng.normal(size=(2, 3, 7))).astype(np.float32)]:
        with accel.enabled():
            a = Q.quantize_dynamic(x, nnb)
        with accel.disabled():
            b = Q.quantize_dynamic(x, nnb)
        for f in ("q", "scale", "zero_point", "qc"):
            va, vb = getattr(a, f), getattr(b, f)
            assert va.shape == vb.shape and va.dtype == vb.dtype, f
            np.testing.assert_array_equal(va, vb, err_msg=f)


@needs_numba
def test_dynamic_quantization_of_non_finite_values_takes_the_numpy_path():
    x = np.array([[1.0, np.inf, -2.0], [0.5, 0.25, 1.0]], np.float32)
    with accel.enabled(), np.errstate(all="ignore"):
        a = Q.quantize_dynamic(x, 1)
    with accel.disabled(), np.errstate(all="ignore"):
        b = Q.quantize_dynamic(x, 1)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.scale, b.scale)


@pytest.mark.parametrize("compiled", [pytest.param(True, marks=needs_numba), False])
def test_executorch_8da4w_program_both_paths(compiled):
    """ExecuTorch 1.5.1's own 8da4w program (checked in): the same outputs with and without
    the compiled kernels, within 1% of the output range of ExecuTorch's."""
    pte = (FIXTURES / "et_q_small_mlp_8da4w.pte").read_bytes()
    with np.load(FIXTURES / "et_q_small_mlp_8da4w.io.npz") as d:
        io = dict(d)
    inputs = [io[f"in_{k}"] for k in range(sum(n.startswith("in_") for n in io))]
    mode = accel.enabled if compiled else accel.disabled
    with mode():
        outs = Runtime.get().load_program(pte).load_method("forward").execute(inputs)
    with accel.disabled():
        ref = Runtime.get().load_program(pte).load_method("forward").execute(inputs)
    for k, (ours, base) in enumerate(zip(outs, ref)):
        np.testing.assert_array_equal(ours, base)
        et = io[f"et_{k}"]
        assert np.abs(ours - et).max() <= 0.01 * float(np.ptp(et))
