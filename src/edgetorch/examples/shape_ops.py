"""One model through the shape and indexing operators: cat, split, gather, index,
index_select, where, cumsum, constant_pad_nd, nearest and bilinear upsampling, topk, sort,
repeat, flip, roll, masked_fill, clamp, pow, argmin/argmax, var/std."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class ShapeOps(nn.Module):
    """(2, 4, 8, 8) float -> (mixed float summary, argmax per row, sort order of the rows)."""

    def forward(self, x: torch.Tensor):
        a, b = torch.split(x, [1, 3], dim=1)
        c = torch.cat([b, a], dim=1)
        up = F.interpolate(c, scale_factor=2.0, mode="nearest")  # (2, 4, 16, 16)
        down = F.interpolate(up, size=(8, 8), mode="bilinear", align_corners=False)
        p = F.pad(down, (1, 1, 2, 0), value=0.5)  # (2, 4, 10, 10)
        r = torch.roll(torch.flip(p, dims=[-1]), shifts=(1, -2), dims=(2, 3))
        cs = torch.cumsum(r, dim=-1)
        w = torch.where(cs > 0, cs, -0.5 * cs)
        clipped = torch.clamp(w.masked_fill(w > 3.0, 3.0), -1.0, 2.5)
        powered = torch.pow(clipped, 2) + cs  # rows of cs hold no ties: sort/topk are defined
        vals, _ = torch.topk(cs, k=4, dim=-1)
        order_vals, order = torch.sort(cs, dim=-1, descending=True)
        gathered = torch.gather(powered, -1, order[..., :4])
        picked = torch.index_select(powered, 1, torch.tensor([3, 0]))
        rows = powered[:, torch.tensor([0, 2]), 1:5]
        arg = torch.argmax(cs, dim=-1) - torch.argmin(cs, dim=-1)
        spread = torch.var(powered, dim=-1) + torch.std(r, dim=-1)
        summary = (gathered - vals + order_vals[..., :4]).sum(-1) + vals.repeat(1, 1, 1, 2).mean(-1)
        summary = summary + spread + arg.to(x.dtype)
        summary = summary + picked.mean((-1, -2)).sum(-1)[:, None, None] + rows.mean()
        # squashed to O(1), so a 1e-5 comparison tests more than float32's last bit
        return torch.tanh(0.05 * summary), torch.argmax(powered, dim=-1), order[..., :3]


def shape_ops() -> ShapeOps:
    return ShapeOps().eval()
