"""``VgfPartitioner``: the TOSA partitioner's operator support for the spec's TOSA profile,
delegating to ``VgfBackend``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

from ....exir.backend.partitioner import DelegationSpec
from ..tosa.partitioner import TOSAPartitioner
from . import backend as _backend  # noqa: F401  (registers "VgfBackend" for to_backend)
from .compile_spec import VgfCompileSpec


@final
class VgfPartitioner(TOSAPartitioner):
    """Partition for a VGF (Vulkan ML) target; ExecuTorch's grid-sampler custom lowering is not
    implemented (grid_sampler_2d stays on the CPU)."""

    backend_id = "VgfBackend"

    def __init__(self, compile_spec: VgfCompileSpec,
                 additional_checks: Sequence[Any] | None = None) -> None:
        super().__init__(compile_spec, additional_checks)
        self.delegation_spec = DelegationSpec("VgfBackend", compile_spec._to_list())
        self.compile_spec = compile_spec
