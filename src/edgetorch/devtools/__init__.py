"""Developer tools (``executorch.devtools``): ETRecord, the Inspector, BundledProgram, delegation
reports in ``backend_debug``. Names load on first use, so importing ``edgetorch.devtools`` stays cheap."""

from typing import Any

_ETRECORD = ("ETRecord", "generate_etrecord", "parse_etrecord")
_INSPECTOR = ("Inspector", "TimeScale")


def __getattr__(name: str) -> Any:
    if name in _ETRECORD:
        from . import etrecord

        return getattr(etrecord, name)
    if name in _INSPECTOR:
        from . import inspector

        return getattr(inspector, name)
    if name == "BundledProgram":
        from .bundled_program.core import BundledProgram

        return BundledProgram
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
