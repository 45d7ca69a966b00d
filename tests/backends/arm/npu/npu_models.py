"""Single-operator (and tiny) seeded torch models for the command-stream simulator's tests.

Each entry builds ``(model, example_inputs)``; edgetorch's Ethos-U flow turns it into a TOSA
graph, Vela compiles that for each MAC config, and the simulator must equal tosa-tools'
reference model on it. Inputs mix scales and offsets so zero points and scales vary.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _x(*shape, seed=0, scale=1.0, offset=0.0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen) * scale + offset


def _conv(cin, cout, k, hw=9, seed=0, **kw):
    def build():
        torch.manual_seed(seed)
        return nn.Conv2d(cin, cout, k, **kw).eval(), (_x(1, cin, hw, hw, seed=seed),)
    return build


def _unary(fn, shape=(1, 5, 7, 6), seed=0, scale=2.0, offset=0.5):
    return lambda: (Lambda(fn).eval(), (_x(*shape, seed=seed, scale=scale, offset=offset),))


def _binary(fn, shape_a=(1, 4, 6, 7), shape_b=(1, 4, 6, 7), seed=0):
    return lambda: (Lambda(fn).eval(), (_x(*shape_a, seed=seed, scale=1.5, offset=0.3),
                                        _x(*shape_b, seed=seed + 1, scale=0.4, offset=-0.2)))


MODELS = {
    "conv3x3": _conv(3, 8, 3, padding=1),
    "conv3x3_s2": _conv(4, 6, 3, hw=10, stride=2, padding=1, seed=1),
    "conv3x3_dil2": _conv(3, 5, 3, hw=11, dilation=2, padding=2, seed=2),
    "conv5x5_nobias": _conv(2, 4, 5, hw=12, padding=2, bias=False, seed=3),
    "conv1x1_wide": _conv(40, 36, 1, hw=5, seed=4),
    "conv_valid_rect": lambda: (nn.Conv2d(6, 20, (2, 3)).eval(), (_x(1, 6, 7, 9, seed=5),)),
    "depthwise3x3": _conv(8, 8, 3, padding=1, groups=8, seed=6),
    "depthwise3x3_s2": _conv(24, 24, 3, hw=10, stride=2, padding=1, groups=24, seed=7),
    "depthwise_mult2": _conv(4, 8, 3, padding=1, groups=4, seed=8),
    "maxpool2x2": _unary(lambda x: F.max_pool2d(x, 2), shape=(1, 6, 8, 8)),
    "maxpool3x3_pad": _unary(lambda x: F.max_pool2d(x, 3, 1, 1), shape=(1, 5, 7, 7), seed=1),
    "avgpool2x2": _unary(lambda x: F.avg_pool2d(x, 2), shape=(1, 6, 8, 8), seed=2),
    "avgpool3x3_s2": _unary(lambda x: F.avg_pool2d(x, 3, 2), shape=(1, 4, 9, 9), seed=3),
    "global_avgpool": _unary(lambda x: F.adaptive_avg_pool2d(x, 1), shape=(1, 20, 7, 7), seed=4),
    "mean_dim": _unary(lambda x: x.mean(dim=(2, 3), keepdim=True), shape=(1, 3, 5, 5), seed=5),
    "add": _binary(lambda a, b: a + b),
    "add_bcast": _binary(lambda a, b: a + b, shape_b=(1, 4, 1, 7), seed=1),
    "add_scalar": _unary(lambda x: x + 0.75, seed=6),
    "sub": _binary(lambda a, b: a - b, seed=2),
    "sub_bcast_c": _binary(lambda a, b: a - b, shape_b=(1, 1, 6, 7), seed=3),
    "mul": _binary(lambda a, b: a * b, seed=4),
    "mul_scalar": _unary(lambda x: x * 0.3, seed=7),
    "minimum": _binary(torch.minimum, seed=5),
    "maximum": _binary(torch.maximum, seed=6),
    "abs": _unary(torch.abs, seed=8),
    "relu": _unary(torch.relu, seed=9),
    "relu6": _unary(lambda x: F.hardtanh(x, 0.0, 6.0), seed=10, scale=4.0),
    "leaky_relu": _unary(lambda x: F.leaky_relu(x, 0.1), seed=11),
    "sigmoid": _unary(torch.sigmoid, seed=12),
    "tanh": _unary(torch.tanh, seed=13),
    "hardswish": _unary(F.hardswish, seed=14),
    "linear": lambda: (nn.Linear(24, 10).eval(), (_x(1, 24, seed=15),)),
    "cat": _binary(lambda a, b: torch.cat([a, b], 1), seed=7),
    "conv_relu_add": lambda: (_ConvReluAdd().eval(), (_x(1, 3, 8, 8, seed=16),)),
    "upsample_nearest": _unary(lambda x: F.interpolate(x, scale_factor=2.0, mode="nearest"),
                               shape=(1, 4, 5, 6), seed=18),
    "conv_transpose": lambda: (nn.ConvTranspose2d(4, 6, 2, stride=2).eval(),
                               (_x(1, 4, 5, 5, seed=19),)),
    "sum_dim": _unary(lambda x: x.sum(dim=1, keepdim=True), shape=(1, 6, 5, 7), seed=20),
    "softmax": _unary(lambda x: torch.softmax(x, dim=-1), shape=(1, 3, 4, 10), seed=21),
    "pad": _unary(lambda x: F.pad(x, (1, 2, 0, 1)), shape=(1, 3, 5, 5), seed=22),
    "exp": _unary(torch.exp, seed=23, scale=1.0),
    "rsqrt": _unary(lambda x: torch.rsqrt(x.abs() + 0.1), seed=24),
}
# int16 activations (ExecuTorch's a16w8 quantization): the same models, '@a16w8' appended
A16W8 = ["conv3x3", "depthwise3x3", "add", "sub", "mul", "maxpool2x2", "avgpool2x2", "sigmoid",
         "tanh", "relu", "linear"]


class _ConvReluAdd(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(17)
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 1)

    def forward(self, x):
        y = torch.relu(self.a(x))
        return y + self.b(y)
