"""ExecuTorch's ``devtools.etdump.schema_flatcc`` names: the ETDump dataclasses of
``edgetorch.schema.etdump`` (``ETDumpFlatCC`` is its ``ETDump``), and the names of the
framework's own profile events."""

from enum import Enum

from ...schema.etdump import (
    AllocationEvent,
    Allocator,
    Bool,
    DebugEvent,
    Double,
    Event,
    Float,
    Int,
    Null,
    ProfileEvent,
    RunData,
    ScalarType,
    String,
    Tensor,
    TensorList,
    Value,
    ValueType,
)
from ...schema.etdump import ETDump as ETDumpFlatCC
from ...schema.program import ContainerMetadata


class PROFILE_EVENT_ENUM(Enum):  # noqa: N801 (ExecuTorch's name)
    """Profile event names the runtime itself writes (ExecuTorch's strings)."""

    RUN_MODEL = "Method::execute"
    OPERATOR_CALL = "OPERATOR_CALL"
    DELEGATE_CALL = "DELEGATE_CALL"
    LOAD_MODEL = "Program::load_method"


__all__ = ["AllocationEvent", "Allocator", "Bool", "ContainerMetadata", "DebugEvent", "Double",
           "ETDumpFlatCC", "Event", "Float", "Int", "Null", "PROFILE_EVENT_ENUM", "ProfileEvent",
           "RunData", "ScalarType", "String", "Tensor", "TensorList", "Value", "ValueType"]
