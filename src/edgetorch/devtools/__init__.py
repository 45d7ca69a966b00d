"""Developer tools (``executorch.devtools``): ETRecord, the Inspector, delegation reports in
``backend_debug``. Names load on first use, so importing ``edgetorch.devtools`` stays cheap."""

from typing import Any

_LAZY = {"ETRecord": "etrecord", "generate_etrecord": "etrecord", "parse_etrecord": "etrecord",
         "Inspector": "inspector", "TimeScale": "inspector"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
