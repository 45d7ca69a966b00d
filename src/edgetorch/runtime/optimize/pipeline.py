"""The machinery of the load passes: what a pass declares, which ones a load runs, what it
reports, and the one guard around them.

* A :class:`Pass` has a name, one signature (``run(flow, plan)``: the method's
  :class:`~.dataflow.Dataflow` and the :class:`~.steps.StepPlan` it edits) and a promise: the
  same bits as the kernels it stands in for (``tolerance=None``), or results within a stated
  :class:`Tolerance`. A backend declares the passes it runs inside its own ``init`` the same
  way (``run=None``, ``backend=`` its id) and runs them through :meth:`Options.guard`.
* :func:`options` turns ``load_method``'s ``optimize=`` (True, False or a set of pass names;
  None: the ``EDGETORCH_OPTIMIZE`` environment variable, read at each load) into
  :class:`Options`. ``EDGETORCH_OPTIMIZE_STRICT=1`` (the test suite sets it) makes a pass
  that fails raise instead of being dropped.
* :meth:`Options.guard` is the one place a pass's exception is caught: it is recorded in
  the method's :class:`LoadReport` (``method.load_report``) and warned about, and the load
  goes on without that pass; in strict mode it raises :class:`~edgetorch.errors.OptimizationError`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...errors import (
    EdgeTorchError,
    InvalidArgumentError,
    OptimizationError,
    RegistrationError,
    near_matches,
)

ENV_VAR = "EDGETORCH_OPTIMIZE"
STRICT_ENV_VAR = "EDGETORCH_OPTIMIZE_STRICT"
_ON, _OFF = {"", "1", "on", "true", "all", "yes"}, {"0", "off", "false", "none", "no"}


@dataclass(frozen=True)
class Tolerance:
    """How far a pass's results may be from the kernels': ``|got - want| <= atol * max(1,
    max|want|) + rtol * |want|`` per element, and why (the arithmetic that moves them)."""

    rtol: float
    atol: float
    why: str

    def __str__(self) -> str:
        return f"rtol {self.rtol:g}, atol {self.atol:g} x max(1, |y|): {self.why}"


# Float32 round-off of a computation done in another order or on rounded operands: each
# affected result moves by a few ulps (2^-23 relative) of the magnitudes summed into it,
# which a network carries to its outputs; the kernels promise 1e-5 against eager PyTorch.
FLOAT_ROUNDING = Tolerance(1e-5, 1e-5, "float32 rounding of products summed in another order "
                           "or of operands rounded once at load (a few ulps per layer)")


@dataclass(frozen=True)
class Pass:
    """One load pass: ``run(flow, plan)`` replaces some instructions' steps in ``plan``."""

    name: str
    run: Callable[[Any, Any], None] | None
    tolerance: Tolerance | None = None  # None: the very bits of the kernels
    backend: str | None = None  # a backend's pass, run inside its init
    doc: str = ""

    @property
    def exact(self) -> bool:
        return self.tolerance is None

    def __str__(self) -> str:
        where = f" [{self.backend}]" if self.backend else ""
        promise = "same bits" if self.exact else str(self.tolerance)
        return f"{self.name}{where}: {self.doc} ({promise})"


def describe(run: Callable[..., Any]) -> str:
    """The first line of ``run``'s docstring: what the pass does."""
    return (run.__doc__ or "").strip().splitlines()[0] if run.__doc__ else ""


class PassList(list):
    """The passes in the order they run, ``str()`` one per line."""

    def names(self) -> list[str]:
        return [p.name for p in self]

    def get(self, name: str) -> Pass:
        for p in self:
            if p.name == name:
                return p
        raise KeyError(name)

    def add(self, p: Pass) -> Pass:
        """Declare a backend's pass (its name must be new)."""
        if p.name in self.names():
            raise RegistrationError(f"load pass {p.name!r} is already declared")
        self.append(p)
        return p

    def __str__(self) -> str:
        return "\n".join(f"{k:2d}. {p}" for k, p in enumerate(self, 1))


@dataclass
class PassResult:
    name: str
    status: str  # "ran", "off" or "failed"
    changed: int = 0  # instructions (a backend's pass: nodes) it changed
    error: str = ""
    where: str = ""  # a backend pass: which delegate


@dataclass
class LoadReport:
    """What the load passes did to one method: ``str()`` prints a line per pass."""

    method: str
    strict: bool = False
    results: list[PassResult] = field(default_factory=list)

    def add(self, result: PassResult) -> PassResult:
        self.results.append(result)
        return result

    def forget(self, names: Iterable[str]) -> None:
        """Drop the results of passes that run again (a method's passes after the compiled
        kernels' warm-up): the report tells what the method runs now."""
        drop = set(names)
        self.results[:] = [r for r in self.results if r.name not in drop]

    @property
    def failed(self) -> list[PassResult]:
        return [r for r in self.results if r.status == "failed"]

    def __getitem__(self, name: str) -> PassResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [f"load passes of method {self.method!r}" + (" (strict)" if self.strict else "")]
        for r in self.results:
            detail = f"{r.changed:5d} changed" if r.status == "ran" else r.error
            where = f"  {r.where}" if r.where else ""
            lines.append(f"  {r.name:<22} {r.status:<6} {detail}{where}".rstrip())
        return "\n".join(lines)


@dataclass(frozen=True)
class Options:
    """Which passes a load runs, whether failures raise, and where they are reported."""

    enabled: frozenset[str]
    strict: bool
    report: LoadReport

    def __contains__(self, name: str) -> bool:
        return name in self.enabled

    def guard(self, p: Pass, fn: Callable[..., Any], *args: Any, where: str = "",
              fallback: Any = None) -> Any:
        """``fn(*args)``, or ``fallback`` when it raises: the failure goes to the report and
        a warning (strict mode: an ``OptimizationError``). The one place an exception of an
        optimisation is caught: a bug in a pass must never fail or change a load silently.
        A typed error (the program's or the inputs', e.g. a node failing while a plan is
        built from a call) is no pass's bug: it propagates."""
        try:
            return fn(*args)
        except EdgeTorchError:
            raise
        except Exception as e:  # noqa: BLE001 - the one recorded guard (see the docstring)
            message = f"{type(e).__name__}: {e}"
            self.report.add(PassResult(p.name, "failed", error=message, where=where))
            text = (f"load pass {p.name!r} failed on method {self.report.method!r}"
                    f"{' ' + where if where else ''} and was skipped: {message}")
            if self.strict:
                raise OptimizationError(text + f" ({STRICT_ENV_VAR} is set)") from e
            warnings.warn(text + "; the method runs without it. Please report this bug "
                          "(load_method(..., optimize=False) avoids every pass).",
                          RuntimeWarning, stacklevel=2)
            return fallback


def options(optimize: bool | Iterable[str] | str | None, known: PassList, method: str
            ) -> Options:
    """``load_method``'s ``optimize=``, checked against the ``known`` passes."""
    if optimize is None:
        optimize = _from_env(os.environ.get(ENV_VAR, ""))
    if optimize is True:
        names = set(known.names())
    elif optimize is False:
        names = set()
    else:
        names = {optimize} if isinstance(optimize, str) else set(optimize)
        unknown = sorted(names - set(known.names()))
        if unknown:
            hint = near_matches(unknown[0], known.names())
            raise InvalidArgumentError(
                f"unknown load pass(es) {unknown} for method {method!r}"
                + (f" (did you mean {', '.join(hint)}?)" if hint else "")
                + f"; the passes are: {', '.join(known.names())}")
    strict = os.environ.get(STRICT_ENV_VAR, "").strip().lower() in _ON - {""}
    return Options(frozenset(names), strict, LoadReport(method, strict))


def default_options(method: str) -> Options:
    """Every pass, failures raising: for a backend used without a method's load."""
    from . import PASSES  # (the list of every declared pass)

    return Options(frozenset(PASSES.names()), True, LoadReport(method, True))


def _from_env(value: str) -> bool | set[str]:
    v = value.strip().lower()
    if v in _ON:
        return True
    if v in _OFF:
        return False
    return {n.strip() for n in value.split(",") if n.strip()}
