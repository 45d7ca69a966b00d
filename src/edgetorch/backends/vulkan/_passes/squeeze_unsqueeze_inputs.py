"""``SqueezeUnsqueezeInputs``: ReLU and GELU on a tensor with size-1 dims run on the tensor
with those dims squeezed (viewed back afterwards), which packs better on the GPU."""

from __future__ import annotations

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass


class SqueezeUnsqueezeInputs(ExportPass):
    _squeezable_ops = {exir_ops.edge.aten.relu.default, exir_ops.edge.aten.gelu.default}

    def should_squeeze(self, op, shape: list[int]) -> bool:
        if len(shape) == 3:
            return shape[1] == 1 and shape[0] > 1
        if len(shape) == 4:
            n, c, h, w = shape
            if n == c == h == 1:  # only the width is not 1
                return False
            if n == c == 1 and h > 1 and w > 1:
                return False
            if n == 1 and c > 1 and h > 1 and w > 1:
                return False
            return 1 in shape[:-1]
        return False  # no extra orchestration ops otherwise

    def call_operator(self, op, args, kwargs, meta):
        if op not in self._squeezable_ops:
            return super().call_operator(op, args, kwargs, meta)
        in_shape = args[0].node.meta["val"].shape
        if not self.should_squeeze(op, in_shape):
            return super().call_operator(op, args, kwargs, meta)
        squeezed = list(in_shape)
        while len(squeezed) > 2 and 1 in squeezed:
            squeezed.remove(1)
        view = exir_ops.edge.aten.view_copy.default
        x = super().call_operator(view, (args[0], squeezed), kwargs, meta)
        y = super().call_operator(op, (x, *args[1:]), kwargs, meta)
        return super().call_operator(view, (y, list(meta["val"].shape)), kwargs, meta)
