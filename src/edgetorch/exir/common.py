"""Schema helpers ExecuTorch keeps in ``exir.common``: operator schemas by name for error
messages, a schema's out arguments, and a scoped recursion limit."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_TORCH_OPS = re.compile(r"^torch\.ops\.([^.]+)\.(.*)")


def format_schema_name(schema: torch._C.FunctionSchema) -> str:
    """``namespace::name.overload`` (no ``.overload`` for the default overload)."""
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def get_schema_for_operators(ops: list[str]) -> dict[str, str]:
    """``{"aten::add.Tensor": schema string}`` for operator names as graphs print them
    (``torch.ops.aten.add.Tensor``); ``"<No Schema Found>"`` for unknown ones. For error
    messages: it reads every registered schema."""
    schemas = {f"{s.name}.{s.overload_name or 'default'}": str(s)
               for s in torch._C._jit_get_all_schemas()}
    names = [_TORCH_OPS.sub(r"\1::\2", op) for op in ops]
    return {name: schemas.get(name, "<No Schema Found>") for name in names}


def extract_out_arguments(schema: torch._C.FunctionSchema,
                          keyword_args: dict[str, Any]) -> tuple[str, Any] | list[tuple[str, Any]]:
    """The out arguments of an out-variant call as ``(name, value)``: one pair, or a list
    when there are several (or none). Schemas whose tensor-list out is not marked ``is_out``
    still name it ``out``."""
    outs = [(a.name, keyword_args[a.name]) for a in schema.arguments
            if a.is_out and a.name in keyword_args]
    if not outs and "out" in keyword_args:
        outs = [("out", keyword_args["out"])]
    return outs[0] if len(outs) == 1 else outs


@contextmanager
def setting_python_recursive_limit(limit: int = 10000) -> Iterator[None]:
    """Raise the interpreter's recursion limit to ``limit`` (never lower it) for the block."""
    default = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, default))
    try:
        yield
    finally:
        sys.setrecursionlimit(default)
