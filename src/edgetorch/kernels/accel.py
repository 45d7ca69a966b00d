"""Optional compiled kernels: the ``accel`` extra (numba).

NumPy is the runtime's only required numeric dependency and every kernel has a NumPy path.
A few kernels are bound by how many passes NumPy needs over memory (depthwise convolution:
one pass per filter tap; 4-bit weight GEMV: an unpack pass before the BLAS call); for those a
loop compiled with numba does the work in one pass. ``pip install edgetorch[accel]`` adds numba;
without it (or with ``EDGETORCH_ACCEL=0`` in the environment) the NumPy path runs, with the
same results (the tests compare the two).

Kernels declare their loops with :func:`jit`; numba compiles a loop on its first call with
``cache=True``, so later processes load the machine code from numba's on-disk cache (next to
the sources, or numba's user-wide cache directory when that is not writable; NUMBA_CACHE_DIR
moves it). Even so, a fresh process paid numba's import, its code generator's start-up and one
cache load per kernel -- 0.5 s on an idle machine, several on a busy one -- inside its first
``execute``. So the first :func:`available` starts a *warm-up* in a background thread (import
numba, load every registered kernel's cached machine code) and answers False until it is done:
the first calls run the NumPy paths, and plans built meanwhile are rebuilt once the compiled
kernels are ready (:func:`pending`): by the warm-up thread itself (:func:`after_warm_up`), or
else at their next call. ``EDGETORCH_ACCEL_WARMUP=wait`` makes the first
:func:`available` wait for the warm-up instead (the tests do, to see the compiled paths at once).

The warm-up shares the interpreter lock with the calls it runs beside: numba's import and its
first compilation hold the lock for milliseconds at a time, and a call that gives the lock up
(NumPy does around its BLAS calls and large loops) waited for it -- 5-10 ms added to a call of
1-3 ms, on the first calls of a fresh process. So the warm-up *pauses for calls*: while
``Method.execute`` or ``Program.load_method`` runs (:func:`call_started` / :func:`call_ended`;
the warm-up starts during the first load), the warm-up thread waits
at its next pause point -- before each module it imports and each kernel it loads -- until
the call ends, at most ``PAUSE_S`` at a time and ``PAUSE_BUDGET_S`` in all (a program calling
without a break, or a long call, still gets its compiled kernels a little later).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import importlib.util
import os
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

ENV_VAR = "EDGETORCH_ACCEL"
WARMUP_ENV = "EDGETORCH_ACCEL_WARMUP"  # "background" (default) or "wait"

_lock = threading.RLock()  # re-entrant: compiling a loop compiles the @jit loops it calls
# The builtins numba resolves by name when it compiles a loop, as they were when edgetorch was
# imported: torch.export swaps builtins.min/max for functools.partial objects while it traces
# (torch/_export/non_strict_utils.py), and a loop compiled meanwhile -- by the warm-up thread, or
# by another thread's runtime -- would fail numba's typing ("Untyped global name 'min'").
_REAL_BUILTINS = {name: getattr(builtins, name) for name in ("min", "max", "abs", "round", "pow")}
_forced: bool | None = None  # set by enabled()/disabled() (tests, benchmarks)
_found: bool | None = None  # numba importable and not switched off (decided once)
_wait = False  # EDGETORCH_ACCEL_WARMUP=wait (decided with _found)
_ready = False  # the warm-up is done: compiled kernels can be called without a stall
_warmed = threading.Event()
_warm_thread: threading.Thread | None = None
_stop = threading.Event()  # set at exit: the warm-up stops after the kernel it is loading
_REGISTRY: list[LazyJit] = []  # every @jit loop, in definition order
_AFTER: list[weakref.WeakMethod] = []  # after_warm_up's callbacks, not yet run
# Pausing the warm-up for calls (see the module docstring): calls running now, counted while
# the warm-up runs; set when none is.
PAUSE_S = 0.05  # the longest the warm-up waits at one pause point
PAUSE_BUDGET_S = 1.0  # ... and in all, before it stops pausing
_calls = 0
_calls_lock = threading.Lock()
_no_calls = threading.Event()
_no_calls.set()
_paused_s = 0.0  # how long the warm-up has paused so far


def available() -> bool:
    """True when compiled kernels are used now: numba is installed, not switched off, and
    warmed up (see the module docstring; until then False, and the NumPy paths run).

    ``EDGETORCH_ACCEL`` is read once, on the first call (kernels ask on every call, and an
    environment lookup costs ~2 us); :func:`reset` reads it again."""
    if _forced is not None:
        return _forced
    if _ready and _found:
        return True
    return _not_ready_yet()


def pending() -> bool:
    """Compiled kernels are on their way (warming up) but not usable yet. A plan that picks
    its paths once (prepared steps, an XNNPACK plan) should be built after this turns False,
    or it keeps the NumPy paths for good."""
    if _forced is not None or _ready:
        return False
    return not available() and bool(_found) and not _warmed.is_set()


def _not_ready_yet() -> bool:
    found = _found if _found is not None else _decide()
    if not found:
        return False
    _start_warm_up()
    if _wait:
        _warmed.wait()
        return _ready
    return False


def _decide() -> bool:
    global _found, _wait
    off = os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "off", "no")
    _wait = os.environ.get(WARMUP_ENV, "").strip().lower() == "wait"
    _found = not off and importlib.util.find_spec("numba") is not None
    return _found


def reset() -> None:
    """Forget the decision of :func:`available` (the next call reads the environment)."""
    global _found
    _found = None


def wait_until_warm(timeout: float | None = None) -> bool:
    """Block until the warm-up (if started) is done; True when compiled kernels are ready."""
    if _warm_thread is not None:
        _warmed.wait(timeout)
    return _ready


def call_started() -> bool:
    """A method call or load begins (``Method.execute``, ``Program.load_method``): while the
    warm-up runs (or before it starts: a load starts it), it pauses at its next pause point
    until the call ends. True when the call was counted: then call :func:`call_ended` once it
    ends. (Nothing to count, and False, once the warm-up is done or without numba.)"""
    global _calls
    if _ready or _found is False or _warmed.is_set():
        return False
    with _calls_lock:
        _calls += 1
        _no_calls.clear()
    return True


def call_ended() -> None:
    """The end of a call that :func:`call_started` counted."""
    global _calls
    with _calls_lock:
        _calls -= 1
        if _calls <= 0:
            _calls = 0
            _no_calls.set()


def _pause_for_calls() -> None:
    """(The warm-up thread, at a pause point.) Wait while a call runs, within the budget."""
    global _paused_s
    if _no_calls.is_set() or _paused_s >= PAUSE_BUDGET_S or _stop.is_set():
        return
    start = time.monotonic()
    _no_calls.wait(min(PAUSE_S, PAUSE_BUDGET_S - _paused_s))
    _paused_s += time.monotonic() - start


class _PauseBeforeImports:
    """A finder that finds nothing: before each module the warm-up thread imports (numba is
    some 400 of them), it pauses for calls. Other threads' imports pass straight through."""

    def __init__(self, thread: int) -> None:
        self.thread = thread

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if threading.get_ident() == self.thread:
            _pause_for_calls()
        return None


def after_warm_up(callback: Callable[[], Any]) -> None:
    """Call the bound method ``callback`` in the warm-up thread once the compiled kernels are
    ready, before :func:`wait_until_warm` returns: what was built with the NumPy paths while
    they warmed up is rebuilt there, off the caller's thread. Held weakly (a collected object
    is skipped). Not called when registered too late or when the warm-up fails: the caller
    also checks :func:`pending` itself (at its next call)."""
    with _lock:
        _AFTER.append(weakref.WeakMethod(callback))


def _run_after_warm_up() -> None:
    while not _stop.is_set():
        with _lock:
            if not _AFTER:
                return
            ref = _AFTER.pop(0)
        callback = ref()
        if callback is not None:
            callback()


def _start_warm_up() -> None:
    global _warm_thread
    if _warm_thread is not None:
        return
    with _lock:
        if _warm_thread is None:
            _warm_thread = threading.Thread(target=_warm_up, name="edgetorch-accel-warm-up",
                                            daemon=True)
            _warm_thread.start()
            atexit.register(_stop_warm_up)


def _warm_up() -> None:
    """Import numba and load each registered kernel's cached machine code (kernels defined
    while this runs too). A kernel numba never compiled on this machine compiles on its first
    call, as before."""
    global _ready, _found
    pause = _PauseBeforeImports(threading.get_ident())
    sys.meta_path.insert(0, pause)
    try:
        try:
            import numba  # noqa: F401

            done: set[int] = set()
            while not _stop.is_set():
                todo = [k for k in list(_REGISTRY) if id(k) not in done]
                if not todo:
                    break
                for k in todo:
                    if _stop.is_set():
                        break
                    done.add(id(k))
                    _pause_for_calls()
                    if k.before_load is None or k.before_load():
                        _load_cached(k.compiled())
            _ready = not _stop.is_set()
        except Exception:  # noqa: BLE001 - a broken numba means the NumPy paths, not a failure
            _found = False
        finally:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(pause)
        if _ready:
            _run_after_warm_up()
    finally:
        _warmed.set()


def _load_cached(dispatcher: Any) -> None:
    """Load the signatures numba's on-disk cache holds for this machine (numba's own index;
    a miss or another numba's layout just leaves the kernel to compile on first call)."""
    try:
        cache = dispatcher._cache
        magic = dispatcher.targetctx.codegen().magic_tuple()
        for key in cache._cache_file._load_index():
            if key[1] == magic:
                dispatcher.compile(key[0])
    except Exception:  # noqa: BLE001 - an optimisation never fails
        return


def _stop_warm_up() -> None:
    _stop.set()
    _no_calls.set()  # (a paused warm-up goes on, to stop at once)
    if _warm_thread is not None:
        _warm_thread.join()


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

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any],
                 before_load: Callable[[], bool] | None = None):
        self.py_func = py_func
        self._options = options
        # what must happen before numba may load the loop's cached code (e.g. an external
        # symbol registered with LLVM); False: the warm-up leaves the loop alone
        self.before_load = before_load
        self._compiled: Callable[..., Any] | None = None
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__
        _REGISTRY.append(self)

    def compiled(self) -> Callable[..., Any]:
        if self._compiled is None:
            with _lock:
                if self._compiled is None:
                    import numba  # the optional extra; only reached when available()

                    func = _with_real_builtins(self.py_func)
                    try:
                        self._compiled = numba.njit(cache=True, nogil=True, **self._options)(func)
                    except RuntimeError:
                        # No writable cache location for this source file (numba: "no
                        # locator available"): compile in memory, once per process.
                        self._compiled = numba.njit(nogil=True, **self._options)(func)
        return self._compiled

    def __call__(self, *args: Any) -> Any:
        return self.compiled()(*args)


def _with_real_builtins(py_func: Callable[..., Any]) -> Callable[..., Any]:
    """``py_func`` with the same code whose globals name the real builtins (see
    ``_REAL_BUILTINS``; its module's own names win, as Python's lookup order has it) and, for
    every other ``@jit`` loop it calls by a global name, that loop's compiled function (numba
    calls one compiled function from another; LLVM inlines a small one)."""
    used = py_func.__code__.co_names
    names = {k: v for k, v in _REAL_BUILTINS.items() if k in used}
    helpers = {k: v.compiled() for k, v in py_func.__globals__.items()
               if k in used and isinstance(v, LazyJit)}
    if not names and not helpers:
        return py_func
    twin = types.FunctionType(py_func.__code__, {**names, **py_func.__globals__, **helpers},
                              py_func.__name__, py_func.__defaults__, py_func.__closure__)
    twin.__qualname__, twin.__module__ = py_func.__qualname__, py_func.__module__
    twin.__kwdefaults__, twin.__doc__ = py_func.__kwdefaults__, py_func.__doc__
    return twin


def jit(py_func: Callable[..., Any] | None = None, *,
        before_load: Callable[[], bool] | None = None, **options: Any):
    """Decorator: ``@jit`` or ``@jit(fastmath=True)`` on a numba-compatible loop function
    (``before_load``: see :class:`LazyJit`)."""
    if py_func is None:
        return lambda f: LazyJit(f, options, before_load)
    return LazyJit(py_func, options, before_load)
