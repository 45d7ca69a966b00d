"""Emission: lowered graphs -> program.fbs dataclasses."""

from .emitter import MethodEmitter, ProgramState

__all__ = ["MethodEmitter", "ProgramState"]
