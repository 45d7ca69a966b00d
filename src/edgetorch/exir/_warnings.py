"""Decorators that mark an API deprecated or experimental (ExecuTorch's API life cycle).

``@deprecated("message")`` and ``@experimental("message")`` behave as ExecuTorch's
``exir._warnings`` (PEP 702's ``deprecated``): calling the function or method, instantiating the
class, or subclassing it emits the message as a ``DeprecationWarning`` (``ExperimentalWarning``,
a ``DeprecationWarning`` subclass, for experimental APIs; so both are hidden by Python's default
filters outside ``__main__`` and tests), and the object gets ``__deprecated__ = message``.

The life-cycle document asks a deprecation to point at the replacement and say when the API
goes away; ``replacement=`` and ``removal_version=`` write that into the message::

    @deprecated("to_edge_legacy is deprecated.", replacement="to_edge",
                removal_version="0.4")
    # DeprecationWarning: to_edge_legacy is deprecated. Use to_edge instead. It will be
    # removed in edgetorch 0.4.

Standard library only (ExecuTorch's uses ``typing_extensions``, which this module does not
need).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ExperimentalWarning", "deprecated", "experimental"]

T = TypeVar("T")


class ExperimentalWarning(DeprecationWarning):
    """Emitted when calling an experimental API (filtered like DeprecationWarning)."""


class deprecated:  # noqa: N801  (the decorator's name is ExecuTorch's / PEP 702's)
    """Mark a class, function or method deprecated; see the module docstring."""

    default_category: type[Warning] = DeprecationWarning

    def __init__(self, message: str, /, *, category: type[Warning] | None = DeprecationWarning,
                 stacklevel: int = 1, replacement: str | None = None,
                 removal_version: str | None = None) -> None:
        if not isinstance(message, str):
            raise TypeError(f"expected the deprecation message as a str, got {type(message).__name__}"
                            " (write @deprecated('message'), not @deprecated)")
        parts = [message]
        if replacement:
            parts.append(f"Use {replacement} instead.")
        if removal_version:
            parts.append(f"It will be removed in edgetorch {removal_version}.")
        self.message = " ".join(parts)
        self.category = category
        self.stacklevel = stacklevel

    def __call__(self, obj: T) -> T:
        message, category, stacklevel = self.message, self.category, self.stacklevel
        if category is None:  # PEP 702: only mark the object, warn nothing
            obj.__deprecated__ = message  # type: ignore[attr-defined]
            return obj
        if isinstance(obj, type):
            return self._wrap_class(obj)
        if not callable(obj):
            raise TypeError(f"@{type(self).__name__} decorates classes and callables, "
                            f"not {type(obj).__name__}")

        @functools.wraps(obj)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, category=category, stacklevel=stacklevel + 1)
            return obj(*args, **kwargs)

        wrapper.__deprecated__ = message  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    def _wrap_class(self, cls: type) -> Any:
        message, category, stacklevel = self.message, self.category, self.stacklevel
        assert category is not None
        original_new = cls.__new__
        has_own_init = cls.__init__ is not object.__init__

        @functools.wraps(original_new)
        def __new__(klass: type, *args: Any, **kwargs: Any) -> Any:
            if klass is cls:
                warnings.warn(message, category=category, stacklevel=stacklevel + 1)
            if original_new is not object.__new__:
                return original_new(klass, *args, **kwargs)
            if (args or kwargs) and not has_own_init:
                raise TypeError(f"{klass.__name__}() takes no arguments")
            return original_new(klass)

        cls.__new__ = staticmethod(__new__)  # type: ignore[assignment]
        original_init_subclass = cls.__dict__.get("__init_subclass__")
        parent_init_subclass = super(cls, cls).__init_subclass__  # type: ignore[misc]

        def __init_subclass__(*args: Any, **kwargs: Any) -> None:
            warnings.warn(message, category=category, stacklevel=stacklevel + 1)
            if original_init_subclass is not None:
                return original_init_subclass.__func__(*args, **kwargs)
            return parent_init_subclass(*args[1:], **kwargs)

        cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
        cls.__deprecated__ = message  # type: ignore[attr-defined]
        return cls


class experimental(deprecated):  # noqa: N801
    """Mark a class, function or method experimental: it may change or go without notice."""

    def __init__(self, message: str, /, *, category: type[Warning] | None = ExperimentalWarning,
                 stacklevel: int = 1) -> None:
        super().__init__(message, category=category, stacklevel=stacklevel)


def is_marked(obj: Callable[..., Any] | type) -> str | None:
    """The deprecation/experimental message of ``obj``, or None (for docs and tests)."""
    target = inspect.unwrap(obj) if not isinstance(obj, type) else obj
    return getattr(obj, "__deprecated__", getattr(target, "__deprecated__", None))
