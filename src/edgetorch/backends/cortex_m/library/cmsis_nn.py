"""CMSIS-NN's kernel selection and buffer-size functions, from the first implementation found.

ExecuTorch calls CMSIS-NN's C functions through a pybind module it bundles, or else an
installed ``cmsis_nn`` package. edgetorch bundles the same functions in Python
(``_cmsis_nn/cmsis_nn.py``) and resolves in the same order: the bundled module, then an
installed ``cmsis_nn``; with neither, using a name raises ``DependencyMissingError`` (a
``ModuleNotFoundError``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ....errors import DependencyMissingError

BUNDLED_MODULE = f"{__package__}._cmsis_nn.cmsis_nn"
EXTERNAL_MODULE = "cmsis_nn"


def _absent(name: str, err: ModuleNotFoundError) -> bool:
    """``err`` says ``name`` itself (or its package) is missing, not a dependency inside it."""
    return err.name is not None and (name == err.name or name.startswith(err.name + "."))


def _resolve() -> ModuleType | None:
    # (two import statements, not a loop over names: no module name here is ever computed)
    try:
        from ._cmsis_nn import cmsis_nn as bundled

        return bundled
    except ModuleNotFoundError as err:
        if not _absent(BUNDLED_MODULE, err):
            raise
    try:
        import cmsis_nn as external

        return external
    except ModuleNotFoundError as err:
        if not _absent(EXTERNAL_MODULE, err):
            raise
    return None


_IMPLEMENTATION = _resolve()


def __getattr__(name: str) -> Any:
    if _IMPLEMENTATION is None:
        raise DependencyMissingError(
            f"Cortex-M backend dependencies are not installed: neither {BUNDLED_MODULE} nor "
            f"an installed {EXTERNAL_MODULE!r} package can be imported (wanted {name!r}); "
            "reinstall edgetorch")
    return getattr(_IMPLEMENTATION, name)
