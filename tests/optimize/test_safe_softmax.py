"""The safe-softmax tail of an attention as one step (runtime/optimize/safe_softmax.py): the same bits
as the six instructions it replaces, fully masked rows included, and eager PyTorch's numbers."""

from __future__ import annotations

import pytest
import torch
from optimized_pair import assert_same_bits_and_eager, fast_and_slow

from edgetorch.kernels import accel

pytest.importorskip("numba")


class _Attention(torch.nn.Module):
    """SDPA with a boolean mask; the mask is an input, so rows can be hidden completely."""

    def forward(self, q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask) * 2.0


def _inputs(masked_rows):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 8, generator=g)
    k, v = (torch.randn(2, 3, 7, 8, generator=g) for _ in range(2))
    mask = torch.rand(2, 3, 5, 7, generator=g) > 0.3
    mask[..., 0] = True  # every row sees a key ...
    for b, h, r in masked_rows:  # ... but these, which see none
        mask[b, h, r] = False
    return q, k, v, mask


def _fused(method) -> int:
    return sum("masked_rows_zero" in repr(s) for s in method._steps[0])


@pytest.mark.parametrize("masked", [[], [(0, 0, 0), (1, 2, 4), (1, 1, 2)]])
def test_safe_softmax_tail_is_one_step_with_the_same_bits(masked):
    model, inputs = _Attention().eval(), _inputs(masked)
    with accel.enabled():
        fast, slow = fast_and_slow(model, inputs)
        assert _fused(fast) == 1
        # the six instructions leave at most the full_like behind
        assert len(fast._steps[0]) <= len(slow.records) - 4
        assert_same_bits_and_eager(fast, slow, model, inputs, rtol=1e-5, atol=1e-6)
    if masked:
        out = fast.execute([x.numpy() for x in inputs])[0]
        b, h, r = masked[0]
        assert (out[b, h, r] == 0).all() and not (out[b, h, r] != 0).any()


def test_without_the_compiled_loops_the_six_instructions_run():
    model, inputs = _Attention().eval(), _inputs([(0, 1, 3)])
    with accel.disabled():
        fast, slow = fast_and_slow(model, inputs)
        assert _fused(fast) == 0
        assert_same_bits_and_eager(fast, slow, model, inputs, rtol=1e-5, atol=1e-6)
