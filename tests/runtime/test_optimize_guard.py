"""No optimisation swallows an exception: the load passes, the preparers and XNNPACK's backend
plan catch ``Exception`` only in the one recorded guard (``optimize.pipeline.Options.guard``),
or to raise it again with its context. Read from the sources."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "edgetorch"
OPTIMISATION_CODE = [
    *sorted((SRC / "runtime" / "optimize").glob("*.py")),
    SRC / "kernels" / "portable" / "prepared.py",
    *(SRC / "backends" / "xnnpack" / "runtime" / f for f in
      ("plan.py", "fusions.py", "arena.py", "passes.py", "kernels_fused.py")),
]
GUARD = ("pipeline.py", "guard")


def _broad(handler: ast.ExceptHandler) -> bool:
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else handler.type.elts
    return handler.type is None or any(
        isinstance(n, ast.Name) and n.id in ("Exception", "BaseException") for n in names)


def _handlers(path: Path) -> list[tuple[str, ast.ExceptHandler]]:
    """(the enclosing function, handler) of every broad handler in ``path``."""
    out = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.ExceptHandler) and _broad(child):
                out.append((function, child))
            visit(child, function)

    visit(ast.parse(path.read_text()), "<module>")
    return out


def test_broad_handlers_only_in_the_guard_or_re_raising():
    assert all(p.exists() for p in OPTIMISATION_CODE)
    bad, guards = [], 0
    for path in OPTIMISATION_CODE:
        for function, handler in _handlers(path):
            if (path.name, function) == GUARD:
                guards += 1
                continue
            if not any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
                bad.append(f"{path.relative_to(SRC)}:{handler.lineno} in {function}() swallows "
                           f"{ast.unparse(handler.type) if handler.type else 'everything'}")
    assert not bad, "\n".join(bad)
    assert guards == 1  # the guard is there, and it is the only one
