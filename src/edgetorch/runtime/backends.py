"""The runtime's backend registry, keyed by the backend id a ``.pte`` stores.

A backend is an object with ``init(blob, compile_specs) -> handle``,
``execute(handle, values, args)`` (reads inputs from and writes outputs to ``values`` at the
indices ``args``), ``destroy(handle)`` and ``is_available()``. Register one with
``@backend("MyBackend")`` on a class (instantiated once) or ``register_backend(name, obj)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import BackendNotFoundError, RegistrationError


@dataclass(frozen=True)
class BackendInitContext:
    """What ``Backend.init`` gets besides the blob (ExecuTorch's ``BackendInitContext``).

    ``named_data(key)`` returns the bytes stored under ``key`` in the program's named data
    (the .pte's ``Program.named_data``, then the .ptd files given to ``load_program``): the
    weights a backend such as XNNPACK keeps outside its blob. A missing key raises.
    ``options`` are what the caller gave this backend id in ``load_program(...,
    backend_options={"EthosUBackend": {...}})`` (ExecuTorch's per-backend load options).
    ``program_dir`` is the folder of the ``.pte`` when it was loaded from a path (None for
    bytes): with the folders the user names in ``options``, the only places a path stored in
    the file may lead (``edgetorch.runtime.file_paths``).
    ``optimize`` says which load passes this load runs (``runtime.optimize.Options``: ``name
    in optimize``); a backend runs its own declared passes through ``optimize.guard``, which
    reports a failure in the method's load report. None: every pass, failures raise.
    ``static_shapes``: every tensor the delegate call passes has static sizes (a backend may
    then plan for its declared shapes at init; bounded dynamic sizes are upper bounds, which
    calls seldom reach).
    """

    method_name: str
    named_data: Callable[[str], memoryview]
    options: Mapping[str, Any] = field(default_factory=dict)
    program_dir: str | None = None
    optimize: Any = None
    static_shapes: bool = False


@dataclass(frozen=True)
class BackendExecutionContext:
    """What ``Backend.execute`` gets besides its arguments (ExecuTorch's
    ``BackendExecutionContext``). ``resize(value_index, sizes)`` re-views an output tensor at
    new sizes within its planned upper bound, stores it in ``values[value_index]`` and
    returns it (ExecuTorch's ``resize_tensor``). ``event_tracer`` is the method's tracer or
    None; report delegate-internal work with ``edgetorch.runtime.event_tracer``'s
    ``event_tracer_*_delegate`` functions, which do nothing when it is None."""

    method_name: str
    resize: Callable[[int, tuple[int, ...]], Any]
    event_tracer: Any = None


class Backend(Protocol):
    """A delegate's runtime half. Optional besides these: ``after_warm_up(handle)``, called
    (between the method's calls) once the compiled kernels (``kernels.accel``) are ready, for
    a backend whose ``init`` built plans with the NumPy paths while they warmed up."""

    def init(self, blob: memoryview, compile_specs: dict[str, bytes],
             context: BackendInitContext) -> Any: ...

    def execute(self, handle: Any, values: list[Any], args: list[int],
                context: BackendExecutionContext) -> None: ...

    def destroy(self, handle: Any) -> None: ...

    def is_available(self) -> bool: ...


RUNTIME_BACKENDS: dict[str, Backend] = {}


def register_backend(name: str, impl: Backend, *, override: bool = False) -> None:
    if name in RUNTIME_BACKENDS and not override:
        raise RegistrationError(f"backend {name!r} is already registered")
    RUNTIME_BACKENDS[name] = impl


def backend(name: str):
    """Class decorator: ``@backend("XnnpackBackend") class Xnnpack: ...``."""

    def deco(cls):
        register_backend(name, cls())
        return cls

    return deco


def get_backend(name: str) -> Backend:
    impl = RUNTIME_BACKENDS.get(name)
    if impl is not None and not impl.is_available():
        # A backend may say why (a missing optional package) through ``unavailable_reason()``.
        reason = getattr(impl, "unavailable_reason", lambda: "")() or "is_available() is False"
        raise BackendNotFoundError(f"backend {name!r} is registered but not available in this "
                                   f"runtime: {reason}")
    if impl is None:
        known = ", ".join(sorted(RUNTIME_BACKENDS)) or "none"
        raise BackendNotFoundError(
            f"backend {name!r} is not registered in this runtime (registered: {known}); "
            "import the package that provides it, or export without delegating to it")
    return impl


class BackendRegistry:
    """``Runtime.backend_registry``: what backends this runtime can run."""

    @property
    def registered_backend_names(self) -> list[str]:
        return sorted(RUNTIME_BACKENDS)

    def is_available(self, name: str) -> bool:
        impl = RUNTIME_BACKENDS.get(name)
        return impl is not None and impl.is_available()

    def __repr__(self) -> str:
        return f"BackendRegistry({self.registered_backend_names})"
