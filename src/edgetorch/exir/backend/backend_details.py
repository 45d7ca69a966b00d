"""``BackendDetails``: the ahead-of-time half of a backend, and the registry of backends.

A backend is a subclass of ``BackendDetails`` implementing ``preprocess``; its class name is
the backend id stored in the ``.pte`` (ExecuTorch's convention), and defining the class
registers it in ``BACKEND_DETAILS`` under that id -- the one way a backend becomes known to
``to_backend``. No module scanning: the module that defines the class must be imported.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from torch.export import ExportedProgram

from ...errors import RegistrationError, UnknownBackendError, near_matches
from .compile_spec_schema import CompileSpec
from .copying import copy_program


@dataclass
class PreprocessResult:
    """What ``preprocess`` returns.

    ``processed_bytes`` is the blob the runtime backend's ``init`` receives.
    ``debug_handle_map`` maps the backend's own instruction ids to the debug handles of the
    edge nodes they came from (for profiling). ``data_store_output`` carries named data the
    backend wants stored in the program (ExecuTorch's ``NamedDataStoreOutput``).
    """

    processed_bytes: bytes = b""
    debug_handle_map: dict[int, tuple[int, ...]] | dict[str, tuple[int, ...]] | None = None
    data_store_output: Any = None


BACKEND_DETAILS: dict[str, type[BackendDetails]] = {}


class BackendDetails(ABC):
    """Subclass this and implement ``preprocess`` to make a backend.

    ``class MyBackend(BackendDetails)`` registers the backend id ``"MyBackend"``; the runtime
    side registers the same id with ``@edgetorch.runtime.backends.backend("MyBackend")``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if inspect.isabstract(cls):
            return  # an intermediate base class, not a backend
        _register(cls)

    @staticmethod
    @abstractmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Compile ``edge_program`` (an Edge-dialect subgraph; yours to modify) to a blob."""

    @classmethod
    def copy_exported_program_for_preprocess(cls, edge_program: ExportedProgram,
                                             compile_specs: list[CompileSpec]) -> ExportedProgram:
        """The program ``preprocess`` receives: a copy, so the caller's stays intact."""
        return copy_program(edge_program)


def _register(cls: type[BackendDetails]) -> None:
    backend_id = cls.__name__
    old = BACKEND_DETAILS.get(backend_id)
    # A class of the same name from the same module replaces the old one (a module reload, a
    # notebook cell, a test defining its backend inside each test function).
    if old is not None and old.__module__ != cls.__module__:
        raise RegistrationError(
            f"backend id {backend_id!r} is already taken by {old.__module__}.{old.__qualname__}; "
            f"rename {cls.__module__}.{cls.__qualname__} (the class name is the backend id)")
    BACKEND_DETAILS[backend_id] = cls


def get_backend_details(backend_id: str) -> type[BackendDetails]:
    """The ``BackendDetails`` subclass registered as ``backend_id``."""
    cls = BACKEND_DETAILS.get(backend_id)
    if cls is None:
        known = ", ".join(sorted(BACKEND_DETAILS)) or "none"
        close = near_matches(backend_id, BACKEND_DETAILS)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnknownBackendError(
            f"Backend {backend_id} was not found. Registered backends: {known}.{hint} "
            "Import the module that defines `class "
            f"{backend_id}(BackendDetails)` before calling to_backend.")
    return cls
