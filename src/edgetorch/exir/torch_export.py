"""``export_program``: ``torch.export.export`` as edgetorch's own flows call it (the CLI, the
quantization recipes, the example and LLM scripts), with torch's noise filtered and a
data-dependent branch reported in a few lines that point to ``torch.cond``.

On such a branch torch prints the partial graph to stderr, then raises an error of ~40 lines
whose traceback runs through ~150 lines of torch internals. The partial graph is held back
(stderr is collected during the call and passed on unless the error is the one reported here)
and the error becomes a :class:`DataDependentControlFlowError` naming the user's line.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import traceback
from typing import Any

import torch

from ..errors import DataDependentControlFlowError
from .foreign_warnings import filtered

_TORCH_DIR = os.path.dirname(torch.__file__)
_EDGETORCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIB_DIRS = tuple(os.path.dirname(p) for p in (os.__file__, contextlib.__file__))
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')

HINT = ("Export traces one path through the model, so a Python 'if' (or 'while', 'and', "
        "'bool()') on a tensor's values cannot be captured. Write the branch as "
        "torch.cond(pred, true_fn, false_fn, (x,)) - edgetorch runs it as ExecuTorch's jump "
        "instructions - or compute both sides and pick with torch.where(pred, a, b).")


def export_program(model: torch.nn.Module, args: tuple, *posargs: Any, **kwargs: Any):
    """``torch.export.export(model, args, ...)``; raises DataDependentControlFlowError for a
    branch on tensor values."""
    held = io.StringIO()
    try:
        with filtered(), contextlib.redirect_stderr(held):
            program = torch.export.export(model, args, *posargs, **kwargs)
    except Exception as e:
        if _is_data_dependent(e):
            raise _data_dependent_error(e) from None
        sys.stderr.write(held.getvalue())
        raise
    sys.stderr.write(held.getvalue())
    return program


def _is_data_dependent(e: BaseException) -> bool:
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    if isinstance(e, GuardOnDataDependentSymNode):  # non-strict export
        return True
    # strict export (Dynamo): "Data-dependent branching ... Use `torch.cond`"
    return type(e).__name__ == "Unsupported" and "Data-dependent branching" in str(e)


def _user_frame(e: BaseException) -> tuple[str, int, str] | None:
    """The deepest (file, line, code) outside torch, edgetorch and the standard library: from
    the traceback (non-strict export runs the user's Python) or the message (Dynamo's)."""
    def mine(path: str) -> bool:
        path = os.path.abspath(path)
        return not path.startswith((_TORCH_DIR, _EDGETORCH_DIR) + _LIB_DIRS) and \
            not path.startswith("<")

    frames = [(f.filename, f.lineno or 0, f.line or "")
              for f in traceback.extract_tb(e.__traceback__) if mine(f.filename)]
    if not frames:
        import linecache

        frames = [(path, int(line), linecache.getline(path, int(line)).strip())
                  for path, line in _FILE_LINE.findall(str(e)) if mine(path)]
    return frames[-1] if frames else None


def _data_dependent_error(e: BaseException) -> DataDependentControlFlowError:
    where = _user_frame(e)
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    first = first.split(" (unhinted")[0]  # torch's symbol bookkeeping
    lines = [f"torch.export cannot follow a branch on a tensor's values ({first})"]
    if where is not None:
        path, line, code = where
        lines.append(f"  {path}, line {line}:")
        if code:
            lines.append(f"    {code.strip()}")
    lines.append(HINT)
    return DataDependentControlFlowError("\n".join(lines))
