"""Memory planning for the outputs of the XNNPACK graph's float convolutions and pools.

XNNPACK's runtime places every intermediate tensor in one arena, reusing memory once a
tensor's last reader has run. Here each convolution or pooling node writes into a buffer of
its own by default, so a forward pass of MobileNetV2 or ResNet-18 writes ~30 MB of distinct
memory: every layer's output goes to memory the previous layers pushed out of cache, and the
next layer reads it back from DRAM (MobileNetV2's 1x1 convolutions ran 1.5x slower in the
graph than alone). :func:`plan_outputs` gives those outputs places in one arena instead, by
the liveness of each value, so the few megabytes that are live at once stay in cache.

Liveness is conservative: a node of another kind may return a view of an input (a reshape,
a transpose) or write into one, so its inputs stay live as long as its outputs do; the
graph's external outputs stay live to the end (the runtime copies them out after the last
node). Only values whose declared dims and dtype give their size are planned; a node that
meets another size at run time (dynamic shapes) uses a buffer of its own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import schema as x
from .nodes import node_value_ids

# Node kinds whose float rule (nodes_nn) writes its result into a planned buffer.
PLANNED = (x.XNNConv2d, x.XNNDepthwiseConv2d, x.XNNMaxPooling2d)
ALIGN = 64  # bytes: a cache line (and AVX-512 vector)


def plan_outputs(nodes: list[x.XNode], ctx: Any, external: set[int]) -> dict[int, np.ndarray]:
    """Output slot -> flat uint8 buffer (a slice of one arena) for each planned node's output
    (``ctx.out_plan`` for the rules). ``external`` holds the graph's external output slots
    (and may hold its inputs)."""
    end = len(nodes)
    last: dict[int, int] = {}  # slot -> index of the last node that reads it (or a view of it)
    io: list[tuple[list[int], list[int]]] = []
    for k, node in enumerate(nodes):
        ins, outs = node_value_ids(node.xnode_union)
        si = [s for s in (ctx._slots.get(v) for v in ins) if s is not None]
        so = [s for s in (ctx._slots.get(v) for v in outs) if s is not None]
        io.append((si, so))
        for s in si:
            last[s] = k
    for s in external:
        last[s] = end
    # a node of another kind may alias its inputs into its outputs: extend backwards
    for k in range(end - 1, -1, -1):
        if isinstance(nodes[k].xnode_union, PLANNED):
            continue
        si, so = io[k]
        live = max((last.get(s, k) for s in so), default=k)
        for s in si:
            last[s] = max(last.get(s, k), live)
    quant = getattr(ctx, "quant", None) or (lambda _: None)  # QCtx knows quantization
    blocks: list[tuple[int, int, int, int]] = []  # (start k, last k, slot, nbytes)
    for k, node in enumerate(nodes):
        if not isinstance(node.xnode_union, PLANNED):
            continue
        si, so = io[k]
        if len(so) != 1 or so[0] in external or ctx.const(so[0]) is not None:
            continue
        s = so[0]
        dtype, dims = ctx.dtype(s), ctx.dims(s)
        if dtype.kind != "f" or not dims or any(quant(v) is not None for v in (s, *si)):
            continue  # (quantized nodes have rules of their own)
        nbytes = math.prod(dims) * dtype.itemsize
        if nbytes == 0:
            continue
        blocks.append((k, last.get(s, k), s, nbytes))
    placed: list[tuple[int, int, int]] = []  # (offset, nbytes, last k) of live blocks
    offsets: dict[int, tuple[int, int]] = {}
    size = 0
    for start, stop, s, nbytes in blocks:
        placed = [p for p in placed if p[2] >= start]  # freed: last read before this node
        offset = 0
        for o, n, _ in sorted(placed):  # first fit between the live blocks
            if offset + nbytes <= o:
                break
            offset = max(offset, -(-(o + n) // ALIGN) * ALIGN)
        placed.append((offset, nbytes, stop))
        offsets[s] = (offset, nbytes)
        size = max(size, offset + nbytes)
    arena = np.empty(size + ALIGN, np.uint8)
    skew = (-arena.ctypes.data) % ALIGN
    return {s: arena[skew + o : skew + o + n] for s, (o, n) in offsets.items()}
