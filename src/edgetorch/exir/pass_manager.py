"""``PassManager``: run a list of passes on a graph module, with checks between them.

ExecuTorch's call shape (``PassManager(passes, run_checks_after_each_pass,
suppress_check_failures)``, ``add_checks``, ``pm(graph_module) -> PassResult``) over torch.fx's
pass manager, which orders passes by constraints and names the failing pass and the passes
that ran before it. A ``PassManager`` is itself a pass, so it can be given to
``EdgeProgramManager.transform``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TypeAlias

import torch
import torch.fx.passes.infra.pass_manager as fx
from torch.fx.passes.infra.pass_base import PassResult
from torch.utils import _pytree as pytree

from ..errors import PassError
from .pass_infra import (
    ExportedProgramPassBase,
    ExportedProgramPassManager,  # noqa: F401  (ExecuTorch's import path)
)

# What a pass manager accepts: an ExportedProgram pass, or a callable on a graph module
# returning a PassResult (or None when it edits the graph in place).
PassType: TypeAlias = ExportedProgramPassBase | Callable[[torch.fx.GraphModule], PassResult | None]

logger = logging.getLogger(__name__)


class PassManager(fx.PassManager):
    def __init__(self, passes: list | None = None, run_checks_after_each_pass: bool = False,
                 suppress_check_failures: bool = False, steps: int = 1) -> None:
        flat = [fx.pass_result_wrapper(p) for p in pytree.tree_flatten(passes or [])[0]]
        super().__init__(flat, run_checks_after_each_pass=run_checks_after_each_pass,
                         suppress_check_failures=suppress_check_failures, steps=steps)
        self._checks: list[Callable[[torch.nn.Module], None]] = []

    def add_checks(self, check: Callable[[torch.nn.Module], None]) -> None:
        """Add a check ``check(graph_module)`` run before the passes, and after each one when
        ``run_checks_after_each_pass`` is set."""
        if len(inspect.signature(check).parameters) != 1:
            raise TypeError("a PassManager check takes one argument, the graph module")
        self._checks.append(check)

    def check(self, module: torch.nn.Module) -> None:
        """The graph is a linted ``GraphModule`` without ``call_method`` nodes, and every
        added check passes (failures are logged instead when ``suppress_check_failures``)."""
        try:
            if not isinstance(module, torch.fx.GraphModule):
                raise PassError(f"passes run on torch.fx.GraphModule, got {type(module).__name__}")
            module.recompile()
            module.graph.lint()
            for node in module.graph.nodes:
                if node.op == "call_method":
                    raise PassError(f"call_method node %{node.name} ({node.target}) is not "
                                    "allowed in an Edge graph; call the operator instead")
            for check in self._checks:
                check(module)
        except Exception as e:
            if not self.suppress_check_failures:
                raise
            logger.warning("PassManager check failed (suppressed): %s: %s", type(e).__name__, e)
