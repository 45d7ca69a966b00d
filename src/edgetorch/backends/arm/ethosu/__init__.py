"""Arm Ethos-U: ``EthosUCompileSpec``, ``EthosUPartitioner``, ``EthosUBackend`` (TOSA, then Vela)
and ``vela_estimates``. ExecuTorch 1.5.1's names. Imported lazily: the blob format
(``vela_bin``) and the compile spec are torch-free and the runtime reads them."""

from __future__ import annotations

import importlib
from typing import Any

LAZY_IMPORTS = {
    "EthosUCompileSpec": ".compile_spec",
    "VelaExternalBlockPlacements": ".compile_spec",
    "EthosUPartitioner": ".partitioner",
    "EthosUBackend": ".backend",
    "vela_estimates": ".estimates",
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
