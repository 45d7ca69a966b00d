"""TOSA's flatbuffer schema, to read a TOSA file as JSON with ``flatc``.

``tosa.fbs`` is ARM's schema from the TOSA reference model (Apache-2.0, its header kept), as
tosa-tools 2026.5.0 ships it. TOSA's schema only grows at the end of its enums, unions and
tables, so this one reads TOSA 1.0 and 1.1 files alike; ``tosa_1.0.fbs`` and ``tosa_1.1.fbs``
(the per-version names ExecuTorch's tools ask for) link to it."""

from __future__ import annotations

from pathlib import Path

SCHEMA = Path(__file__).with_name("tosa.fbs")


def schema_path(major: int, minor: int) -> Path:
    """The schema file for TOSA ``major.minor``."""
    return Path(__file__).with_name(f"tosa_{major}.{minor}.fbs")
