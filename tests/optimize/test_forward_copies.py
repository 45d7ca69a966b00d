"""Copies forwarded to the instruction computing their source (runtime/optimize/forward_copies.py):
the same bits as the closures, and no forwarding where the source is read elsewhere."""

from __future__ import annotations

import torch
from optimized_pair import assert_same_bits_and_eager, fast_and_slow

from edgetorch.runtime.optimize import PASSES


def _stepless(method) -> list[str]:
    return [r.name for r in method.records if r.index not in method._steps[1]]


class _Chain(torch.nn.Module):
    """Attention-style copies: permute, expand to the same shape, clone, then a product."""

    def forward(self, q, k):
        q = q.permute(0, 2, 1, 3).expand(2, 4, 6, 8).contiguous() * 1.5
        k = k.permute(0, 2, 3, 1).expand(2, 4, 8, 6).clone()
        return torch.matmul(q, k).softmax(-1)


class _ReadTwice(torch.nn.Module):
    """The copied tensor is also read by another instruction: nothing is forwarded to it."""

    def forward(self, x):
        y = x * 2.0
        z = y.clone()
        return z + 1.0, y - 1.0


def _check(model, inputs):
    fast, slow = fast_and_slow(model, inputs)
    assert_same_bits_and_eager(fast, slow, model, inputs, rtol=1e-5, atol=1e-6)
    return fast


def test_copies_forward_to_their_producers_with_the_same_bits():
    inputs = (torch.randn(2, 6, 4, 8), torch.randn(2, 6, 4, 8))
    fast = _check(_Chain().eval(), inputs)
    without, _ = fast_and_slow(_Chain().eval(), inputs, set(PASSES.names()) - {"forward_copies"})
    forwarded = set(_stepless(fast)) - set(_stepless(without))
    assert forwarded and all("copy" in n or "clone" in n for n in forwarded)
    assert fast.load_report["forward_copies"].changed >= 2 * len(forwarded)


def test_no_forwarding_when_the_source_is_read_elsewhere():
    x = torch.randn(3, 5)
    fast = _check(_ReadTwice().eval(), (x,))
    assert not any("clone" in n or "copy" in n for n in _stepless(fast))
