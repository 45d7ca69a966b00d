"""``EthosUPartitioner``: the TOSA partitioner's operator support for the spec's TOSA profile
(U55/U65 restrictions included), delegating to ``EthosUBackend``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

from ....exir.backend.partitioner import DelegationSpec
from ..tosa.partitioner import TOSAPartitioner
from . import backend as _backend  # noqa: F401  (registers "EthosUBackend" for to_backend)
from .compile_spec import EthosUCompileSpec


@final
class EthosUPartitioner(TOSAPartitioner):
    """Partition for an Ethos-U NPU. As in ExecuTorch, the compile specs stored in the ``.pte``
    are those of ``compile_spec`` when the partitioner is built: build it after quantizing
    with the same spec (quantizing fixes the U55/U65 pipeline config)."""

    backend_id = "EthosUBackend"

    def __init__(self, compile_spec: EthosUCompileSpec,
                 additional_checks: Sequence[Any] | None = None) -> None:
        super().__init__(compile_spec, additional_checks)
        self.delegation_spec = DelegationSpec("EthosUBackend", compile_spec._to_list())
        self.compile_spec = compile_spec
