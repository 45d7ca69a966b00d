"""``capture(f, args, config)``: ExecuTorch's legacy entry point, on ``torch.export`` and
``to_edge``.

ExecuTorch's legacy path traced with Dynamo and its own functionalization; today's
``torch.export.export`` gives the same ATen graph for the models that path still supports, so
``capture`` exports ``f`` (strict) and the returned :class:`ExirExportedProgram` keeps
ExecuTorch's shape: an ``exported_program`` attribute, ``to_edge()``, ``transform()``,
``to_executorch()``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram

from ...errors import ExportError
from ..config import EdgeCompileConfig, ExecutorchBackendConfig


@dataclass
class CaptureConfig:
    """The legacy options. Only ``enable_aot``/``enable_dynamic_shape`` have a meaning left:
    dynamic shapes come from ``dynamic_shapes`` as in ``torch.export``."""

    pt2_mode: bool = True
    enable_functionalization: bool = True
    enable_dynamic_shape: bool = False
    enable_aot: bool = False
    _unlift: bool = False
    _use_old_decomp_table: bool = False


@contextlib.contextmanager
def patch_forward(obj: torch.nn.Module, new_method: Callable) -> Iterator[None]:
    """Export another method of ``obj``: within the block, ``obj.forward`` is ``new_method``."""
    original = obj.forward
    obj.forward = new_method.__get__(obj, obj.__class__)
    try:
        yield
    finally:
        obj.forward = original


class WrapperModule(torch.nn.Module):
    """A module whose ``forward`` is the function ``f`` (what ``capture`` exports)."""

    def __init__(self, f: Callable) -> None:
        super().__init__()
        self.forward = f


class ExirExportedProgram:
    """One captured program: ``exported_program`` is ATen before ``to_edge``, Edge after."""

    def __init__(self, exported_program: ExportedProgram, after_to_edge_passes: bool,
                 compile_config: EdgeCompileConfig | None = None) -> None:
        self.exported_program = exported_program
        self.after_to_edge_passes = after_to_edge_passes
        self.compile_config = compile_config or EdgeCompileConfig()

    def __call__(self, *args: Any) -> Any:
        return self.exported_program.module()(*args)

    def dump(self) -> None:
        print(self.exported_program.graph_module.graph)

    def _manager(self) -> Any:
        from ..program import EdgeProgramManager

        return EdgeProgramManager({"forward": self.exported_program},
                                  compile_config=self.compile_config)

    def to_edge(self, config: EdgeCompileConfig | None = None) -> ExirExportedProgram:
        from ..program import to_edge

        config = config or EdgeCompileConfig()
        edge = to_edge(self.exported_program, compile_config=config)
        return ExirExportedProgram(edge.exported_program(), True, config)

    def transform(self, *passes: Any) -> ExirExportedProgram:
        self.exported_program = self._manager().transform(list(passes)).exported_program()
        return self

    def to_executorch(self, config: ExecutorchBackendConfig | None = None) -> Any:
        if not self.after_to_edge_passes:
            raise ExportError("to_executorch needs an Edge program: call .to_edge() first")
        return self._manager().to_executorch(config)


def capture(f: Callable[..., Any], args: tuple, config: CaptureConfig | None = None,
            dynamic_shapes: Any = None) -> ExirExportedProgram:
    """Export ``f`` (a function or module) on ``args``. Deprecated, as in ExecuTorch."""
    warnings.warn("exir.capture is deprecated, please use torch.export and exir.to_edge "
                  "instead.", DeprecationWarning, stacklevel=2)
    if not isinstance(args, tuple):
        raise ExportError(f"capture expects args to be a tuple, got {type(args).__name__}; "
                          "wrap a single input as (x,)")
    module = f if isinstance(f, torch.nn.Module) else WrapperModule(f)
    ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=True)
    return ExirExportedProgram(ep, False)
