"""NumPy's floating-point warnings off for a whole run, with public API only.

torch has no floating-point warnings (inf and nan are values), and neither do the kernels:
each silences NumPy where it computes. Prepared steps and XNNPACK's nodes are bare NumPy
calls, so a method's plain loop and a delegate's run are silenced once, around the whole run:
``np.errstate(all="ignore")`` costs about a microsecond per entry, a tenth of a tiny model's
call. NumPy keeps its error state in a context variable, so a context copied once inside
``np.errstate`` (``contextvars.copy_context``) runs any call silenced for the price of
``Context.run``. A :class:`Quiet` belongs to one method or delegate (a context cannot be
entered twice at once, and one of them runs one call at a time); a run already inside one
(a delegate called from a method's loop) does not enter another. The copied context holds
the other context variables as they were when it was made; no kernel reads any.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import numpy as np

_INSIDE = contextvars.ContextVar("edgetorch_quiet", default=False)


class Quiet:
    """``run(fn, *args)``: ``fn(*args)`` with NumPy's floating-point warnings off."""

    __slots__ = ("_context",)

    def __init__(self) -> None:
        with np.errstate(all="ignore"):
            token = _INSIDE.set(True)
            try:
                self._context = contextvars.copy_context()
            finally:
                _INSIDE.reset(token)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if _INSIDE.get():
            return fn(*args)
        return self._context.run(fn, *args)
