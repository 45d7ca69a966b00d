"""to_edge reuses torch's materialized default decomposition table between calls; an operator
registered after the first call must still be decomposed as torch's fresh table would, and
the lowered program must still match eager."""

from __future__ import annotations

import numpy as np
import torch

from edgetorch.exir import to_edge
from edgetorch.runtime import Runtime


class _Twice(torch.nn.Module):
    def forward(self, x):
        return torch.ops.perfb_test.twice_plus_one(x)


def _targets(ep) -> set[str]:
    return {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}


def test_an_operator_registered_after_the_first_to_edge_is_still_decomposed():
    x = torch.randn(3, 4)
    to_edge(torch.export.export(torch.nn.ReLU(), (x,)))  # fills the cache

    lib = torch.library.Library("perfb_test", "DEF")  # noqa: TOR901
    lib.define("twice_plus_one(Tensor x) -> Tensor")
    lib.impl("twice_plus_one", lambda t: t * 2 + 1, "CompositeImplicitAutograd")
    try:
        edge = to_edge(torch.export.export(_Twice(), (x,)))
        targets = _targets(edge.exported_program())
        assert not any("twice_plus_one" in t for t in targets), targets
        buffer = edge.to_executorch().buffer
        out = Runtime.get().load_program(buffer).load_method("forward").execute([x.numpy()])[0]
        np.testing.assert_allclose(out, (x * 2 + 1).numpy(), rtol=1e-6)
    finally:
        del lib
