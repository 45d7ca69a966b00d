"""ExecuTorch's ``exir.schema``: the ``program.fbs`` dataclasses (``Program``,
``ExecutionPlan``, ``Tensor``, ``DeviceType`` ...), defined once in ``edgetorch.schema``."""

from ..schema import program as _program

__all__ = [n for n in vars(_program) if not n.startswith("_") and n[0].isupper()]
globals().update({n: getattr(_program, n) for n in __all__})
