"""The load passes against the kernels they stand in for: one method of each from the same
program (``optimize=True`` and ``optimize=False``), and the check that they give the same bits
(and eager PyTorch's numbers)."""

from __future__ import annotations

import numpy as np
import torch

from edgetorch.exir import to_edge
from edgetorch.runtime import Runtime


def fast_and_slow(model, inputs, passes=True):
    """(method with the load passes ``passes``, method running every kernel)."""
    pte = to_edge(torch.export.export(model, inputs)).to_executorch().buffer
    program = Runtime.get().load_program(pte)
    return program.load_method("forward", optimize=passes), \
        program.load_method("forward", optimize=False)


def assert_same_bits_and_eager(fast, slow, model, inputs, rtol=1e-4, atol=1e-5):
    """Two calls (the second on the memory the first left behind) give the kernels' bits;
    the results match eager PyTorch."""
    args = [x.numpy() for x in inputs]
    for _ in range(2):
        got, want = fast.execute(args), slow.execute(args)
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()
    with torch.no_grad():
        eager = model(*inputs)
    eager = [eager] if isinstance(eager, torch.Tensor) else list(eager)
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g, e.numpy(), rtol=rtol, atol=atol)
