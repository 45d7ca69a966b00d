"""``Program``: a parsed ``.pte`` whose methods can be inspected and loaded."""

from __future__ import annotations

from typing import Any

from ..errors import (
    EdgeTorchError,
    ExternalDataError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    InvalidProgramError,
    MethodNotFoundError,
)
from ..kernels import accel
from ..schema import program as S
from ..schema.pte import PteFile
from .event_tracer import UNSET_CHAIN_ID, UNSET_DEBUG_HANDLE, EventTracer, now_ns
from .gc_pause import paused_gc
from .instructions import MAX_INSTRUCTIONS
from .meta import MethodMeta, method_meta
from .method import Method


class Program:
    """A loaded program. Constants stay in the file's bytes (zero-copy, memory-mapped for paths)."""

    def __init__(self, pte: PteFile, source: str = "<bytes>", data_map: Any = None,
                 event_tracer: EventTracer | None = None, selected_ops: Any = None,
                 backend_options: Any = None, folder: str | None = None) -> None:
        self._pte = pte
        #: The folder the .pte was read from (None when loaded from bytes or a file object).
        self.folder = folder
        #: backend id -> options handed to that backend's ``init`` (``load_program``'s).
        self.backend_options: dict[str, Any] = dict(backend_options or {})
        #: Where loading and every method loaded from here report events (None: no tracing).
        self.event_tracer = event_tracer
        self._selected_ops = selected_ops  # a SelectedOperators (selective build) or None
        self._source = source
        self._data_map = data_map
        self._named_keys = {nd.key for nd in pte.program.named_data or []}
        self._plans = {p.name: p for p in pte.program.execution_plan}
        if len(self._plans) != len(pte.program.execution_plan):
            raise InvalidProgramError(f"{source}: two execution plans share a name")

    @property
    def method_names(self) -> set[str]:
        return set(self._plans)

    @property
    def program(self) -> S.Program:
        """The deserialized program.fbs tables."""
        return self._pte.program

    def _plan(self, name: str) -> S.ExecutionPlan:
        try:
            return self._plans[name]
        except KeyError:
            raise MethodNotFoundError(
                f"{self._source} has no method {name!r}; its methods are {sorted(self._plans)}"
            ) from None

    def metadata(self, method_name: str) -> MethodMeta:
        plan = self._plan(method_name)
        try:
            return method_meta(plan)
        except (IndexError, ValueError) as e:
            raise InvalidProgramError(f"{self._source} method {method_name!r}: {e}") from e

    @paused_gc()  # (gc_pause.py)
    def load_method(self, name: str, *, optimize: bool | set[str] | None = None,
                    max_instructions: int | None = None) -> Method:
        """Load method ``name``. ``optimize``: which load passes run (``runtime.optimize``):
        True for all, False for none (every instruction runs its kernel: the reference), a
        set of pass names; None reads ``EDGETORCH_OPTIMIZE`` (unset: all).
        ``max_instructions`` bounds the instructions one ``execute`` runs in a method with
        jumps (default ExecuTorch's 10,000,000; beyond it the call fails with InvalidProgram)."""
        plan = self._plan(name)
        start = now_ns()
        counted = accel.call_started()  # (the compiled kernels' warm-up pauses meanwhile)
        try:
            method = Method(self, plan, max_instructions if max_instructions is not None
                            else MAX_INSTRUCTIONS, optimize)
        except EdgeTorchError:
            raise
        except Exception as e:
            # Method validates what it reads from the file and raises typed errors for it;
            # anything else is a bug here, not a malformed file.
            raise InternalError(
                f"{self._source} method {name!r}: loading failed inside edgetorch "
                f"({type(e).__name__}: {e}). This is a bug in edgetorch rather than a problem "
                "with the file; please report it with the .pte attached.") from e
        finally:
            if counted:
                accel.call_ended()
        if self._selected_ops is not None:  # after Method validated every index it reads
            self._selected_ops.check(plan, f"{self._source} method {name!r}")
        if self.event_tracer is not None:
            self.event_tracer.log_profiling("Program::load_method", UNSET_CHAIN_ID,
                                            UNSET_DEBUG_HANDLE, start, now_ns())
        return method

    def write_etdump_result_to_file(self, etdump_path: str, debug_buffer_path: str | None = None
                                    ) -> None:
        """Write the events recorded so far as an ETDump file (ExecuTorch's ``.etdp``), and the
        captured intermediate outputs to ``debug_buffer_path`` (needs ``debug_buffer_size``)."""
        from .etdump import write_etdump
        from .event_tracer import RecordingEventTracer

        if not isinstance(self.event_tracer, RecordingEventTracer):
            raise InvalidArgumentError(
                f"{self._source} records no events to write: load it with "
                "Runtime.get().load_program(path, enable_etdump=True[, debug_buffer_size=N])")
        write_etdump(self.event_tracer, etdump_path, debug_buffer_path)

    # ---- data access used by Method ----------------------------------------------------

    def _constant(self, idx: int, t: S.Tensor, value: int, method: str) -> memoryview:
        info = t.extra_tensor_info
        if info is not None and info.location == S.TensorDataLocation.EXTERNAL:
            return self._external(info.fully_qualified_name, method, t)
        try:
            return self._pte.constant_bytes(idx)
        except FormatError as e:
            raise InvalidProgramError(f"method {method!r} value {value}: {e}") from e

    def _external(self, key: str | None, method: str, t: S.Tensor) -> memoryview:
        if self._data_map is None:
            raise ExternalDataError(
                f"method {method!r} needs external tensor {key!r}, but no .ptd data file was "
                "given; pass load_program(pte, data_path='model.ptd')")
        return self._data_map.tensor_bytes(key, t)

    def _mutable_initial(self, idx: int, t: S.Tensor, nbytes: int, method: str) -> memoryview:
        info = t.extra_tensor_info
        seg = int(info.mutable_data_segments_idx) if info is not None else 0
        try:
            return self._pte.mutable_bytes(idx, seg, nbytes)
        except FormatError as e:
            raise InvalidProgramError(f"method {method!r}: initial state of a buffer: {e}") from e

    def named_data(self, key: str) -> memoryview:
        """The bytes under ``key`` in the program's named data, else in the .ptd data map(s)
        (ExecuTorch merges both into the NamedDataMap a backend sees)."""
        if key in self._named_keys:
            return self._pte.named_data(key)
        if self._data_map is not None:
            return self._data_map.tensor_bytes(key)
        raise ExternalDataError(
            f"{self._source} has no named data {key!r}; if its weights were saved to a .ptd "
            "file, pass load_program(pte, data_path='model.ptd')")

    def _delegate_data(self, delegate: S.BackendDelegate, method: str) -> memoryview:
        try:
            return self._pte.delegate_bytes(delegate)
        except FormatError as e:
            raise InvalidProgramError(f"method {method!r} delegate {delegate.id!r}: {e}") from e

    def size_breakdown(self) -> dict[str, int]:
        return self._pte.size_breakdown()

    def __repr__(self) -> str:
        return f"Program({self._source}, methods={sorted(self._plans)})"
