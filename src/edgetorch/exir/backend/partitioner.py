"""``Partitioner``: decides which nodes of a program a backend takes.

A partitioner tags nodes (``node.meta["delegation_tag"] = tag``) on the program it is given
and returns ``PartitionResult(tagged_exported_program, partition_tags={tag: DelegationSpec})``.
Each tag becomes one delegated subgraph. It must not otherwise change the program.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram

from .compile_spec_schema import CompileSpec

logger = logging.getLogger(__name__)

TAG = "delegation_tag"


class DelegationSpec(NamedTuple):
    backend_id: str
    compile_specs: list[CompileSpec]


@dataclass
class PartitionResult:
    """The tagged program and, for every tag used, the backend it goes to."""

    tagged_exported_program: ExportedProgram
    partition_tags: dict[str, DelegationSpec]


class Partitioner(ABC):
    """Base class of partitioners (same interface as ExecuTorch's).

    Subclasses implement ``partition``; they may explain why they left a node out with
    ``self.reject(node, reason)``. After ``partition``, the base class logs (logger
    ``edgetorch.exir.backend.partitioner``, level INFO) every operator left undelegated and
    why -- turn it on with ``logging.basicConfig(level=logging.INFO)``.
    """

    def __init__(self, spec: Mapping[str | int | float | bool, object] = MappingProxyType({})):
        self._spec = spec

    @property
    def spec(self) -> Mapping[str | int | float | bool, object]:
        return self._spec

    def __call__(self, exported_program: ExportedProgram) -> PartitionResult:
        self._rejected = {}
        result = self.partition(exported_program)
        self._log_left_out(result)
        return result

    @abstractmethod
    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag the nodes to delegate; return them with the tag -> ``DelegationSpec`` map."""

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[OpOverload], Callable[[torch.fx.Node], bool] | None]:
        """Operators ``to_edge_transform_and_lower`` must keep whole for this backend, and an
        optional filter: ``filter(node) is False`` lets that node be decomposed after all."""
        return ([], None)

    def reject(self, node: torch.fx.Node, reason: str) -> None:
        """Record why ``node`` was not taken (logged after ``partition``)."""
        rejected = self.__dict__.setdefault("_rejected", {})
        rejected.setdefault(node.name, reason)

    def _log_left_out(self, result: PartitionResult) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        rejected = self.__dict__.get("_rejected", {})
        name = type(self).__name__
        for node in result.tagged_exported_program.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, OpOverload):
                continue
            if node.meta.get(TAG) is not None:
                continue
            why = rejected.get(node.name, "not supported by this partitioner")
            logger.info("%s did not take %%%s (%s): %s", name, node.name, node.target, why)
