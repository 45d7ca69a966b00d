"""The ML-program interpreter operation by operation: small programs whose operations cover
the MIL handlers coremltools' torch frontend emits, converted in fp32 (so any difference is
the handler's, not fp16 rounding) and compared with eager within fp32's few-ulp agreement
between NumPy's and torch's elementwise functions (1e-5 of the output's scale)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from cm_cases import eager, lower, run
from delegate_checks import params  # tests/support

pytestmark = pytest.mark.torch
ct = pytest.importorskip("coremltools")

# MIL ``inverse`` is 1 / (x + epsilon), epsilon 1e-4 by default, and coremltools converts
# ``reciprocal`` to it without setting epsilon: Core ML's own result, not eager's.
INVERSE_EPSILON = 1e-4


class Unary(torch.nn.Module):
    def forward(self, x, p):
        return (x.abs(), x.exp(), p.log(), p.sqrt(), p.rsqrt(), x.sin(), x.cos(), x.tanh(),
                x.sigmoid(), F.gelu(x), F.silu(x), F.softplus(x), F.leaky_relu(x, 0.1),
                F.relu6(x), x.erf(), x.floor(), x.ceil(), x.sign(), x.round(), x.atan(),
                x.clamp(-0.9, 0.9).asin(), x.sinh(), x.cosh(), x.clamp(-1, 1).tan(),
                F.hardtanh(x), x.square(), x.exp2(), p.reciprocal())


class Binary(torch.nn.Module):
    def forward(self, x, y):
        return (x - y, x * y, x / y, torch.maximum(x, y), torch.minimum(x, y),
                torch.pow(x.abs() + 0.5, y), torch.where(x > y, x, y), (x >= y).float(),
                (x < y).float(), (x <= y).float(), (x != y).float(), (x == y).float(),
                torch.floor_divide(x, y.abs() + 1), torch.remainder(x, y.abs() + 1))


class Reduce(torch.nn.Module):
    def forward(self, x):
        return (x.sum(1), x.mean(-1, keepdim=True), x.amax(1), x.amin(0), x.argmax(1),
                x.argmin(1), torch.linalg.vector_norm(x, dim=1), x.cumsum(1), x.softmax(-1),
                x.topk(3, 1)[0])


class Shape(torch.nn.Module):
    def forward(self, x):
        rows = torch.tensor([[0, 1]] * 6)
        return (x.t(), x.reshape(3, 16), x.unsqueeze(0), x[None].squeeze(0),
                torch.cat([x, x], 1), torch.stack([x, x]), x[1:5:2, 2:7], x.split(3, 1)[1],
                x.repeat(2, 1), F.pad(x, (1, 2)), x.expand(2, 6, 8), x.gather(1, rows),
                x.index_select(0, torch.tensor([2, 0])))


class NN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(8)
        self.bn = torch.nn.BatchNorm2d(3)
        self.inorm = torch.nn.InstanceNorm2d(3, affine=True)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, img, x, q, k, v):
        return (self.ln(x), self.bn(img), self.inorm(img), F.avg_pool2d(img, 2),
                F.interpolate(img, scale_factor=2, mode="nearest"), self.conv(img), x @ x.t(),
                F.scaled_dot_product_attention(q, k, v))


def _cases():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    p = torch.rand(6, 8, generator=g) + 0.1
    qkv = [torch.randn(1, 2, 5, 4, generator=g) for _ in range(3)]
    return {
        "unary": (Unary(), (x, p), {
            "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "gelu",
            "silu", "softplus", "leaky_relu", "relu6", "erf", "floor", "ceil", "sign",
            "round", "atan", "asin", "sinh", "cosh", "tan", "clip", "exp2", "inverse"}),
        "binary": (Binary(), (x, y), {
            "sub", "mul", "real_div", "maximum", "minimum", "pow", "select", "greater",
            "greater_equal", "less", "less_equal", "not_equal", "equal", "floor_div", "cast"}),
        "reduce": (Reduce(), (x,), {
            "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_argmax",
            "reduce_argmin", "reduce_l2_norm", "cumsum", "softmax", "topk"}),
        "shape": (Shape(), (x,), {
            "transpose", "reshape", "expand_dims", "squeeze", "concat", "stack",
            "slice_by_index", "split", "tile", "pad", "gather", "gather_along_axis"}),
        "nn": (NN().eval(), (torch.randn(1, 3, 8, 8, generator=g), x, *qkv), {
            "layer_norm", "batch_norm", "instance_norm", "avg_pool",
            "upsample_nearest_neighbor", "conv", "matmul", "softmax"}),
    }


CASES = _cases()


# unary in the default run, the other families with -m slow (each is a coremltools conversion)
@pytest.mark.parametrize("name", params(sorted(CASES), set(CASES) - {"unary"}))
def test_fp32_operations_match_eager(name):
    model, inputs, expected_ops = CASES[name]
    outs, handles = run(lower(model, inputs, compute_precision=ct.precision.FLOAT32), inputs)
    ran = set().union(*(h.operators_run for h in handles))
    assert expected_ops <= ran, f"not run: {sorted(expected_ops - ran)}"
    want = eager(model, inputs)
    if name == "unary":  # the last output is reciprocal -> MIL inverse
        want[-1] = (1.0 / (inputs[1].numpy() + np.float32(INVERSE_EPSILON))).astype(np.float32)
    assert len(outs) == len(want)
    for i, (got, ref) in enumerate(zip(outs, want)):
        assert got.shape == ref.shape, i
        scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
        np.testing.assert_allclose(np.asarray(got, np.float64), ref.astype(np.float64),
                                   atol=1e-5 * scale, rtol=0, err_msg=f"{name} output {i}")
