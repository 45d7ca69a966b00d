"""A symbolic size given where the schema says ``Tensor`` becomes a 0-d tensor
(ExecuTorch's ``exir.passes.sym_to_tensor_pass``).

torch's dispatcher turns ``add.Tensor(x, s)`` with a ``SymInt`` ``s`` into a tensor on its
own, but the runtime calls kernels by their schema: the pass inserts
``aten.scalar_tensor(s, dtype=...)`` before such a use (int32 for a ``SymInt``, float32 for a
``SymFloat``, bool for a ``SymBool``, as ExecuTorch does)."""

from __future__ import annotations

from typing import Any

import torch

from ..pass_base import ExportPass, ProxyValue, map_args

_DTYPES = {torch.SymInt: torch.int32, torch.SymFloat: torch.float32, torch.SymBool: torch.bool}


class SymToTensorPass(ExportPass):
    """Wrap symbolic scalars passed as ``Tensor`` arguments in ``aten.scalar_tensor``."""

    def call_operator(self, op: Any, args: tuple, kwargs: dict, meta: Any) -> Any:
        if getattr(op, "_schema", None) is None:
            return super().call_operator(op, args, kwargs, meta)

        def to_tensor(value: Any, arg: torch.Argument) -> Any:
            if not (isinstance(value, ProxyValue) and not value.is_tensor()
                    and isinstance(arg.type, torch.TensorType)
                    and type(value.data) in _DTYPES):
                return value
            return super(SymToTensorPass, self).call_operator(
                torch.ops.aten.scalar_tensor.default, (value,),
                {"dtype": _DTYPES[type(value.data)]}, meta)

        args, kwargs = map_args(op, to_tensor, args, kwargs)
        return super().call_operator(op, args, kwargs, meta)
