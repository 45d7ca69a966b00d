"""``SpecPropPass`` at ExecuTorch's path (``exir.passes.spec_prop_pass``)."""

from .spec_prop import SpecPropPass

__all__ = ["SpecPropPass"]
