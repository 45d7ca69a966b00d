"""``DecomposeChannelsLastPass`` (ExecuTorch's name): every ``channels_last`` dialect operator
becomes ``permute_copy -> the ATen operator -> permute_copy``, the CPU fallback for the part of
a graph no backend took (the portable kernels then run it)."""

from __future__ import annotations

import operator

from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass
from . import channels_last_ops  # noqa: F401  (defines the dialect's operators)

_TO_NCHW = [0, 3, 1, 2]
_TO_NHWC = [0, 2, 3, 1]
_CL, _A = exir_ops.edge.channels_last, exir_ops.edge.aten

# A dialect operator -> (the Edge ATen operator it stands for, how many of its results the
# dialect operator returns). Max pooling runs as max_pool2d_with_indices, whose indices
# (flat h * W + w positions) mean the same in either layout.
_DECOMPOSITIONS = {
    _CL.convolution.default: (_A.convolution.default, 1),
    _CL.avg_pool2d.default: (_A.avg_pool2d.default, 1),
    _CL.adaptive_avg_pool2d.default: (_A._adaptive_avg_pool2d.default, 1),
    _CL.upsample_bilinear2d.default: (_A.upsample_bilinear2d.vec, 1),
    _CL.upsample_nearest2d.default: (_A.upsample_nearest2d.vec, 1),
    _CL.grid_sampler_2d.default: (_A.grid_sampler_2d.default, 1),
    _CL.max_pool2d.default: (_A.max_pool2d_with_indices.default, 1),
    _CL.max_pool2d_with_indices.default: (_A.max_pool2d_with_indices.default, 2),
}
_MULTI_RESULT = {_A.max_pool2d_with_indices.default}


class DecomposeChannelsLastPass(ExportPass):
    """Rewrite ``channels_last`` operators on (N, H, W, C) data as the ATen operator on the
    activation permuted to (N, C, H, W), its results permuted back."""

    def call_operator(self, op, args, kwargs, meta):
        call = super().call_operator
        if op == _CL.permute_copy.default:
            return call(_A.permute_copy.default, args, kwargs, meta)
        if op not in _DECOMPOSITIONS:
            return call(op, args, kwargs, meta)
        aten_op, results = _DECOMPOSITIONS[op]
        nchw = call(_A.permute_copy.default, (args[0], _TO_NCHW), {}, meta)
        out = call(aten_op, (nchw, *args[1:]), kwargs, meta)
        parts = ([call(operator.getitem, (out, i), {}, meta) for i in range(results)]
                 if aten_op in _MULTI_RESULT else [out])
        nhwc = tuple(call(_A.permute_copy.default, (p, _TO_NHWC), {}, meta) for p in parts)
        return nhwc[0] if results == 1 else nhwc
