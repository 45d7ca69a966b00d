"""Arm VGF (Vulkan ML extensions): ``VgfCompileSpec``, ``VgfPartitioner``, ``VgfBackend`` --
the TOSA lowering, then Arm's ML SDK model converter, as ExecuTorch 1.5.1 runs them. Imported
lazily: the compile spec and the converter lookup are torch-free."""

from __future__ import annotations

import importlib
from typing import Any

LAZY_IMPORTS = {
    "VgfCompileSpec": ".compile_spec",
    "VgfPartitioner": ".partitioner",
    "VgfBackend": ".backend",
}

__all__ = sorted(LAZY_IMPORTS)


def __getattr__(name: str) -> Any:
    if name in LAZY_IMPORTS:
        value = getattr(importlib.import_module(LAZY_IMPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(LAZY_IMPORTS))
