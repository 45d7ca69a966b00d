"""The packages' layering, read from the sources: each layer imports only the layers below it,
the runtime's layers never import torch or the compiler, and the runtime has no import cycles.

    errors -> schema -> kernels -> runtime (and its load passes, runtime/optimize)
           -> backends' runtime halves -> the compiler (exir, backends' ahead-of-time halves...)

Every ``import`` statement counts (those inside functions too), but those under
``if TYPE_CHECKING:``, which never run.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = SRC / "edgetorch"

# layer -> the packages it may import (besides itself); checked by prefix
RUNTIME = ("edgetorch.errors", "edgetorch.schema", "edgetorch.kernels", "edgetorch.runtime")
RULES = {
    "edgetorch.errors": (),
    "edgetorch.schema": ("edgetorch.errors",),
    "edgetorch.kernels": ("edgetorch.errors", "edgetorch.schema"),
    "edgetorch.runtime.optimize": RUNTIME,
    "edgetorch.runtime": RUNTIME,
    "edgetorch.backends.xnnpack.runtime": RUNTIME + (
        "edgetorch.backends.xnnpack.runtime", "edgetorch.backends.xnnpack.schema",
        "edgetorch.backends.xnnpack.serialization"),
    # (the Ethos-U blob's format and the compile-time records, standard library only)
    "edgetorch.backends.arm.runtime": RUNTIME + (
        "edgetorch.backends.arm.runtime", "edgetorch.backends.arm.ethosu.vela_bin",
        "edgetorch.backends.arm.ethosu.compiled", "edgetorch.backends.arm.ethosu.vela"),
}
# The one import that points up, on purpose: importing the runtime registers the backends
# whose runtime halves ship with it (as XNNPACK ships with ExecuTorch's runtime).
ALLOWED = {
    ("edgetorch.runtime", "edgetorch.backends.builtin"),
    # Lazy imports inside one function each, merged from other branches after this test was
    # written; kept visible here until they move: TensorLayout.from_tensor (ExecuTorch's API
    # on the schema's table) reaches the torch half; the VGF runtime simulation reads the
    # TOSA graphs this very process compiled.
    ("edgetorch.schema.ptd", "edgetorch.exir.tensor_layout"),
    ("edgetorch.backends.arm.runtime.vgf", "edgetorch.backends.arm.vgf.compiled"),
}
TORCH_FREE = tuple(RULES)
# The compiler's registration of the quantized out variants lives beside their kernels; only
# the compiler imports it.
COMPILER_SIDE = {"edgetorch.kernels.quantized.aot"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


MODULES = _modules()


def _statements(node: ast.AST) -> list[ast.AST]:
    """The statements directly inside ``node`` (imports are statements: no expression is
    walked)."""
    out = []
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, None) or ():
            out.append(child)
    return out


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@cache
def _imports(name: str, path: Path, top_level_only: bool = False) -> frozenset[str]:
    """The modules (or packages) ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in _statements(node):
            if _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[:len(package.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                for a in child.names:
                    full = f"{target}.{a.name}"
                    out.add(full if full in MODULES else target)
            elif not (top_level_only and isinstance(child, (ast.FunctionDef,
                                                            ast.AsyncFunctionDef))):
                visit(child)

    visit(ast.parse(path.read_text()))
    return frozenset(out)


def _layer(name: str) -> str | None:
    matches = [k for k in RULES if name == k or name.startswith(k + ".")]
    return max(matches, key=len) if matches else None


def _within(target: str, prefixes: tuple[str, ...]) -> bool:
    return any(target == p or target.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(RULES))
def test_each_layer_imports_only_the_layers_below(layer):
    bad = []
    for name, path in sorted(MODULES.items()):
        if _layer(name) != layer:
            continue
        for target in sorted(_imports(name, path)):
            if not target.startswith("edgetorch") or (name, target) in ALLOWED:
                continue
            if not _within(target, (layer, *RULES[layer])):
                bad.append(f"{name} imports {target}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("layer", TORCH_FREE)
def test_the_runtime_layers_never_import_torch(layer):
    bad = [f"{name} imports {t}" for name, path in sorted(MODULES.items())
           if _layer(name) == layer and name not in COMPILER_SIDE for t in _imports(name, path)
           if t.split(".")[0] in ("torch", "torchao", "executorch")]
    assert not bad, "\n".join(bad)


def _cycles(modules: list[str]) -> list[list[str]]:
    graph = defaultdict(set)
    for name in modules:
        graph[name] = {t for t in _imports(name, MODULES[name], top_level_only=True)
                       if t in modules and t != name}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in modules:
        if v not in index:
            strong(v)
    return cycles


def test_no_import_cycles_in_the_runtime_layers():
    """Module-level imports only (a function may import lazily what would be a cycle)."""
    modules = [m for m in MODULES if _layer(m) is not None]
    known = [["edgetorch.schema.fbs", "edgetorch.schema.fbs.reader",
              "edgetorch.schema.fbs.writer"]]  # the flatbuffer engine's package and its halves
    assert [c for c in _cycles(modules) if c not in known] == []
