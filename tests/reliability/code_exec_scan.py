"""Find the places where Python code could run bytes read from a file (an AST scan, not grep).

What counts: importing an unpickler (``pickle``, ``marshal``, ``dill``, ...), the builtins
``eval``/``exec``/``compile``/``__import__``, importing a module whose name is computed,
``torch.load`` without ``weights_only=True``, ``torch.jit.load``/``torch.export.load``/
``torch.package`` (all unpickle), ``np.load``/``read_array`` with ``allow_pickle`` not ``False``,
and ``yaml.load`` without a safe loader. Names are resolved through the module's imports, so
``import numpy as np`` and ``from torch import load`` are caught too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

UNPICKLING_MODULES = {"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve",
                      "joblib", "pickletools", "copyreg"}
CODE_BUILTINS = {"eval", "exec", "compile", "__import__"}
# torch's export serde retries a failed weights-only load with weights_only=False.
ALWAYS_UNPICKLE = {"torch.jit.load", "torch.export.load", "torch.package.PackageImporter",
                   "torch.serialization.load",
                   "torch._export.serde.serialize.deserialize_torch_artifact",
                   "torch.export.pt2_archive._package.load_pt2"}
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}


@dataclass(frozen=True)
class Finding:
    path: str  # as given to scan_source (relative to the repository root in the test)
    line: int
    what: str  # the construct, e.g. "pickle.loads" or "eval"
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} -- {self.why}"


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _kwarg(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_const(node: ast.AST | None, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.aliases: dict[str, str] = {}  # local name -> fully qualified name
        self.findings: list[Finding] = []

    def _add(self, node: ast.AST, what: str, why: str) -> None:
        self.findings.append(Finding(self.path, node.lineno, what, why))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.aliases[alias.asname or alias.name.partition(".")[0]] = (
                alias.name if alias.asname else alias.name.partition(".")[0])
            if alias.name.partition(".")[0] in UNPICKLING_MODULES:
                self._add(node, f"import {alias.name}", "an unpickler runs code stored in its input")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
        if node.level == 0 and module.partition(".")[0] in UNPICKLING_MODULES:
            self._add(node, f"from {module} import ...", "an unpickler runs code stored in its input")

    def _qualified(self, func: ast.AST) -> str | None:
        name = _dotted(func)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in CODE_BUILTINS \
                and node.func.id not in self.aliases:
            self._add(node, node.func.id, "runs a string as Python code")
            return
        name = self._qualified(node.func)
        if name is None:
            return
        if name == "importlib.import_module" and not (node.args and isinstance(node.args[0], ast.Constant)):
            self._add(node, name, "imports a module whose name is computed")
        elif name.partition(".")[0] in UNPICKLING_MODULES:
            self._add(node, name, "an unpickler runs code stored in its input")
        elif name in ALWAYS_UNPICKLE:
            self._add(node, name, "unpickles its input")
        elif name == "torch.load" and not _is_const(_kwarg(node, "weights_only"), True):
            self._add(node, name, "unpickles its input unless weights_only=True")
        elif name in ("numpy.load", "numpy.lib.format.read_array") and \
                _kwarg(node, "allow_pickle") is not None and \
                not _is_const(_kwarg(node, "allow_pickle"), False):
            self._add(node, name, "allow_pickle lets the file run code")
        elif name in ("yaml.unsafe_load", "yaml.full_load", "yaml.load_all") or (
                name == "yaml.load" and not self._safe_yaml(node)):
            self._add(node, name, "a non-safe YAML loader constructs arbitrary objects")

    def _safe_yaml(self, node: ast.Call) -> bool:
        loader = _kwarg(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
        name = _dotted(loader) if loader is not None else None
        return bool(name) and name.rpartition(".")[2] in SAFE_YAML_LOADERS


def scan_source(source: str, path: str = "<string>") -> list[Finding]:
    """Every construct in ``source`` that could execute data as code."""
    scanner = _Scanner(path)
    scanner.visit(ast.parse(source, filename=path))
    return scanner.findings


def scan_tree(root: Path, rel_to: Path) -> list[Finding]:
    """Scan ``root`` (a file or a directory of ``.py`` files)."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    out: list[Finding] = []
    for f in files:
        out += scan_source(f.read_text(), str(f.relative_to(rel_to)))
    return out
