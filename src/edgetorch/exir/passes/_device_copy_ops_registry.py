"""The host/device copy operators ``PropagateDevicePass`` inserts at delegate boundaries:
``et_copy::_h2d_copy`` and ``et_copy::_d2h_copy`` (ExecuTorch's names and schemas), each with
its ``.out`` variant, which is what a ``.pte`` calls. At trace time both are a clone (every
tensor is on the host); at run time the ``out`` of ``_h2d_copy`` (and the ``self`` of
``_d2h_copy``) lives in a buffer planned on the device."""

from __future__ import annotations

import torch

_LIB = torch.library.Library("et_copy", "DEF")
for _name in ("_h2d_copy", "_d2h_copy"):
    _LIB.define(f"{_name}(Tensor self) -> Tensor")
    _LIB.define(f"{_name}.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
    _LIB.impl(_name, lambda self: self.clone(), "CompositeImplicitAutograd")
    _LIB.impl(f"{_name}.out", lambda self, *, out: out.copy_(self), "CompositeImplicitAutograd")
