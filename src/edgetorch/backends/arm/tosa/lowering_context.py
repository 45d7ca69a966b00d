"""``TosaLoweringContext``: the TOSA specification (and shape environment) a lowering runs under.

ExecuTorch's Arm passes and tests enter ``with TosaLoweringContext(spec):`` around a lowering and
read the active spec back with ``get_context_spec()`` instead of threading it through every call.
Context variables make it per thread and per task, and nested contexts restore the outer one on
exit. Torch-free (the shape environment is only stored).
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

from ....errors import LoweringContextError

if TYPE_CHECKING:
    from .specification import TosaSpecification


class TosaLoweringContext:
    """``with TosaLoweringContext(spec, shape_env=None): ...`` makes ``spec`` the active one."""

    tosa_spec_var: contextvars.ContextVar = contextvars.ContextVar("tosa_spec")
    shape_env_var: contextvars.ContextVar = contextvars.ContextVar("shape_env")

    def __init__(self, spec: TosaSpecification, shape_env: Any = None) -> None:
        self.spec = spec
        self.shape_env = shape_env
        self._tokens: list[tuple[contextvars.Token, contextvars.Token]] = []

    def __enter__(self) -> TosaLoweringContext:
        self._tokens.append((TosaLoweringContext.tosa_spec_var.set(self.spec),
                             TosaLoweringContext.shape_env_var.set(self.shape_env)))
        return self

    def __exit__(self, *exc: object) -> None:
        spec_token, env_token = self._tokens.pop()
        TosaLoweringContext.shape_env_var.reset(env_token)
        TosaLoweringContext.tosa_spec_var.reset(spec_token)


def get_context_spec() -> TosaSpecification:
    """The spec of the innermost active ``TosaLoweringContext``."""
    try:
        return TosaLoweringContext.tosa_spec_var.get()
    except LookupError:
        raise LoweringContextError(
            "Function must be executed within a TosaLoweringContext") from None


def get_context_shape_env() -> Any:
    """The shape environment of the innermost active ``TosaLoweringContext``."""
    try:
        shape_env = TosaLoweringContext.shape_env_var.get()
    except LookupError:
        raise LoweringContextError(
            "Function must be executed within a TosaLoweringContext") from None
    if shape_env is None:
        raise LoweringContextError("No ShapeEnv set in the current TosaLoweringContext")
    return shape_env
