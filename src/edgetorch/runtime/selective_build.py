"""Selective build: which operators (and dtypes) programs need, and a runtime limited to them.

The Python analogue of ExecuTorch's ``EXECUTORCH_SELECT_OPS_MODEL`` and dtype-selective build.
:func:`gen_oplist` writes ExecuTorch's ``selected_operators.yaml`` for one or more ``.pte``
files with the keys and values ``codegen/tools/gen_oplist.py`` (1.5.1) writes: every operator
of every plan's operator table (``is_root_operator``/``is_used_for_training`` true,
``include_all_overloads`` false, ``debug_info`` naming the models), and ``et_kernel_metadata``:
per operator, the sorted kernel keys of its calls, ``v1/<dtype>;<dim order>|...`` over the
call's tensor arguments (a tensor list counts as its first tensor), ``v1`` for a call without
tensors.

:class:`SelectedOperators` reads such a file. A program loaded with one
(``Runtime.get().load_program(pte, selected_ops="selected_operators.yaml")``, or every program
when ``EDGETORCH_SELECTED_OPS`` names a file) fails at ``load_method`` with
``OperatorMissingError`` naming every operator, and every operator dtype, it would need beyond
the selection. Dtypes follow ``gen_selected_op_variants.py``: an operator allows the dtypes that
appear in its kernel keys; a ``default`` key, or a key without dtypes, allows all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError, OperatorMissingError
from ..schema import program as S
from ..schema.scalar_type import ScalarType
from . import _mini_yaml

ENV_VAR = "EDGETORCH_SELECTED_OPS"


def _op_name(op: S.Operator) -> str:
    return f"{op.name}.{op.overload}" if op.overload else op.name


def _tensor_key(t: S.Tensor) -> str:
    return f"{int(t.scalar_type)};{','.join(str(int(d)) for d in t.dim_order)}"


def _call_key(plan: S.ExecutionPlan, call: S.KernelCall) -> str:
    """ExecuTorch's kernel key of one call (``selective_build.cpp``'s IO metadata)."""
    parts = []
    for idx in call.args:
        val = plan.values[int(idx)].val
        tensor = None
        if isinstance(val, S.Tensor):
            tensor = val
        elif isinstance(val, (S.TensorList, S.OptionalTensorList)):
            for item in val.items:  # the first tensor speaks for the whole list
                item_val = plan.values[int(item)].val if int(item) >= 0 else None
                if isinstance(item_val, S.Tensor):
                    tensor = item_val
                    break
        if tensor is not None:
            parts.append(_tensor_key(tensor))
    return "v1/" + "|".join(parts) if parts else "v1"


def plan_operators(plan: S.ExecutionPlan) -> list[str]:
    """The plan's operator table, as ``name.overload`` strings."""
    return [_op_name(op) for op in plan.operators]


def plan_kernel_keys(plan: S.ExecutionPlan) -> dict[str, set[str]]:
    """Kernel keys per operator over the plan's kernel calls."""
    keys: dict[str, set[str]] = {}
    for chain in plan.chains:
        for ins in chain.instructions:
            call = ins.instr_args
            if isinstance(call, S.KernelCall):
                name = _op_name(plan.operators[int(call.op_index)])
                keys.setdefault(name, set()).add(_call_key(plan, call))
    return keys


def _dtypes_of_key(key: str) -> set[int] | None:
    """The dtypes a kernel key names; None when it allows every dtype."""
    if key == "default" or "/" not in key:
        return None
    body = key.split("/", 1)[1]
    return {int(part.split(";", 1)[0]) for part in body.split("|") if part.split(";", 1)[0]}


def _dtype_name(code: int) -> str:
    try:
        return ScalarType(code).name.lower()
    except ValueError:
        return f"scalar type {code}"


def gen_oplist(programs: Iterable[tuple[str, S.Program]]) -> dict[str, Any]:
    """The ``selected_operators.yaml`` content for ``(model name, program)`` pairs."""
    operators: dict[str, dict[str, Any]] = {}
    metadata: dict[str, set[str]] = {}
    for model, program in programs:
        for plan in program.execution_plan:
            for name in plan_operators(plan):
                entry = operators.setdefault(name, {
                    "is_root_operator": True, "is_used_for_training": True,
                    "include_all_overloads": False, "debug_info": []})
                if model not in entry["debug_info"]:
                    entry["debug_info"].append(model)
            for name, keys in plan_kernel_keys(plan).items():
                metadata.setdefault(name, set()).update(keys)
    return {
        "build_features": [], "custom_classes": [],
        "et_kernel_metadata": {name: sorted(keys) for name, keys in metadata.items()},
        "include_all_non_op_selectives": False, "include_all_operators": False,
        "kernel_metadata": {}, "operators": operators,
    }


def dump_oplist(oplist: dict[str, Any]) -> str:
    """YAML text as ``yaml.safe_dump(oplist, default_flow_style=False)`` writes it."""
    return _mini_yaml.dump(oplist)


@dataclass
class SelectedOperators:
    """A selection read from ``selected_operators.yaml`` (or built in code)."""

    operators: set[str] = field(default_factory=set)
    # per operator: the allowed dtypes (ScalarType values); None or absent: any dtype
    dtypes: dict[str, set[int] | None] = field(default_factory=dict)
    include_all_operators: bool = False
    all_overloads: set[str] = field(default_factory=set)  # base names, include_all_overloads
    source: str = "<selection>"

    @classmethod
    def from_dict(cls, data: Any, source: str = "<selection>") -> SelectedOperators:
        if not isinstance(data, dict):
            raise InvalidArgumentError(f"{source}: expected a mapping with 'operators' "
                                       f"(ExecuTorch's selected_operators.yaml), got {type(data).__name__}")
        ops = data.get("operators") or {}
        if isinstance(ops, list):  # a plain list of operator names is accepted too
            ops = {name: {} for name in ops}
        if not isinstance(ops, dict):
            raise InvalidArgumentError(f"{source}: 'operators' must map operator names to options")
        sel = cls(set(ops), {}, bool(data.get("include_all_operators", False)), set(), source)
        for name, options in ops.items():
            if isinstance(options, dict) and options.get("include_all_overloads"):
                sel.all_overloads.add(name.split(".", 1)[0])
        for name, keys in (data.get("et_kernel_metadata") or {}).items():
            found = [_dtypes_of_key(str(key)) for key in keys or ["default"]]
            sel.dtypes[name] = None if any(f is None for f in found) else \
                set().union(*(f for f in found if f is not None))
        return sel

    @classmethod
    def load(cls, path: str | os.PathLike) -> SelectedOperators:
        path = os.fspath(path)
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise InvalidArgumentError(f"cannot read the operator selection {path!r}: {e}; "
                                       f"write one with 'edgetorch oplist model.pte -o {path}'") from e
        try:
            data = _mini_yaml.load(text, path)
        except ValueError as e:
            raise InvalidArgumentError(f"operator selection {path} is not valid: {e}") from e
        return cls.from_dict(data, path)

    @classmethod
    def from_env(cls) -> SelectedOperators | None:
        path = os.environ.get(ENV_VAR)
        return cls.load(path) if path else None

    def allows_operator(self, name: str) -> bool:
        return (self.include_all_operators or name in self.operators
                or name.split(".", 1)[0] in self.all_overloads)

    def missing(self, plan: S.ExecutionPlan) -> list[str]:
        """What ``plan`` needs beyond the selection: operators, then ``op (dtype)`` pairs."""
        problems: list[str] = []
        for name in plan_operators(plan):
            if not self.allows_operator(name) and name not in problems:
                problems.append(name)
        for name, keys in sorted(plan_kernel_keys(plan).items()):
            allowed = self.dtypes.get(name)
            if name in problems or allowed is None:
                continue
            needed: set[int] = set()
            for key in keys:
                needed |= _dtypes_of_key(key) or set()
            for code in sorted(needed - allowed):
                problems.append(f"{name} ({_dtype_name(code)})")
        return problems

    def check(self, plan: S.ExecutionPlan, where: str) -> None:
        problems = self.missing(plan)
        if problems:
            raise OperatorMissingError(
                f"{where} needs {len(problems)} operator(s) outside the selected operators "
                f"({self.source}): {', '.join(problems)}. Regenerate the selection with "
                "'edgetorch oplist' over every program this runtime must run, or load without "
                f"selected_ops (unset {ENV_VAR}).")


def resolve(selected_ops: Any) -> SelectedOperators | None:
    """``load_program``'s ``selected_ops``: a path, a mapping, a SelectedOperators, an
    iterable of operator names, None (then ``EDGETORCH_SELECTED_OPS``), or False (none)."""
    if selected_ops is False:
        return None
    if selected_ops is None:
        return SelectedOperators.from_env()
    if isinstance(selected_ops, SelectedOperators):
        return selected_ops
    if isinstance(selected_ops, (str, os.PathLike)):
        return SelectedOperators.load(selected_ops)
    if isinstance(selected_ops, dict):
        return SelectedOperators.from_dict(selected_ops)
    return SelectedOperators(set(selected_ops), source="<operator names>")
