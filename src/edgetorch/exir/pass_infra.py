"""Passes over a whole ``ExportedProgram`` (ExecuTorch's ``ExportedProgramPassBase`` and
``ExportedProgramPassManager``), and ExecuTorch's stricter ``ProxyValue``.

A graph-module pass can only rewrite operators; a pass that adds a constant or changes the
signature needs the program. ``ExportedProgramPassManager`` runs both kinds in order on a
shallow copy of the program, re-deriving the signature after each graph-module pass, and
checks the result (no ``call_method`` nodes, ``ExportedProgram.validate``). Re-exported from
``edgetorch.exir.pass_base`` and ``edgetorch.exir.pass_manager``, ExecuTorch's import paths.
"""

from __future__ import annotations

import abc
import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx.passes.infra.pass_manager as fx
from torch._export.pass_infra.proxy_value import ProxyValue as _TorchProxyValue
from torch.export import ExportedProgram
from torch.export.exported_program import _get_updated_range_constraints
from torch.utils import _pytree as pytree

from ..errors import PassError

logger = logging.getLogger(__name__)

__all__ = ["ExportPassBaseError", "ExportedProgramPassBase", "ExportedProgramPassManager",
           "ExportedProgramPassResult", "ProxyValue"]


class ExportPassBaseError(RuntimeError):
    """A pass used a value in a way the traced graph cannot represent."""


class ProxyValue(_TorchProxyValue):
    """torch's ``ProxyValue``, refusing to turn a symbolic size into a plain Python value
    (which would silently bake one example's size into the graph)."""

    def __bool__(self) -> bool:
        if isinstance(self.data, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise ExportPassBaseError(
                "ProxyValue with symbolic data cannot be used in boolean context.")
        return bool(self.data)

    def __int__(self) -> int:
        if isinstance(self.data, torch.SymInt):
            raise ExportPassBaseError("ProxyValue with SymInt data cannot be converted to int.")
        return int(self.data)

    def __float__(self) -> float:
        if isinstance(self.data, torch.SymFloat):
            raise ExportPassBaseError(
                "ProxyValue with SymFloat data cannot be converted to float.")
        return float(self.data)

    def __index__(self) -> int:
        if isinstance(self.data, torch.SymInt):
            raise ExportPassBaseError(
                "ProxyValue with SymInt data cannot be used in index context.")
        return self.__int__()


@dataclass(frozen=True)
class ExportedProgramPassResult:
    exported_program: ExportedProgram
    modified: bool


class ExportedProgramPassBase(abc.ABC):
    """A pass over a whole program: implement ``call(ep) -> ExportedProgramPassResult``;
    ``requires``/``ensures`` run before and after it."""

    def __call__(self, exported_program: ExportedProgram) -> ExportedProgramPassResult:
        self.requires(exported_program)
        result = self.call(exported_program)
        self.ensures(exported_program)
        return result

    @abc.abstractmethod
    def call(self, exported_program: ExportedProgram) -> ExportedProgramPassResult:
        """Run the pass."""

    def requires(self, exported_program: ExportedProgram) -> None:  # noqa: B027
        """Check the pass's preconditions (optional)."""

    def ensures(self, exported_program: ExportedProgram) -> None:  # noqa: B027
        """Check the pass's postconditions (optional)."""


def _name(p: Any) -> str:
    return getattr(p, "__name__", type(p).__name__)


class ExportedProgramPassManager(fx.PassManager):
    """Run graph-module passes and program passes, in order, on a copy of a program."""

    def __init__(self, passes: list | None = None,
                 constraints: list[Callable[[Callable, Callable], bool]] | None = None,
                 run_checks_after_each_pass: bool = False,
                 suppress_check_failures: bool = False, steps: int = 1) -> None:
        wrapped = [p if isinstance(p, ExportedProgramPassBase) else fx.pass_result_wrapper(p)
                   for p in pytree.tree_flatten(passes or [])[0]]
        super().__init__(wrapped, constraints=constraints,
                         run_checks_after_each_pass=run_checks_after_each_pass,
                         suppress_check_failures=suppress_check_failures, steps=steps)

    def check(self, exported_program: ExportedProgram) -> None:  # type: ignore[override]
        gm = exported_program.graph_module
        gm.recompile()
        gm.graph.lint()
        for node in gm.graph.nodes:
            if node.op == "call_method":
                raise PassError(f"call_method node %{node.name} ({node.target}) is not "
                                "supported except for backend delegates; call the operator "
                                "instead")
        exported_program.validate()

    def __call__(self, exported_program: ExportedProgram,  # type: ignore[override]
                 override_verifiers: list | None = None) -> ExportedProgramPassResult:
        if not self._validated:
            self.solve_constraints()
        ep = copy.copy(exported_program)
        if override_verifiers:
            ep._verifiers = override_verifiers
        self.check(ep)
        overall = False
        for _ in range(self.steps):
            step = False
            for i, fn in enumerate(self.passes):
                try:
                    ep, changed = self._run_one(fn, ep)
                    if self.run_checks_after_each_pass:
                        self.check(ep)
                except Exception as e:
                    before = [_name(p) for p in self.passes[:i]]
                    raise PassError(f"pass {_name(fn)!r} failed (after {before}): "
                                    f"{type(e).__name__}: {e}") from e
                step = step or bool(changed)
            overall = overall or step
            if not step:
                break
        self.check(ep)
        return ExportedProgramPassResult(ep, overall)

    @staticmethod
    def _run_one(fn: Any, ep: ExportedProgram) -> tuple[ExportedProgram, bool]:
        if isinstance(fn, ExportedProgramPassBase):
            res = fn(ep)
            if res.modified:
                res.exported_program.graph_module.recompile()
            return res.exported_program, res.modified
        res = fn(ep.graph_module)
        if res is None:
            raise TypeError(f"pass {_name(fn)} returned None; return a PassResult")
        if not res.modified:
            return ep, False
        res.graph_module.recompile()
        from .pass_base import adopt_graph_module

        # The copy shares its signature with the caller's program: give it its own first.
        ep._graph_signature = copy.deepcopy(ep.graph_signature)
        adopt_graph_module(ep, res.graph_module)
        ep._range_constraints = _get_updated_range_constraints(res.graph_module,
                                                               ep.range_constraints)
        return ep, True
