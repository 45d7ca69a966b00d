"""Models whose Python scalars meet Tensor operands (``x + 1``, ``1.0 - x``, ``i / 2``) in
several dtypes, for ``test_compat_scalars.py`` (``path.py:factory`` specs ExecuTorch's
harness loads too: torch only)."""

import torch


class ScalarMix(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("c", torch.ones(4))

    def forward(self, x, i, h):
        y = 1.0 - (self.lin(x) + 1) * 2.5
        return (torch.where(y > 0, y, 0.0) + self.c, i + 3, i * 2.5, i / 2, i // 2, x + i[:1],
                torch.maximum(y, torch.tensor(0.5)), h * 0.5 + 1, y / 3,
                x.double() - 1, i.to(torch.int32) + 2, torch.minimum(i, torch.tensor(1)))


def scalar_mix():
    return ScalarMix(), (torch.randn(2, 4), torch.tensor([1, -2, 3, 4]),
                         torch.randn(3).to(torch.float16))


class ViewsAndSlices(torch.nn.Module):
    """A view of a view (ExecuTorch re-bases it and drops the middle one) and a slice that
    keeps the whole tensor (ExecuTorch drops it)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.arange(32.0).reshape(8, 4))

    def forward(self, x):
        t = self.table[: x.shape[0]]
        return ((x + 1).view(2, 16).view(4, 8) * 2, t * x.view(8, 4))


def views_and_slices():
    return ViewsAndSlices(), (torch.randn(8, 4),)
