"""``emit_program``: ExecuTorch's entry point from lowered ``ExportedProgram``s to a
``Program`` dataclass, for callers that drive emission themselves (merging methods lowered
apart, adding constant getter methods). ``to_executorch`` uses the same ``MethodEmitter``.

The program it returns holds its constants in ``Program.constant_buffer`` (entry 0 is the
reserved empty buffer) and its delegate blobs in ``Program.backend_delegate_data``, as
ExecuTorch's emitter leaves them; serialization moves them to segments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch.export import ExportedProgram

from ...schema import program as S
from ..error import ExportError, ExportErrorType
from .emitter import MethodEmitter, ProgramState, constant_method_plan


@dataclass
class EmitterOutput:
    """The emitted program and what the devtools need to map instructions back to nodes."""

    program: S.Program
    # {method: {instruction: debug handle, or the handles of a delegate call's nodes}}
    debug_handle_map: dict[str, dict[int, int | list[int]]]
    # {method: {delegate instruction: {"name": backend id, "delegate_map": {...}}}}
    method_to_delegate_debug_id_map: dict[str, dict[int, dict[str, Any]]]
    # {method: {delegate instruction: number of outputs}}
    instruction_id_to_num_outs_map: dict[str, dict[int, int]]
    # Initial states of mutable buffers (entry 0 reserved), None when there are none.
    mutable_data: list[S.Buffer] | None
    # Constants stored in .ptd files: their bytes, and {tag: {fqn: index into the bytes}}.
    external_constant_buffer: list[bytes]
    external_constant_map: dict[str, dict[str, int]] | None


def emit_program(methods: ExportedProgram | dict[str, ExportedProgram],
                 emit_stacktrace: bool = False, prim_getters: dict[str, Any] | None = None,
                 emit_mutable_buffer_names: bool = False) -> EmitterOutput:
    """Emit memory-planned programs (``ExecutorchProgramManager.exported_program()``) as one
    ``Program``, methods ordered by name; ``prim_getters`` become constant methods after them
    (``{name: value}``: ints, floats, bools, strings, tensors or lists of them)."""
    if isinstance(methods, ExportedProgram):
        methods = {"forward": methods}
    bad = [name for name, ep in methods.items() if not isinstance(ep, ExportedProgram)]
    if bad:
        raise ExportError(ExportErrorType.INVALID_INPUT_TYPE,
                          f"Did not receive ExportedProgram for the following methods {bad}")
    state = ProgramState()
    plans = []
    for name, ep in sorted(methods.items()):
        if "non_const_buffer_sizes" not in ep.graph_module.meta:
            raise ExportError(ExportErrorType.INVALID_INPUT_TYPE,
                              f"method {name!r} is not memory planned: emit the program "
                              "to_executorch() returns (its exported_program())")
        plans.append(MethodEmitter(name, ep, state, emit_stacktrace,
                                   emit_mutable_buffer_names).emit())
    for name, value in (prim_getters or {}).items():
        plans.append(constant_method_plan(name, value, state))
    return emitter_output(plans, state)


def emitter_output(plans: list[S.ExecutionPlan], state: ProgramState) -> EmitterOutput:
    """The ``EmitterOutput`` of emitted ``plans`` whose constants, blobs and maps ``state``
    holds (the program with its constants and delegate blobs inline)."""
    program = S.Program(
        version=S.SCHEMA_VERSION, execution_plan=plans,
        constant_buffer=[S.Buffer(bytes(b)) for b in state.constant_buffers],
        backend_delegate_data=[S.BackendDelegateInlineData(bytes(b))
                               for b in state.delegate_blobs],
        segments=[], constant_segment=S.SubsegmentOffsets(segment_index=0, offsets=[]))
    external_buffer: list[bytes] = []
    external_map: dict[str, dict[str, int]] = {}
    for tag, entries in state.external.items():
        for fqn, (data, _spec) in entries.items():
            external_map.setdefault(tag, {})[fqn] = len(external_buffer)
            external_buffer.append(data)
    return EmitterOutput(
        program=program,
        debug_handle_map=state.debug_handle_map,
        method_to_delegate_debug_id_map=state.delegate_map,
        instruction_id_to_num_outs_map=state.instruction_id_to_num_outs_map,
        mutable_data=([S.Buffer(bytes(b)) for b in state.mutable_buffers]
                      if len(state.mutable_buffers) > 1 else None),
        external_constant_buffer=external_buffer,
        external_constant_map=external_map or None,
    )
