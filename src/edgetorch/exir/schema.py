"""ExecuTorch's ``exir.schema``: the ``program.fbs`` dataclasses (``Program``,
``ExecutionPlan``, ``Tensor``, ``DeviceType`` ...), defined once in ``edgetorch.schema``."""

from ..schema import program as S

__all__ = [n for n in vars(S) if not n.startswith("_") and n[0].isupper()]
globals().update({n: getattr(S, n) for n in __all__})
