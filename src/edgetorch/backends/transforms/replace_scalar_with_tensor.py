"""``ReplaceScalarWithTensorArgPass``: ``add/sub/mul/div.Scalar`` become their ``.Tensor``
forms with the scalar as a one-element ``full`` tensor of the other operand's dtype
(ExecuTorch's ``backends/transforms`` pass of this name), for backends whose kernels only
take tensors. Works on ATen and on Edge graphs."""

from __future__ import annotations

import torch

from ...errors import PassError
from ...exir.dialects._ops import ops as exir_ops
from ...exir.dialects.edge._ops import EdgeOpOverload
from ...exir.pass_base import ExportPass

__all__ = ["ReplaceScalarWithTensorArgPass"]

_edge, _aten = exir_ops.edge.aten, torch.ops.aten


class ReplaceScalarWithTensorArgPass(ExportPass):
    # Edge ops compare equal to their ATen ops: one table, the dialect taken from the node
    default_ops = {getattr(_aten, n).Scalar: getattr(_aten, n).Tensor
                   for n in ("add", "sub", "mul", "div")}

    def __init__(self, scalar_to_tensor_ops: dict | None = None) -> None:
        self.scalar_to_tensor_ops = (scalar_to_tensor_ops if scalar_to_tensor_ops is not None
                                     else self.default_ops)
        super().__init__()

    def _replacement(self, op, args, kwargs, meta):
        edge = isinstance(op, EdgeOpOverload)
        full = _edge.full.default if edge else _aten.full.default
        target = self.scalar_to_tensor_ops[op]
        if edge and not isinstance(target, EdgeOpOverload):
            target = getattr(getattr(_edge, target._schema.name.split("::")[1]),
                             target._overloadname)
        x = args[0].to_tensor()
        scalar = super().call_operator(full, ((1,), float(args[1])),
                                       {"dtype": x.dtype, "device": x.device}, meta)
        return super().call_operator(target, (args[0], scalar, *args[2:]), kwargs, meta)

    def call_operator(self, op, args, kwargs, meta):
        if op not in self.scalar_to_tensor_ops:
            return super().call_operator(op, args, kwargs, meta)
        if len(args) not in (2, 3):
            raise PassError(f"{op} takes 2 or 3 arguments, got {len(args)}")
        # with alpha, only Edge add/sub without an alpha keyword are rewritten (ExecuTorch's)
        if len(args) == 3 and (not isinstance(op, EdgeOpOverload) or "alpha" in kwargs
                               or op not in (_aten.add.Scalar, _aten.sub.Scalar)):
            return super().call_operator(op, args, kwargs, meta)
        return self._replacement(op, args, kwargs, meta)
