"""``Runtime``: the entry point, ``Runtime.get().load_program(path | bytes | file)``."""

from __future__ import annotations

import enum
import mmap
import os
from collections.abc import Mapping
from typing import Any, BinaryIO

from ..errors import ErrorCode, FormatError, InvalidArgumentError
from ..kernels import registry as _kernels
from ..schema.pte import PteFile
from .backends import BackendRegistry
from .event_tracer import EventTracer, RecordingEventTracer
from .gc_pause import paused_gc
from .program import Program
from .selective_build import resolve as resolve_selection


class Verification(enum.Enum):
    """How much of the program is checked at load (ExecuTorch's names). Every index a method
    uses is bounds-checked at ``load_method`` either way."""

    Minimal = 0
    InternalConsistency = 1


class OperatorRegistry:
    """``Runtime.operator_registry``: the kernels this runtime has."""

    @property
    def operator_names(self) -> set[str]:
        return set(_kernels.operator_names())

    def has_operator(self, name: str) -> bool:
        return name in _kernels.KERNELS

    def __repr__(self) -> str:
        return f"OperatorRegistry({len(_kernels.KERNELS)} operators)"


def _read(data: str | os.PathLike | bytes | bytearray | memoryview | BinaryIO) -> tuple[Any, str]:
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    raise FormatError(f"{path}: file is empty; expected a .pte program")
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), path
        except OSError as e:
            raise FormatError(f"cannot read program {path!r}: {e}", code=ErrorCode.AccessFailed) from e
    if isinstance(data, (bytes, bytearray, memoryview)):
        return memoryview(data), "<bytes>"
    if hasattr(data, "read"):
        return memoryview(data.read()), getattr(data, "name", "<file>")
    raise TypeError(f"load_program expects a path, bytes or a binary file, got {type(data).__name__}")


class Runtime:
    """The process-wide runtime (``Runtime.get()``)."""

    _instance: Runtime | None = None

    def __init__(self) -> None:
        self.operator_registry = OperatorRegistry()
        self.backend_registry = BackendRegistry()

    @classmethod
    def get(cls) -> Runtime:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def set_num_threads(self, num_threads: int) -> int:
        """Size the runtime's thread pool (the BLAS behind NumPy's matrix products, via
        threadpoolctl); returns the previous size. Process-wide, as ExecuTorch's
        ``_unsafe_reset_threadpool``: call it when no method is executing."""
        from .threadpool import set_num_threads

        return set_num_threads(num_threads)

    def get_num_threads(self) -> int:
        """The number of threads the runtime's math uses now."""
        from .threadpool import get_num_threads

        return get_num_threads()

    @paused_gc()  # a load's burst of allocations triggers no collection (gc_pause.py)
    def load_program(
        self,
        data: str | os.PathLike | bytes | bytearray | memoryview | BinaryIO,
        *,
        verification: Verification = Verification.InternalConsistency,
        data_path: str | os.PathLike | None = None,
        enable_etdump: bool = False,
        debug_buffer_size: int = 0,
        event_tracer: EventTracer | None = None,
        selected_ops: Any = None,
        backend_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Program:
        """Parse a program. ``enable_etdump=True`` records the events of loading and of every
        ``execute`` (``program.event_tracer``, a :class:`RecordingEventTracer`);
        ``debug_buffer_size`` > 0 also keeps each instruction's outputs, up to that many
        bytes (ExecuTorch's intermediate-output level). Or pass your own ``event_tracer``.
        ``selected_ops`` restricts the program to a selective build's operators: a
        ``selected_operators.yaml`` path (``edgetorch oplist``), a ``SelectedOperators``, or
        operator names; None uses ``$EDGETORCH_SELECTED_OPS`` when set, False nothing. A method
        needing more fails at ``load_method`` with OperatorMissingError. ``backend_options``
        maps a backend id to options its ``init`` receives (``context.options``)."""
        selection = resolve_selection(selected_ops)
        if debug_buffer_size < 0:
            raise InvalidArgumentError(f"debug_buffer_size must be >= 0, got {debug_buffer_size}")
        if event_tracer is None and enable_etdump:
            event_tracer = RecordingEventTracer(debug_buffer_size)
        buf, source = _read(data)
        if len(buf) >= 8 and bytes(buf[4:8]) == b"BP08":  # ExecuTorch: "identifier 'BP08' != 'ET12'"
            raise FormatError(
                f"{source} is a BundledProgram (.bpte, identifier BP08), not a .pte; load it with "
                "edgetorch.runtime.bundled.load_bundled_program(...) (its .program is the Program) "
                "or run `edgetorch run x.bpte --verify`")
        pte = PteFile.parse(buf)
        data_map = None
        if data_path is not None:
            from .data_map import load_data_map

            data_map = load_data_map(data_path)
        folder = os.path.dirname(os.path.abspath(os.fspath(data))) \
            if isinstance(data, (str, os.PathLike)) else None
        program = Program(pte, source, data_map, event_tracer, selection,
                          backend_options=backend_options, folder=folder)
        if verification == Verification.InternalConsistency:
            for name in program.method_names:
                program.metadata(name)
        return program
