"""Optional compiled kernels: the ``accel`` extra (numba).

NumPy is the runtime's only required numeric dependency and every kernel has a NumPy path.
A few kernels are bound by how many passes NumPy needs over memory (depthwise convolution:
one pass per filter tap; 4-bit weight GEMV: an unpack pass before the BLAS call); for those a
loop compiled with numba does the work in one pass. ``pip install edgetorch[accel]`` adds numba;
without it (or with ``EDGETORCH_ACCEL=0`` in the environment) the NumPy path runs, with the
same results (the tests compare the two).

Kernels declare their loops with :func:`jit`; numba is imported and the loop compiled on the
first call (``cache=True``: later processes load the machine code from numba's cache), so
importing the runtime or loading a program never pays numba's import or compile time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

ENV_VAR = "EDGETORCH_ACCEL"

_lock = threading.Lock()
_forced: bool | None = None  # set by enabled()/disabled() (tests, benchmarks)
_found: bool | None = None  # numba importable and not switched off (decided once)


def available() -> bool:
    """True when compiled kernels will be used: numba is installed and not switched off.

    ``EDGETORCH_ACCEL`` is read once, on the first call (kernels ask on every call, and an
    environment lookup costs ~2 us); :func:`reset` reads it again."""
    if _forced is not None:
        return _forced
    if _found is None:
        return _decide()
    return _found


def _decide() -> bool:
    global _found
    off = os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "off", "no")
    _found = not off and importlib.util.find_spec("numba") is not None
    return _found


def reset() -> None:
    """Forget the decision of :func:`available` (the next call reads the environment)."""
    global _found
    _found = None


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the NumPy paths inside the block (tests compare them with the compiled ones)."""
    global _forced
    before, _forced = _forced, False
    try:
        yield
    finally:
        _forced = before


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """Use the compiled paths inside the block; raises ImportError when numba is missing."""
    global _forced
    if importlib.util.find_spec("numba") is None:
        raise ImportError("the compiled kernels need numba: pip install 'edgetorch[accel]'")
    before, _forced = _forced, True
    try:
        yield
    finally:
        _forced = before


class LazyJit:
    """A Python loop function compiled by numba on its first call.

    Call it only when :func:`available` is true (kernels test that first and otherwise take
    their NumPy path); ``py_func`` stays reachable for tests and for reading.
    """

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]):
        self.py_func = py_func
        self._options = options
        self._compiled: Callable[..., Any] | None = None
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__

    def compiled(self) -> Callable[..., Any]:
        if self._compiled is None:
            with _lock:
                if self._compiled is None:
                    import numba  # the optional extra; only reached when available()

                    try:
                        self._compiled = numba.njit(cache=True, nogil=True, **self._options)(
                            self.py_func
                        )
                    except RuntimeError:
                        # No writable cache location for this source file (numba: "no
                        # locator available"): compile in memory, once per process.
                        self._compiled = numba.njit(nogil=True, **self._options)(self.py_func)
        return self._compiled

    def __call__(self, *args: Any) -> Any:
        return self.compiled()(*args)


def jit(py_func: Callable[..., Any] | None = None, **options: Any):
    """Decorator: ``@jit`` or ``@jit(fastmath=True)`` on a numba-compatible loop function."""
    if py_func is None:
        return lambda f: LazyJit(f, options)
    return LazyJit(py_func, options)
