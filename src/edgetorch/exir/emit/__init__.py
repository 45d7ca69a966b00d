"""Emission: lowered graphs -> program.fbs dataclasses."""

from ._emit_program import EmitterOutput, emit_program
from .emitter import MethodEmitter, ProgramState

__all__ = ["EmitterOutput", "MethodEmitter", "ProgramState", "emit_program"]
