"""Every exception edgetorch raises on purpose, in one place.

Runtime errors carry the ExecuTorch error code (``runtime/core/error.h``) that the C++ runtime
would return in the same situation, so tools that speak ExecuTorch's codes can map them.
Messages name what is involved (op, instruction, input, shape, dtype) and end with what to try.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from enum import Enum, IntEnum


class ErrorCode(IntEnum):
    """ExecuTorch's ``executorch::runtime::Error`` values."""

    Ok = 0x00
    Internal = 0x01
    InvalidState = 0x02
    EndOfMethod = 0x03
    AlreadyLoaded = 0x04
    NotSupported = 0x10
    NotImplemented = 0x11
    InvalidArgument = 0x12
    InvalidType = 0x13
    OperatorMissing = 0x14
    RegistrationExceedingMaxKernels = 0x15
    RegistrationAlreadyRegistered = 0x16
    NotFound = 0x20
    MemoryAllocationFailed = 0x21
    AccessFailed = 0x22
    InvalidProgram = 0x23
    InvalidExternalData = 0x24
    OutOfResources = 0x25
    DelegateInvalidCompatibility = 0x30
    DelegateMemoryAllocationFailed = 0x31
    DelegateInvalidHandle = 0x32


class EdgeTorchError(Exception):
    """Base class of every edgetorch error."""

    code: ErrorCode = ErrorCode.Internal

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message)

    def __str__(self) -> str:
        return f"{super().__str__()} [{self.code.name} 0x{int(self.code):02x}]"


# ---- format -----------------------------------------------------------------------------


class FormatError(EdgeTorchError):
    """A .pte/.ptd file (or bytes) is truncated, corrupted or not of the expected kind."""

    code = ErrorCode.InvalidProgram


class AlignmentError(FormatError, ValueError):
    """An alignment asked of a serializer is not a positive power of two (a ``ValueError`` too,
    as ExecuTorch raises)."""


class InvalidHeaderError(FormatError, ValueError):
    """A container header (e.g. a delegate blob's) whose fields are missing or inconsistent;
    also a ``ValueError``, which ExecuTorch's header classes raise in the same cases."""


class ExternalDataError(FormatError):
    """A .ptd (named data) file is missing, malformed or does not match the program."""

    code = ErrorCode.InvalidExternalData


class UnsafeFileError(FormatError):
    """A file asks for something edgetorch never does with a file's contents: unpickling an
    object, calling something that is not an operator, following a path outside the folders
    the user named, or handing its own flags to a tool (docs/security.md)."""

    code = ErrorCode.AccessFailed


class ETRecordError(FormatError, RuntimeError):
    """An ETRecord file is not a valid ETRecord (a RuntimeError too, as ExecuTorch raises)."""


# ---- runtime ----------------------------------------------------------------------------


class RuntimeErrorBase(EdgeTorchError):
    """Errors raised while loading or executing a program."""


class InvalidProgramError(RuntimeErrorBase):
    code = ErrorCode.InvalidProgram


class OperatorMissingError(RuntimeErrorBase):
    code = ErrorCode.OperatorMissing


class BackendNotFoundError(RuntimeErrorBase):
    code = ErrorCode.NotFound


class MethodNotFoundError(RuntimeErrorBase):
    code = ErrorCode.InvalidArgument


class MethodBusyError(RuntimeErrorBase):
    """``execute`` was called on a Method that is already running (another thread)."""

    code = ErrorCode.InvalidState


class InvalidArgumentError(RuntimeErrorBase):
    """Inputs to ``Method.execute`` (count, dtype, rank, sizes) do not match the method."""

    code = ErrorCode.InvalidArgument


class InvalidStateError(RuntimeErrorBase):
    """A call the object's current state does not allow (e.g. an LLM runner's generate('')
    without a prior prefill)."""

    code = ErrorCode.InvalidState


class MemoryAllocationError(RuntimeErrorBase):
    code = ErrorCode.MemoryAllocationFailed


class ResizeError(RuntimeErrorBase):
    """A tensor was asked to grow beyond its planned (upper-bound) capacity."""

    code = ErrorCode.NotSupported


class KernelError(RuntimeErrorBase):
    """A kernel failed while executing an instruction."""

    code = ErrorCode.Internal


class InternalError(RuntimeErrorBase):
    """A bug in edgetorch itself (not in the program or the inputs)."""

    code = ErrorCode.Internal


class OptimizationError(InternalError):
    """A load pass (``runtime/optimize``) failed while ``EDGETORCH_OPTIMIZE_STRICT`` is set;
    without it the pass is skipped, reported in ``method.load_report`` and warned about."""


class BundledVerificationError(RuntimeErrorBase):
    """A bundled program's method output differs from its expected output (or cannot be
    compared). Code NotFound, as ExecuTorch's ``verify_method_outputs`` returns (status 32)."""

    code = ErrorCode.NotFound


class BundledProgramError(EdgeTorchError, AssertionError):
    """A BundledProgram's test suites do not match its program (method, count, dtype, shape).
    Also an ``AssertionError``: what ExecuTorch raises there (its checks are asserts)."""

    code = ErrorCode.InvalidArgument


class RegistrationError(EdgeTorchError):
    code = ErrorCode.RegistrationAlreadyRegistered


class TokenizerError(EdgeTorchError):
    """A tokenizer file (tokenizer.json, GGUF vocabulary, ...) cannot be loaded or converted."""

    code = ErrorCode.InvalidArgument


# ---- compiler ---------------------------------------------------------------------------


class ExportErrorType(Enum):
    """ExecuTorch's kinds of user error (``exir.error.ExportErrorType``)."""

    INVALID_INPUT_TYPE = 1
    INVALID_OUTPUT_TYPE = 2
    VIOLATION_OF_SPEC = 3
    NOT_SUPPORTED = 4
    MISSING_PROPERTY = 5
    UNINITIALIZED = 6


class ModelSpecError(EdgeTorchError, ValueError):
    """A model spec (a built-in example name or ``file.py:factory``) cannot be loaded, or its
    factory gave something that cannot be exported."""

    code = ErrorCode.InvalidArgument


class UnknownExampleError(ModelSpecError, KeyError):
    """No built-in example has the requested name."""

    def __str__(self) -> str:  # (KeyError's own shows the repr of the message, quotes and all)
        return f"{self.args[0]} [{self.code.name} 0x{int(self.code):02x}]"


class ExportError(EdgeTorchError):
    """The compiler cannot turn this program into something the runtime can run.

    Also takes ExecuTorch's form ``ExportError(ExportErrorType.X, message)``, whose message
    starts with ``[ExportErrorType.X]: ``."""

    code = ErrorCode.NotSupported

    def __init__(self, *args: object, code: ErrorCode | None = None) -> None:
        if len(args) == 2 and isinstance(args[0], ExportErrorType):
            args = (f"[{args[0]}]: {args[1]}",)
        super().__init__(*args, code=code)  # type: ignore[arg-type]


class DataDependentControlFlowError(ExportError):
    """torch.export met a branch (or a size) that depends on a tensor's values; the message
    names the user's line and points to ``torch.cond``."""


class NamedDataError(ExportError, ValueError):
    """Named data a backend stores cannot be stored as asked (a key reused for other bytes, a
    bad alignment or layout); a ``ValueError`` too, as ExecuTorch raises."""


class UnknownBackendError(ExportError, NotImplementedError):
    """``to_backend`` was given a backend id no ``BackendDetails`` subclass registered (a
    ``NotImplementedError`` too, as ExecuTorch raises)."""


class GraphSignatureError(ExportError, RuntimeError):
    """An edit of an ``ExportedProgram`` (adding or removing a placeholder) would leave its
    graph and its signature out of step (a ``RuntimeError`` too, as ExecuTorch raises)."""


class UnsupportedOperatorError(ExportError):
    """An operator (or a dtype of one) has no kernel in the runtime."""


class LoweringRefusedError(ExportError):
    """A backend's lowering cannot take a node it was offered. ``node`` names it (None: the
    partition as a whole), so a partitioner that tries its lowering first can leave just that
    node on the CPU and say why."""

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class LoweringContextError(ExportError, RuntimeError):
    """The active TOSA specification (or shape environment) was asked for outside a
    ``TosaLoweringContext``, or the context holds none."""

    code = ErrorCode.InvalidState


class PassError(ExportError):
    """A compiler pass failed; the message names the pass and the passes that ran before."""

    code = ErrorCode.Internal


class ParamMutationConflictError(PassError, RuntimeError):
    """Two passes would rewrite one weight's storage in two incompatible formats (a
    RuntimeError too, as ExecuTorch's Vulkan passes raise)."""


class MemoryPlanningError(ExportError):
    code = ErrorCode.MemoryAllocationFailed


class CompileSpecError(ExportError, ValueError):
    """A target or compile-spec value a backend does not accept (a ValueError, as ExecuTorch's
    backends raise for these)."""

    code = ErrorCode.InvalidArgument


class ExportArgumentError(ExportError, ValueError, AssertionError):
    """An argument an ``ExportSession`` call cannot use (an empty output name). Also an
    ``AssertionError``: what ExecuTorch raises there (its checks are asserts)."""

    code = ErrorCode.InvalidArgument


class FeatureNotAvailableError(ExportError, NotImplementedError):
    """A requested compiler feature (ETRecord, a quantized recipe...) is not built yet."""

    code = ErrorCode.NotImplemented


class QuantDebugError(EdgeTorchError, ValueError):
    """Quantization debugging, mixed precision or a recipe sweep cannot use what it was given
    (data that does not fit the model, an unknown recipe or metric, a target no layer set meets)."""

    code = ErrorCode.InvalidArgument


class InspectorError(EdgeTorchError, ValueError):
    """The Inspector lacks what a request needs (an ETRecord, a debug buffer, inputs)."""


class DependencyMissingError(EdgeTorchError, ModuleNotFoundError):
    """An optional module a feature needs (a backend's native helpers) cannot be imported."""

    code = ErrorCode.NotSupported


def near_matches(name: str, candidates: Iterable[str], n: int = 5) -> list[str]:
    """Names close to ``name`` among ``candidates``, for 'did you mean' hints."""
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)
