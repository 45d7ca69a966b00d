"""The ``cortex_m::`` operators: definitions for export (torch) and their reference math."""

from .operators import SCHEMAS, define_ops

__all__ = ["SCHEMAS", "define_ops"]
