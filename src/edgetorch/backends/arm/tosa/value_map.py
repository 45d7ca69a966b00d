"""Where each Edge node's quantized value lives in the TOSA graph the lowering made.

The quantization debugger reads the simulation's per-operator outputs (``runtime.tosa_sim``
logs them by TOSA tensor name) back as the Edge nodes' values. The ``.tosa`` carries no
operator locations (ExecuTorch 1.5.1 writes none, and the bytes stay its), so the map comes
from the lowering itself: lowering the same partition again gives the same graph, and for
every quantize node the tensor holding its int8 (or int16) codes -- the operator that computes
the quantized value, e.g. a convolution's output RESCALE, which a fused ReLU's quantizer sets
-- with the quantizer's scale and zero point and the layout the tensor has (NHWC inside
convolutional graphs, torch's own order elsewhere).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch.export import ExportedProgram
from torch.fx import Node

from .lowering import NHWC, _Lowering
from .operator_support import Q_OPS
from .specification import TosaSpecification
from .tosa_ir import TOp, serialize


@dataclass(frozen=True)
class TosaValue:
    """An Edge node's value in the TOSA graph: ``float = (codes - zero_point) * scale``,
    then read in torch's layout: the tensor's axes are torch's permuted by ``perm``
    (``None``: the same elements in a different shape, a reshape)."""

    tensor: str
    shape: tuple[int, ...]  # the Edge node's (torch) shape
    perm: tuple[int, ...] | None
    scale: float
    zero_point: int

    def to_torch_layout(self, codes):
        """``codes`` (the tensor's raw values, a NumPy array) as float in torch's layout."""
        import numpy as np

        value = (codes.astype(np.float32) - np.float32(self.zero_point)) * np.float32(self.scale)
        if self.perm is not None:
            return value.reshape([self.shape[i] for i in self.perm]).transpose(
                np.argsort(self.perm))
        return value.reshape(self.shape)


def _layout(shape: list[int], tosa_shape: list[int], nhwc: bool
            ) -> tuple[int, ...] | None | bool:
    """The permutation from torch's ``shape`` to the tensor's, None for a plain reshape, or
    False when the tensor holds the values in an order this cannot tell."""
    identity = tuple(range(len(shape)))
    as_nhwc = [shape[i] for i in NHWC] if len(shape) == 4 else None
    if nhwc and tosa_shape == as_nhwc:
        return tuple(NHWC)
    if tosa_shape == shape:
        return identity
    if tosa_shape == as_nhwc:
        return tuple(NHWC)
    if math.prod(tosa_shape) != math.prod(shape) or sorted(tosa_shape) == sorted(shape):
        return False  # another size, or a permutation moved here by the lowering
    same_order = not nhwc or (len(shape) == 4 and (shape[1] == 1 or shape[2] * shape[3] == 1))
    return None if same_order else False


def tosa_value_map(ep: ExportedProgram, spec: TosaSpecification
                   ) -> tuple[bytes, dict[str, TosaValue]]:
    """The TOSA flatbuffer of the partition ``ep`` (what ``lower_to_tosa`` returns) and
    ``{Edge node name: TosaValue}`` for every node whose output is quantized inside it."""
    lowering = _Lowering(ep, spec)
    nodes, outputs = lowering.run()
    emitted = {id(n) for n in nodes if isinstance(n, TOp)}
    found: dict[str, TosaValue] = {}
    for q in ep.graph_module.graph.nodes:
        if q.op != "call_function" or q.target not in Q_OPS or not q.args:
            continue
        src = q.args[0]
        value = lowering.values.get(q)
        scale, zp = (list(q.args) + [None, None])[1:3]
        if not isinstance(src, Node) or src.op != "call_function" or value is None \
                or id(value.t) not in emitted or not isinstance(scale, (int, float)) \
                or not isinstance(zp, int) or not hasattr(src.meta.get("val"), "shape"):
            continue
        shape = [int(d) for d in src.meta["val"].shape]
        nhwc = value.nhwc and id(value.t) not in lowering.nchw_tail
        perm = _layout(shape, list(value.t.shape), nhwc)
        if perm is not False:
            found[src.name] = TosaValue(value.t.name, tuple(shape), perm, float(scale), zp)
    return serialize(nodes, outputs), found
