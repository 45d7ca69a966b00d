"""The Arm backends: TOSA (``TOSABackend``) and Ethos-U (``EthosUBackend``, via Vela).

ExecuTorch 1.5.1's names, under ``edgetorch.backends.arm``. The public names below are imported
lazily so ``import edgetorch.backends.arm`` stays cheap and the Ethos-U half (which needs
``ethos-u-vela``) is only loaded when asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

LAZY_IMPORTS = {
    "EthosUBackend": ("edgetorch.backends.arm.ethosu", "EthosUBackend"),
    "EthosUCompileSpec": ("edgetorch.backends.arm.ethosu", "EthosUCompileSpec"),
    "EthosUPartitioner": ("edgetorch.backends.arm.ethosu", "EthosUPartitioner"),
    "VelaExternalBlockPlacements": ("edgetorch.backends.arm.ethosu", "VelaExternalBlockPlacements"),
    "EthosUQuantizer": ("edgetorch.backends.arm.quantizer", "EthosUQuantizer"),
    "TOSAQuantizer": ("edgetorch.backends.arm.quantizer", "TOSAQuantizer"),
    "get_symmetric_quantization_config": ("edgetorch.backends.arm.quantizer",
                                          "get_symmetric_quantization_config"),
    "TosaCompileSpec": ("edgetorch.backends.arm.tosa.compile_spec", "TosaCompileSpec"),
    "TOSAPartitioner": ("edgetorch.backends.arm.tosa.partitioner", "TOSAPartitioner"),
    "TOSABackend": ("edgetorch.backends.arm.tosa.backend", "TOSABackend"),
}


def __getattr__(name: str) -> Any:
    if name in LAZY_IMPORTS:
        module_name, attr = LAZY_IMPORTS[name]
        value = getattr(importlib.import_module(module_name), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(LAZY_IMPORTS))
