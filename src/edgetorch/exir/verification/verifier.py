"""``EXIRATenDialectVerifier`` and ``EXIREdgeDialectVerifier`` (ExecuTorch's names): torch
export verifiers that check a graph is in core ATen, or in the Edge dialect over core ATen.

They answer "is this graph well-formed IR" with ExecuTorch's rules (``to_edge`` asks the same
through ``edgetorch.exir.verifier.verify_edge_program``, with edgetorch's messages); whether
edgetorch's runtime can run every node is ``to_executorch``'s question. Operators outside the
``aten`` namespace (custom ops) are accepted, as ExecuTorch accepts them.
"""

from __future__ import annotations

import operator
import types
from typing import Any

import torch
from torch._export.verifier import SpecViolationError, Verifier
from torch._ops import OpOverload

from ..dialects.edge._ops import EdgeOpOverload
from ..lowered_backend_module import LoweredBackendModule
from ..verifier import aten_op, core_aten_problem


def _check_core_aten(op: OpOverload, exceptions: list, preserve_ops: list) -> None:
    problem = core_aten_problem(op, exceptions, preserve_ops)
    if problem is not None:
        raise SpecViolationError(
            f"{problem}. Try: to_edge(..., compile_config=EdgeCompileConfig("
            f"_core_aten_ops_exception_list=[torch.ops.{aten_op(op)}])) if your "
            "backend or runtime handles it, or export under torch.no_grad() for inference")


def _lists(edge_compile_config: Any, exceptions: list | None,
           preserve_ops: list | None) -> tuple[list, list]:
    exceptions, preserve_ops = list(exceptions or []), list(preserve_ops or [])
    if edge_compile_config is not None:
        exceptions += list(edge_compile_config._core_aten_ops_exception_list or [])
        preserve_ops += list(edge_compile_config.preserve_ops or [])
    return exceptions, preserve_ops


def EXIRATenDialectVerifier(edge_compile_config: Any = None, class_only: bool = False,  # noqa: N802
                            core_aten_ops_exception_list: list | None = None,
                            preserve_ops: list | None = None) -> Any:
    """A verifier (an instance, or the class with ``class_only``) that refuses ATen operators
    outside core ATen, except the listed exceptions and preserved operators."""
    exceptions, preserved = _lists(edge_compile_config, core_aten_ops_exception_list,
                                   preserve_ops)

    class _ATenVerifier(Verifier):
        dialect = "OLD_EXIR_ATEN"

        def allowed_getattr_types(self) -> tuple[type, ...]:
            return (torch.fx.GraphModule, torch.Tensor, torch.ScriptObject)

        def check_valid_op(self, op: Any) -> None:
            if isinstance(op, OpOverload):
                _check_core_aten(op, exceptions, preserved)

        def __call__(self, ep_or_gm: Any) -> None:
            gm = getattr(ep_or_gm, "graph_module", ep_or_gm)
            self._check_graph_module(gm)

    return _ATenVerifier if class_only else _ATenVerifier()


def EXIREdgeDialectVerifier(edge_compile_config: Any = None, class_only: bool = False,  # noqa: N802
                            core_aten_ops_exception_list: list | None = None,
                            preserve_ops: list | None = None) -> Any:
    """A verifier (an instance, or the class with ``class_only``) that every ATen operator is
    an Edge operator (``exir_ops.edge.*``) over core ATen; ``_check_ir_validity=False`` in the
    config turns it off."""
    exceptions, preserved = _lists(edge_compile_config, core_aten_ops_exception_list,
                                   preserve_ops)
    enabled = edge_compile_config is None or edge_compile_config._check_ir_validity

    class _EdgeVerifier(Verifier):
        dialect = "EDGE"

        def allowed_getattr_types(self) -> tuple[type, ...]:
            return (torch.fx.GraphModule, LoweredBackendModule, torch.Tensor, torch.ScriptObject)

        def allowed_op_types(self) -> tuple[type, ...]:
            return (*super().allowed_op_types(), EdgeOpOverload, types.FunctionType)

        def check_valid_op(self, op: Any) -> None:
            if not enabled or op is operator.getitem or op in exceptions:
                return
            if isinstance(op, EdgeOpOverload):
                _check_core_aten(op._op, exceptions, preserved)
            elif isinstance(op, OpOverload) and op.namespace == "aten":
                raise SpecViolationError(f"operator {op} is not an Edge operator; Edge graphs "
                                         "call exir_ops.edge.aten.* (to_edge converts them)")

        def is_valid(self, gm: torch.fx.GraphModule) -> bool:
            try:
                self(gm)
            except SpecViolationError:
                return False
            return True

        def __call__(self, ep_or_gm: Any) -> None:
            if enabled:
                self._check_graph_module(getattr(ep_or_gm, "graph_module", ep_or_gm))

    return _EdgeVerifier if class_only else _EdgeVerifier()
