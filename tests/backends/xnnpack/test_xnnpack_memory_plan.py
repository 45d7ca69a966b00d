"""The XNNPACK graph's arena for convolution and pooling outputs (``runtime/arena.py``): values
share memory only when their lifetimes do not overlap, residual inputs and views stay intact,
external outputs are never overwritten, and results equal eager PyTorch on every call."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import edgetorch.backends.xnnpack  # noqa: F401  (registers the runtime backend)
from edgetorch.backends.xnnpack import XnnpackPartitioner
from edgetorch.backends.xnnpack.runtime import arena
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.kernels import accel
from edgetorch.runtime import Runtime


class _Net(nn.Module):
    """A ResNet-like stem, pool and two residual blocks, a depthwise layer, and a second
    output that is a view (flatten) of an intermediate convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 5, 2, 2), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.a1 = nn.Conv2d(16, 16, 3, 1, 1)
        self.a2 = nn.Conv2d(16, 16, 3, 1, 1)
        self.b1 = nn.Conv2d(16, 16, 3, 1, 1)
        self.b2 = nn.Conv2d(16, 16, 3, 1, 1)
        self.dw = nn.Conv2d(16, 16, 3, 1, 1, groups=16)
        self.proj = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = self.pool(self.stem(x))
        y = torch.relu(y + self.a2(torch.relu(self.a1(y))))
        z = self.b1(y)
        y = torch.relu(y + self.b2(torch.relu(z)))
        return self.proj(torch.relu(self.dw(y))), z.flatten(1)


def _plans(monkeypatch) -> list[dict[int, np.ndarray]]:
    plans = []
    orig = arena.plan_outputs

    def record(*args, **kwargs):
        plans.append(orig(*args, **kwargs))
        return plans[-1]
    import edgetorch.backends.xnnpack.runtime.backend as xr
    monkeypatch.setattr(xr, "plan_outputs", record)
    return plans


@pytest.mark.parametrize("mode", [accel.enabled, accel.disabled])
def test_planned_graph_matches_eager_on_every_call(mode, monkeypatch):
    if mode is accel.enabled:
        pytest.importorskip("numba")
    plans = _plans(monkeypatch)
    torch.manual_seed(0)
    model = _Net().eval()
    ex = (torch.randn(1, 3, 32, 32),)
    prog = to_edge_transform_and_lower(torch.export.export(model, ex),
                                       partitioner=[XnnpackPartitioner()]).to_executorch()
    with mode():
        method = Runtime.get().load_program(prog.buffer).load_method("forward", optimize=True)
        plan = plans[-1]
        for seed in range(3):
            x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
            got = method.execute([x.numpy()])
            with torch.no_grad():
                want = model(x)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)
    # the arena is shared: some planned outputs use the same memory, and it is smaller than
    # the planned outputs together
    bufs = list(plan.values())
    assert len(bufs) >= 5
    assert any(np.shares_memory(a, b) for k, a in enumerate(bufs) for b in bufs[k + 1:])
    assert bufs[0].base.nbytes < sum(b.nbytes for b in bufs)


class _FakeCtx:
    def __init__(self, slots, dims) -> None:
        self._slots = {v: v for v in slots}
        self._dims = dims

    def dims(self, s):
        return self._dims[s]

    def dtype(self, s):
        return np.dtype(np.float32)

    def const(self, s):
        return None


def test_lifetimes_decide_sharing():
    """conv A, a reshape V of A, conv B, conv C of B, add V + C, then a chain D, E, F. A lives
    as long as its view V; the add may return (a view of) an input, so A and C live as long
    as the add's result, read by D; B and C overlap at C's node: none of A, B, C share. D
    reuses B's place (B is dead before D), E reuses A's (dead after D); F, an external
    output, is not planned."""
    from edgetorch.backends.xnnpack import schema as x

    def conv(i, o):
        return x.XNode(x.XNNConv2d(0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 4, 4, 1, 0, 0, i, 90, 91, o))

    nodes = [conv(0, 1), x.XNode(x.XNNStaticReshape(4, [1, 4, 4, 4], 1, 2)), conv(0, 3),
             conv(3, 4), x.XNode(x.XNNAdd(2, 4, 5)), conv(5, 7), conv(7, 8), conv(8, 9)]
    ctx = _FakeCtx(range(10), {s: (1, 4, 4, 4) for s in range(10)})
    plan = arena.plan_outputs(nodes, ctx, {9})
    assert set(plan) == {1, 3, 4, 7, 8}  # 9 is an external output: the runtime copies it out
    for a, b in [(1, 3), (1, 4), (3, 4), (7, 8)]:
        assert not np.shares_memory(plan[a], plan[b]), (a, b)
    assert np.shares_memory(plan[7], plan[3]) and np.shares_memory(plan[8], plan[1])
    assert all(p.ctypes.data % arena.ALIGN == 0 for p in plan.values())
