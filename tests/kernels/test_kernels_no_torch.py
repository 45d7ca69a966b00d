"""Portable kernels without torch: the registry's contents and hand-computed results.

These run in the minimal runtime environment (numpy only); ``test_portable.py`` checks every
kernel against torch when torch is installed.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from edgetorch.errors import KernelError, OperatorMissingError
from edgetorch.kernels import get_kernel, operator_names

CORE_OPS = [
    "aten::add.out", "aten::addmm.out", "aten::relu.out", "aten::convolution.out",
    "aten::_softmax.out", "aten::max_pool2d_with_indices.out", "aten::cat.out",
    "aten::view_copy.out", "aten::argmax.out", "aten::native_layer_norm.out",
    "executorch_prim::et_view.default", "executorch_prim::add.Scalar", "aten::sym_size.int",
    "dim_order_ops::_to_dim_order_copy.out", "dim_order_ops::_clone_dim_order.out",
]


def call(name, *args):
    return get_kernel(name).fn(*args)


def test_registry_lists_the_portable_ops():
    names = operator_names()
    assert names == sorted(names)
    for name in CORE_OPS:
        assert name in names
    assert len(names) > 150
    assert all(n.startswith(("aten::", "dim_order_ops::", "executorch_prim::", "et_copy::",
                             "quantized_decomposed::", "llama::", "cortex_m::")) for n in names)


def test_unknown_operator_suggests_near_names():
    with pytest.raises(OperatorMissingError, match="aten::add.out"):
        get_kernel("aten::add.outt")


def test_arity_counts_out_arguments():
    assert get_kernel("aten::add.out").num_args == 4  # self, other, alpha, out
    assert get_kernel("aten::max_pool2d_with_indices.out").num_args == 8
    assert get_kernel("executorch_prim::et_view.default").num_args == 2


def test_importing_kernels_does_not_import_torch():
    code = "import sys, edgetorch.kernels; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_add():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = np.array([10.0, 20.0], np.float32)
    out = np.empty((2, 2), np.float32)
    r = call("aten::add.out", a, b, 2, out)
    np.testing.assert_array_equal(r, [[21, 42], [23, 44]])
    assert r.dtype == np.float32
    # int tensor + float scalar promotes to float (out decides the stored dtype)
    r = call("aten::add.Scalar_out", np.array([1, 2], np.int32), 0.5, 1, np.empty(2, np.float32))
    np.testing.assert_array_equal(r, [1.5, 2.5])
    # int8 + int scalar stays int8 and wraps, as torch does
    r = call("aten::add.Scalar_out", np.array([120], np.int8), 10, 1, np.empty(1, np.int8))
    np.testing.assert_array_equal(r, [-126])


def test_addmm():
    bias = np.array([1.0, -1.0], np.float32)
    m1 = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    m2 = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    r = call("aten::addmm.out", bias, m1, m2, 2, 3, np.empty((2, 2), np.float32))
    np.testing.assert_array_equal(r, [[5, 4], [11, 10]])  # 2*bias + 3*(m1 @ m2)
    r = call("aten::addmm.out", np.full((2, 2), np.nan, np.float32), m1, m2, 0, 1,
             np.empty((2, 2), np.float32))
    np.testing.assert_array_equal(r, m1)  # beta == 0 ignores self, nan included


def test_relu():
    x = np.array([-1.0, 0.0, 2.5, np.nan], np.float32)
    r = call("aten::relu.out", x, np.empty(4, np.float32))
    np.testing.assert_array_equal(r, [0, 0, 2.5, np.nan])
    r = call("aten::relu.out", np.array([-3, 4], np.int64), np.empty(2, np.int64))
    np.testing.assert_array_equal(r, [0, 4])


def test_convolution():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 2, 2), np.float32)
    out = np.empty((1, 1, 2, 2), np.float32)
    r = call("aten::convolution.out", x, w, np.array([1.0], np.float32), [2, 2], [0, 0], [1, 1],
             False, [0, 0], 1, out)
    # sums of the 2x2 blocks, plus the bias
    np.testing.assert_array_equal(r[0, 0], [[0 + 1 + 4 + 5 + 1, 2 + 3 + 6 + 7 + 1],
                                            [8 + 9 + 12 + 13 + 1, 10 + 11 + 14 + 15 + 1]])
    # depthwise: each channel convolved with its own 1x1 kernel
    x2 = np.stack([np.ones((3, 3)), 2 * np.ones((3, 3))]).astype(np.float32)[None]
    w2 = np.array([3.0, -1.0], np.float32).reshape(2, 1, 1, 1)
    r = call("aten::convolution.out", x2, w2, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 2,
             np.empty((1, 2, 3, 3), np.float32))
    np.testing.assert_array_equal(r[0, :, 0, 0], [3, -2])
    # transposed, stride 2: each input pixel stamps the kernel
    xt = np.array([[[[1.0, 2.0]]]], np.float32)
    wt = np.array([[[[1.0, 10.0]]]], np.float32)
    r = call("aten::convolution.out", xt, wt, None, [1, 2], [0, 0], [1, 1], True, [0, 0], 1,
             np.empty((1, 1, 1, 4), np.float32))
    np.testing.assert_array_equal(r[0, 0, 0], [1, 10, 2, 20])


def test_softmax():
    x = np.array([[0.0, np.log(3.0)], [1.0, 1.0]], np.float32)
    r = call("aten::_softmax.out", x, -1, False, np.empty((2, 2), np.float32))
    np.testing.assert_allclose(r, [[0.25, 0.75], [0.5, 0.5]], rtol=1e-6)
    masked = np.array([[0.0, -np.inf]], np.float32)
    r = call("aten::_softmax.out", masked, 1, False, np.empty((1, 2), np.float32))
    np.testing.assert_array_equal(r, [[1.0, 0.0]])


def test_max_pool2d_with_indices():
    x = np.array([[1, 5, 2, 0],
                  [3, 4, 8, 1],
                  [0, 0, 1, 1],
                  [9, 0, 1, 7]], np.float32)[None, None]
    vals, idx = call("aten::max_pool2d_with_indices.out", x, [2, 2], [2, 2], [0, 0], [1, 1],
                     False, np.empty((1, 1, 2, 2), np.float32), np.empty((1, 1, 2, 2), np.int64))
    np.testing.assert_array_equal(vals[0, 0], [[5, 8], [9, 7]])
    np.testing.assert_array_equal(idx[0, 0], [[1, 6], [12, 15]])  # flat index into H*W
    # ceil_mode with padding: 3x3 windows, stride 2, pad 1 over a 4x4 input -> 3x3 output
    vals, idx = call("aten::max_pool2d_with_indices.out", x, [3, 3], [2, 2], [1, 1], [1, 1],
                     True, np.empty((1, 1, 3, 3), np.float32), np.empty((1, 1, 3, 3), np.int64))
    np.testing.assert_array_equal(vals[0, 0], [[5, 8, 1], [9, 8, 7], [9, 7, 7]])
    np.testing.assert_array_equal(idx[0, 0], [[1, 6, 7], [12, 6, 15], [12, 15, 15]])


def test_cat():
    a = np.array([[1, 2]], np.int64)
    b = np.array([[3, 4], [5, 6]], np.int64)
    r = call("aten::cat.out", [a, b], 0, np.empty((3, 2), np.int64))
    np.testing.assert_array_equal(r, [[1, 2], [3, 4], [5, 6]])
    # legacy empty 1-D tensors are skipped
    r = call("aten::cat.out", [a, np.zeros((0,), np.int64), a], 1, np.empty((1, 4), np.int64))
    np.testing.assert_array_equal(r, [[1, 2, 1, 2]])


def test_view_copy_and_et_view():
    x = np.arange(6, dtype=np.float32)
    r = call("aten::view_copy.out", x, [2, -1], np.empty((2, 3), np.float32))
    np.testing.assert_array_equal(r, [[0, 1, 2], [3, 4, 5]])
    assert not np.shares_memory(r, x)
    v = call("executorch_prim::et_view.default", x, [3, 2])
    assert v.shape == (3, 2) and np.shares_memory(v, x)
    x[0] = 42  # a view sees later writes to its base
    assert v[0, 0] == 42
    with pytest.raises(KernelError):
        call("executorch_prim::et_view.default", np.ones((3, 4))[:, :2], [6])


def test_argmax():
    x = np.array([[1.0, 7.0, 7.0], [9.0, 0.0, 2.0]], np.float32)
    r = call("aten::argmax.out", x, 1, False, np.empty((2,), np.int64))
    np.testing.assert_array_equal(r, [1, 0])  # ties: first occurrence
    r = call("aten::argmax.out", x, None, False, np.empty((), np.int64))
    assert r.shape == () and int(r) == 3
    r = call("aten::argmax.out", x, None, True, np.empty((1, 1), np.int64))
    assert r.shape == (1, 1)


def test_layer_norm():
    x = np.array([[1.0, 3.0], [2.0, 2.0]], np.float32)
    out, mean, rstd = call("aten::native_layer_norm.out", x, [2], None, None, 0.0,
                           np.empty((2, 2), np.float32), np.empty((2, 1), np.float32),
                           np.empty((2, 1), np.float32))
    np.testing.assert_allclose(out[0], [-1, 1], rtol=1e-6)
    np.testing.assert_array_equal(mean[:, 0], [2, 2])
    assert rstd[0, 0] == 1.0


def test_prim_ops():
    assert call("executorch_prim::add.Scalar", 2, 3) == 5
    assert call("executorch_prim::floordiv.Scalar", -7, 2) == -4
    assert call("executorch_prim::mod.Scalar", -7, 2) == 1
    assert call("executorch_prim::floordiv.int", -7, 2) == -3
    assert call("executorch_prim::truediv.Scalar", 7, 2) == 3.5
    assert call("executorch_prim::truediv.Scalar", 1.0, 0.0) == float("inf")
    assert call("executorch_prim::sym_float.Scalar", 3) == 3.0
    assert call("executorch_prim::round.Scalar", 2.5) == 2
    assert call("executorch_prim::gt.Scalar", 3, 2) is True
    assert call("aten::sym_size.int", np.zeros((2, 5)), -1) == 5
    assert call("aten::sym_numel", np.zeros((2, 5))) == 10


def test_dim_order_copy_converts_dtype_into_a_channels_last_out():
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    out = np.zeros((1, 3, 4, 2), np.int32).transpose(0, 3, 1, 2)  # NHWC storage
    r = call("dim_order_ops::_to_dim_order_copy.out", x, False, [0, 2, 3, 1], out)
    assert r is out
    np.testing.assert_array_equal(out, x.astype(np.int32))
    with pytest.raises(KernelError):
        call("dim_order_ops::_clone_dim_order.out", x, False, [0, 1, 1, 2],
             np.empty_like(x))


def test_batch_norm_inference_stats_outputs():
    x = np.ones((2, 2, 1, 1), np.float32)
    mean = np.array([1.0, 0.0], np.float32)
    var = np.array([4.0, 1.0], np.float32)
    w = np.array([2.0, 1.0], np.float32)
    b = np.array([0.5, 0.0], np.float32)
    name = "aten::_native_batch_norm_legit_no_training.out"
    # ExecuTorch plans the mean/invstd outputs empty: they stay empty
    out, m, s = call(name, x, w, b, mean, var, 0.1, 0.0, np.empty_like(x),
                     np.empty((0,), np.float32), np.empty((0,), np.float32))
    np.testing.assert_allclose(out[:, :, 0, 0], [[0.5, 1.0], [0.5, 1.0]])
    assert m.shape == (0,) and s.shape == (0,)
    # planned with C elements, they receive the running mean and 1/sqrt(var + eps)
    out, m, s = call(name, x, None, None, mean, var, 0.1, 0.0, np.empty_like(x),
                     np.empty((2,), np.float32), np.empty((2,), np.float32))
    np.testing.assert_allclose(m, mean)
    np.testing.assert_allclose(s, [0.5, 1.0])


def test_executorch_portable_library_is_covered():
    from edgetorch.kernels.support import (
        EXECUTORCH_OPTIMIZED_ONLY,
        EXECUTORCH_PORTABLE,
        EXECUTORCH_PRIM,
        LEFT_OUT,
    )

    executorch = EXECUTORCH_PORTABLE | EXECUTORCH_PRIM | EXECUTORCH_OPTIMIZED_ONLY
    missing = sorted(executorch - set(operator_names()) - set(LEFT_OUT))
    assert not missing, missing


def test_every_tensor_kernel_declares_its_dtypes():
    from edgetorch.kernels.support import SUPPORT

    names = set(operator_names())
    assert not sorted(set(SUPPORT) - names), "declared but not registered"
    tensor_prims = {"executorch_prim::et_view.default", "executorch_prim::et_copy_index.tensor"}
    scalar_ops = {n for n in names if n.startswith("executorch_prim::")} - tensor_prims
    undeclared = sorted(names - scalar_ops - set(SUPPORT))
    assert not undeclared, f"tensor kernels without a dtype declaration: {undeclared}"


def test_sort_and_topk():
    x = np.array([[3.0, np.nan, 1.0, 3.0]], np.float32)
    vals, idx = call("aten::sort.values_stable", x, True, -1, True,
                     np.empty((1, 4), np.float32), np.empty((1, 4), np.int64))
    np.testing.assert_array_equal(idx, [[1, 0, 3, 2]])  # nan first, ties in input order
    vals, idx = call("aten::topk.values", np.array([5, 1, 9, 7], np.int32), 2, 0, True, True,
                     np.empty(2, np.int32), np.empty(2, np.int64))
    np.testing.assert_array_equal(vals, [9, 7])
    np.testing.assert_array_equal(idx, [2, 3])


def test_shifts_past_the_bit_width():
    a = np.array([-8, 8, 1], np.int8)
    b = np.array([9, 1, -1], np.int8)
    r = call("aten::bitwise_right_shift.Tensor_out", a, b, np.empty(3, np.int8))
    np.testing.assert_array_equal(r, [-1, 4, 0])  # sign fill, plain shift, negative -> 0
    r = call("aten::bitwise_left_shift.Tensor_Scalar_out", a, 8, np.empty(3, np.int8))
    np.testing.assert_array_equal(r, [0, 0, 0])


def test_repeat_interleave_and_masked_scatter():
    r = call("aten::repeat_interleave.Tensor_out", np.array([2, 0, 1]), None,
             np.empty(3, np.int64))
    np.testing.assert_array_equal(r, [0, 0, 2])
    x = np.zeros((2, 2), np.float32)
    r = call("aten::masked_scatter.out", x, np.array([True, False]),
             np.array([1.0, 2.0, 3.0], np.float32), np.empty((2, 2), np.float32))
    np.testing.assert_array_equal(r, [[1, 0], [2, 0]])


def test_bfloat16_computes_in_float32():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    a = np.array([1.0, 256.0], bf16)
    r = call("aten::add.out", a, np.array([1 / 256, 1.0], bf16), 1, np.empty(2, bf16))
    assert r.dtype == bf16
    np.testing.assert_array_equal(r.astype(np.float32), [1.0, 256.0])  # rounded once, to even
    r = call("aten::sum.IntList_out", np.ones(1000, bf16), [0], False, None, np.empty((), bf16))
    assert float(r) == 1000.0  # a bfloat16 accumulator would stop at 256


# ---- the quantized library (ExecuTorch's kernels/quantized), hand-computed --------------


def test_quantized_library_is_registered_without_any_import():
    from edgetorch.kernels.quantized import OPERATORS
    from edgetorch.kernels.support import EXECUTORCH_QUANTIZED

    assert set(OPERATORS) == EXECUTORCH_QUANTIZED
    assert EXECUTORCH_QUANTIZED <= set(operator_names())
    assert len(EXECUTORCH_QUANTIZED) == 19


def test_quantize_rounds_half_to_even_and_clamps():
    x = np.array([0.25, 0.35, -0.25, 0.15, 100.0, -100.0, np.nan], np.float32)
    r = call("quantized_decomposed::quantize_per_tensor.out", x, 0.1, 1, -128, 127, 1,
             np.empty(7, np.int8))
    # 2.5 -> 2 and -2.5 -> -2 (half to even), 1.5 -> 2, then + zero point; NaN -> quant_min
    np.testing.assert_array_equal(r, [3, 5, -1, 3, 127, -128, -128])
    r = call("quantized_decomposed::quantize_per_tensor.Tensor_out", x[:3],
             np.array([0.1]), np.array([1]), 0, 255, 0, np.empty(3, np.uint8))
    np.testing.assert_array_equal(r, [3, 5, 0])
    with pytest.raises(KernelError, match="float64"):  # ExecuTorch wants a double scale
        call("quantized_decomposed::quantize_per_tensor.Tensor_out", x[:3],
             np.array([0.1], np.float32), np.array([1]), 0, 255, 0, np.empty(3, np.uint8))


def test_quantize_uses_a_float32_reciprocal():
    # 1/0.3 in float32 is 3.3333333 (rounded up); 0.15 * that is 0.50000006, which rounds to 1,
    # while 0.15 / 0.3 computed exactly is 0.49999997 -> 0
    r = call("quantized_decomposed::quantize_per_tensor.out", np.array([0.15], np.float32),
             0.3, 0, -128, 127, 1, np.empty(1, np.int8))
    assert int(r[0]) == int(np.rint(np.float32(0.15) * (np.float32(1) / np.float32(0.3))))


def test_dequantize_per_tensor_and_channel():
    q = np.array([[-128, 0, 127], [5, 6, 7]], np.int8)
    r = call("quantized_decomposed::dequantize_per_tensor.out", q, 0.5, -1, -128, 127, 1, None,
             np.empty((2, 3), np.float32))
    np.testing.assert_array_equal(r, [[-63.5, 0.5, 64.0], [3.0, 3.5, 4.0]])
    r = call("quantized_decomposed::dequantize_per_channel.out", q, np.array([1.0, 0.25]),
             np.array([0, 4]), 0, -128, 127, 1, None, np.empty((2, 3), np.float32))
    np.testing.assert_array_equal(r, [[-128, 0, 127], [0.25, 0.5, 0.75]])
    r = call("quantized_decomposed::dequantize_per_channel.out", q,
             np.array([1.0, 2.0, 4.0], np.float32), None, 1, -128, 127, 1, None,
             np.empty((2, 3), np.float32))
    np.testing.assert_array_equal(r, [[-128, 0, 508], [5, 12, 28]])


def test_choose_qparams_widens_to_zero_and_nudges_the_zero_point():
    scale, zp = np.empty(1, np.float64), np.empty(1, np.int64)
    x = np.array([1.0, 2.0, 3.0], np.float32)  # range widened to [0, 3]
    call("quantized_decomposed::choose_qparams.Tensor_out", x, -128, 127, 1e-5, 1, scale, zp)
    assert scale[0] == 3.0 / 255 and zp[0] == -128
    x = np.array([-1.0, 0.5], np.float32)
    call("quantized_decomposed::choose_qparams.Tensor_out", x, 0, 255, 1e-5, 0, scale, zp)
    assert scale[0] == 1.5 / 255 and zp[0] == 170  # 255 - 0.5 / scale, from the max side
    x = np.zeros(4, np.float32)  # no range at all: scale 0.1 (eps is ignored), and the
    call("quantized_decomposed::choose_qparams.Tensor_out", x, -128, 127, 1e-5, 1, scale, zp)
    assert scale[0] == 0.1 and zp[0] == 127  # max side wins the error comparison (|127| < 128)
    x = np.array([0.0, 1e-4], np.float32)  # tiny range: scale raised to 6.1e-5
    call("quantized_decomposed::choose_qparams.Tensor_out", x, -128, 127, 1e-5, 1, scale, zp)
    assert scale[0] == float(np.float32(6.1e-5)) and zp[0] == -128
    scales, zps = np.empty((2, 1), np.float64), np.empty((2, 1), np.int64)
    x = np.array([[0.0, 2.55], [-2.55, 0.0]], np.float32)
    call("quantized_decomposed::choose_qparams_per_token_asymmetric.out", x, 1, scales, zps)
    np.testing.assert_allclose(scales[:, 0], [0.01, 0.01])
    np.testing.assert_array_equal(zps[:, 0], [-128, 127])


def test_quantize_and_dequantize_per_token():
    x = np.array([[0.5, -0.5], [3.0, 1.0]], np.float32)
    q = call("quantized_decomposed::quantize_per_token.out", x, np.array([[0.5], [1.0]]),
             np.array([[0], [-1]]), -128, 127, 1, np.empty((2, 2), np.int8))
    np.testing.assert_array_equal(q, [[1, -1], [2, 0]])
    r = call("quantized_decomposed::dequantize_per_token.out", q, np.array([[0.5], [1.0]]),
             np.array([[0], [-1]]), -128, 127, 1, 6, np.empty((2, 2), np.float32))
    np.testing.assert_array_equal(r, [[0.5, -0.5], [3.0, 1.0]])


def test_embeddings_unpack_as_executorch_packs():
    values = np.array([[-8, 7, 0, 1], [3, -3, -1, 2]])
    packed = ((values[:, 0::2] + 8) << 4 | (values[:, 1::2] + 8)).astype(np.uint8)
    scales = np.array([0.5, 2.0], np.float32)
    r = call("quantized_decomposed::embedding_4bit.out", packed, scales, None, -8, 7,
             np.array([1, 0, 1]), np.empty((3, 4), np.float32))
    np.testing.assert_array_equal(r, [[6, -6, -2, 4], [-4, 3.5, 0, 0.5], [6, -6, -2, 4]])
    two = np.array([[-2, 1, 0, -1]])
    packed2 = ((two[:, 0] + 2) | (two[:, 1] + 2) << 2 | (two[:, 2] + 2) << 4
               | (two[:, 3] + 2) << 6).astype(np.uint8)[:, None]
    r = call("quantized_decomposed::embedding_2bit.out", packed2, np.array([1.0], np.float32),
             None, -2, 1, np.array([0], np.int32), np.empty((1, 4), np.float32))
    np.testing.assert_array_equal(r, [[-2, 1, 0, -1]])
    w = np.array([[1, 2, 3, 4], [-1, -2, -3, -4]], np.int8)
    r = call("quantized_decomposed::embedding_byte.dtype_out", w,
             np.array([[1.0, 10.0], [2.0, 3.0]], np.float32), np.array([[1.0, 0.0], [0.0, 1.0]],
                                                                        np.float16),
             -128, 127, np.array([[1]]), 5, np.empty((1, 1, 4), np.float16))
    np.testing.assert_array_equal(r, [[[-2, -4, -12, -15]]])  # per-group scales and zero points
    with pytest.raises(KernelError, match="out of range"):
        call("quantized_decomposed::embedding_byte.out", w, np.ones(2, np.float32), None, -128,
             127, np.array([2]), np.empty((1, 4), np.float32))


def test_quantized_add_and_mixed_products():
    a = np.array([10, 200], np.uint8)
    b = np.array([20, 100], np.uint8)
    r = call("quantized_decomposed::add.out", a, 0.5, 0, 0, 255, b, 0.25, 10, 0, 255, 1.0, 5, 0,
             255, np.empty(2, np.uint8))
    np.testing.assert_array_equal(r, [5 + 8, 5 + 122])  # 5 + 2.5 -> 7.5 -> 8; 100 + 22.5 -> 122
    x = np.array([[1.0, 2.0]], np.float32)
    w = np.array([[1, -1, 2], [3, 0, -2]], np.int8)  # [n=2, p=3]
    r = call("quantized_decomposed::mixed_mm.out", x, w, np.array([0.5, 2.0], np.float32), None,
             np.empty((1, 3), np.float32))
    np.testing.assert_array_equal(r, [[12.5, -0.5, -7.0]])
    wt = np.array([[1, 3], [-1, 0], [2, -2]], np.int8)  # [p=3, n=2], per-row scales
    r = call("quantized_decomposed::mixed_linear.out", x, wt, np.array([1.0, 2.0, 0.5],
             np.float32), None, None, np.empty((1, 3), np.float32))
    np.testing.assert_array_equal(r, [[7.0, -2.0, -1.0]])
