"""Scratch-buffer sizes of the CMSIS-NN kernels behind each ``cortex_m`` op (ExecuTorch's
``scratch_buffer_sizes.py``): the op's trailing ``memory.alloc`` arguments get these sizes."""

from __future__ import annotations

import torch
from torch.fx import Node

from ....exir import memory
from ....exir.dialects._ops import ops as exir_ops
from ..library import cmsis_nn
from .graph_utils import fake

cm = exir_ops.edge.cortex_m


def _shape(node: Node) -> list[int]:
    return list(fake(node).shape)


def _conv_dims(node: Node, nhwc: bool, dilation_idx: int = 5):
    x, w = node.args[0], node.args[1]
    n, c, h, wd = _shape(x)
    on, oc, oh, ow = _shape(node)
    if nhwc:
        n, h, wd, c = _shape(x)
        on, oh, ow, oc = _shape(node)
    pair = lambda v: (int(v[0]), int(v[1]))  # noqa: E731
    return dict(input_nhwc=(n, h, wd, c), output_nhwc=(on, oh, ow, oc),
                padding_hw=pair(node.args[4]), stride_hw=pair(node.args[3]),
                dilation_hw=pair(node.args[dilation_idx])), _shape(w)


def _conv(backend, node, nhwc=False):
    dims, w = _conv_dims(node, nhwc)
    return [cmsis_nn.convolve_wrapper_buffer_size(backend, filter_nhwc=tuple(w), **dims)]


def _depthwise(backend, node, nhwc=False):
    dims, w = _conv_dims(node, nhwc)
    return [cmsis_nn.depthwise_conv_wrapper_buffer_size(
        backend, filter_nhwc=(w[3], w[1], w[2], 1), **dims)]


def _transpose_conv(backend, node, nhwc=False):
    dims, w = _conv_dims(node, nhwc, dilation_idx=6)
    return [cmsis_nn.transpose_conv_buffer_size(
                backend, input_nhwc=dims["input_nhwc"], filter_nhwc=tuple(w),
                output_nhwc=dims["output_nhwc"], stride_hw=dims["stride_hw"]),
            cmsis_nn.transpose_conv_reverse_conv_buffer_size(
                backend, input_nhwc=dims["input_nhwc"], filter_nhwc=tuple(w),
                stride_hw=dims["stride_hw"])]


def _avg_pool(backend, node, nhwc=False):
    c = _shape(node.args[0])[3 if nhwc else 1]
    out_w = _shape(node)[2 if nhwc else 3]
    return [cmsis_nn.avgpool_buffer_size(backend, dim_dst_width=out_w, ch_src=c)]


def _batch_matmul(backend, node):
    _, cols, inner = _shape(node.args[2])
    return [cmsis_nn.fully_connected_buffer_size(backend, filter_nhwc=(inner, -1, -1, cols))]


SIZERS = {
    cm.quantized_conv2d.default: _conv,
    cm.quantized_conv2d_nhwc.default: lambda b, n: _conv(b, n, True),
    cm.quantized_depthwise_conv2d.default: _depthwise,
    cm.quantized_depthwise_conv2d_nhwc.default: lambda b, n: _depthwise(b, n, True),
    cm.quantized_transpose_conv2d.default: _transpose_conv,
    cm.quantized_transpose_conv2d_nhwc.default: lambda b, n: _transpose_conv(b, n, True),
    cm.quantized_avg_pool2d.default: _avg_pool,
    cm.quantized_avg_pool2d_nhwc.default: lambda b, n: _avg_pool(b, n, True),
    cm.quantized_batch_matmul.default: _batch_matmul,
}


def set_scratch_sizes(node: Node, backend: cmsis_nn.Backend) -> None:
    sizer = SIZERS.get(node.target)
    if sizer is None:
        return
    sizes = sizer(backend, node)
    for i, size in enumerate(reversed(sizes)):
        alloc = node.args[-(i + 1)]
        if not isinstance(alloc, Node) or alloc.target is not memory.alloc:
            raise RuntimeError(f"{node.name}: expected a scratch memory.alloc as argument "
                               f"{len(node.args) - 1 - i}, got {alloc}")
        alloc.args = (((int(size),), torch.uint8),)
        alloc.meta["val"] = torch.empty((int(size),), dtype=torch.uint8, device="meta")
