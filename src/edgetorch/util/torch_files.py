"""Reading torch artifacts from files that may be hostile (compiler side: needs torch).

torch's own readers trust their input: ``deserialize_torch_artifact`` (ETRecord programs)
retries a failed ``torch.load(weights_only=True)`` with ``weights_only=False``, and
``torch.export.load`` unpickles ``.pt2`` payloads with ``weights_only=False`` and
``pickle.loads``. Both run code from the file. Everything edgetorch reads from a file goes
through this module instead:

* :func:`load_tensors` -- ``torch.save`` bytes of tensors and containers, read with
  ``weights_only=True`` only; a pickle that is not in torch's zip format is refused before
  torch sees it, and nothing falls back;
* :func:`load_exported_program` -- a saved ``.pt2`` through ``torch.export.load`` with every
  unpickler it reaches replaced by a weights-only one or a refusal for the duration;
* :func:`check_graph_targets` -- a deserialized graph calls only operators (ATen, Edge,
  higher-order ops) and a fixed list of Python arithmetic helpers: torch's deserializer
  resolves any dotted name under ``torch``/``_operator``/``math`` (``torch.os.system``), and
  the Inspector runs the graphs it reads.
"""

from __future__ import annotations

import contextlib
import io
import math
import operator
import os
import threading
from collections.abc import Iterator
from typing import Any

import torch

from ..errors import UnsafeFileError

_ZIP_MAGIC = b"PK\x03\x04"
_PATCH_LOCK = threading.RLock()


def load_tensors(data: bytes | bytearray | memoryview, what: str) -> Any:
    """The object ``torch.save`` wrote to ``data`` (tensors, lists, tuples, dicts, numbers),
    read with ``weights_only=True`` and nothing else. Empty bytes read as ``{}`` (what torch's
    serializer writes for an empty artifact)."""
    data = bytes(data)
    if not data:
        return {}
    if not data.startswith(_ZIP_MAGIC):
        raise UnsafeFileError(
            f"{what} is not a tensor file in torch's zip format (it starts with "
            f"{data[:8]!r}); it is refused without being unpickled (edgetorch reads tensors "
            "with torch.load(weights_only=True) only); regenerate the file with torch.save")
    try:
        return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as e:  # the weights-only unpickler refused it, or it is corrupt
        raise UnsafeFileError(
            f"{what} cannot be read with torch.load(weights_only=True) "
            f"({type(e).__name__}: {_first_line(e)}); it holds objects other than tensors "
            "and plain containers, or is corrupt. edgetorch never unpickles arbitrary objects "
            "from a file; regenerate it") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else ""


class _RefusingPickle:
    """Stands in for the ``pickle`` module inside torch's ``.pt2`` reader: its constants and
    classes stay reachable, its loaders refuse."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name in ("load", "Unpickler", "_load", "_loads", "_Unpickler"):
            return self.loads
        return getattr(self._module, name)

    @staticmethod
    def loads(*_args: Any, **_kwargs: Any) -> Any:
        raise UnsafeFileError("the .pt2 archive holds a pickled Python object (an opaque "
                              "constant); edgetorch does not unpickle objects from files")


def _refuse_object(*_args: Any, **_kwargs: Any) -> Any:
    raise UnsafeFileError("the .pt2 archive holds a pickled TorchScript object (a torchbind "
                          "constant); edgetorch does not unpickle objects from files")


@contextlib.contextmanager
def _weights_only_unpickling() -> Iterator[None]:
    """While inside: ``torch.load`` always runs with ``weights_only=True`` (whatever the caller
    asked), and torch's ``.pt2`` reader cannot unpickle objects."""
    from torch.export.pt2_archive import _package

    original_load = torch.load

    def weights_only_load(f: Any, map_location: Any = None, pickle_module: Any = None, *,
                          weights_only: bool | None = None, mmap: bool | None = None,
                          **kwargs: Any) -> Any:
        return original_load(f, map_location=map_location, weights_only=True, mmap=mmap,
                             **kwargs)

    with _PATCH_LOCK:
        saved = (torch.load, _package.pickle, torch._C._pickle_load_obj)
        torch.load = weights_only_load
        _package.pickle = _RefusingPickle(saved[1])
        torch._C._pickle_load_obj = _refuse_object
        try:
            yield
        finally:
            torch.load, _package.pickle, torch._C._pickle_load_obj = saved


def load_exported_program(path: str | os.PathLike | io.BytesIO) -> Any:
    """``torch.export.load(path)`` without unpickling anything but tensors, and with the
    graph's call targets checked (:func:`check_graph_targets`)."""
    what = f"saved ExportedProgram {os.fspath(path)!r}" if not isinstance(path, io.BytesIO) \
        else "saved ExportedProgram"
    try:
        with _weights_only_unpickling():
            ep = torch.export.load(path)
    except UnsafeFileError as e:
        raise UnsafeFileError(f"{what}: {Exception.__str__(e)}") from e
    except Exception as e:
        raise UnsafeFileError(f"{what} cannot be read safely ({type(e).__name__}: "
                              f"{_first_line(e)}); edgetorch reads only tensors from it with "
                              "weights_only=True") from e
    check_graph_targets(ep.graph_module, what)
    return ep


# The Python callables a graph torch exported may call besides operators: SymInt
# arithmetic and comparisons, getitem on multi-output nodes.
_OPERATOR_NAMES = ("getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg",
                   "pos", "abs", "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor",
                   "not_", "invert", "lshift", "rshift")
_MATH_NAMES = ("ceil", "floor", "trunc", "sqrt", "exp", "log", "sin", "cos", "tan", "isnan",
               "isinf", "isfinite")
_TORCH_NAMES = ("sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite",
                "sym_sqrt", "sym_sum", "_check", "_check_is_size", "sym_constrain_range",
                "sym_constrain_range_for_size", "_sym_sqrt")
SAFE_CALLABLES: frozenset[Any] = frozenset(
    [getattr(operator, n) for n in _OPERATOR_NAMES]
    + [getattr(math, n) for n in _MATH_NAMES]
    + [getattr(torch, n) for n in _TORCH_NAMES if hasattr(torch, n)])


def _is_operator(target: Any) -> bool:
    from ..exir.dialects.edge._ops import EdgeOpOverload

    return isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket,
                               torch._ops.HigherOrderOperator, EdgeOpOverload))


def _is_safe_callable(target: Any) -> bool:
    # ``memory.alloc`` (a planned buffer) is never resolved from a file's text: the ETRecord
    # reader puts our own function there for ExecuTorch's ``memory.alloc`` marker.
    from ..exir.memory import alloc

    try:
        return target in SAFE_CALLABLES or target is alloc
    except TypeError:  # unhashable
        return False


def check_graph_targets(graph_module: torch.fx.GraphModule, what: str) -> None:
    """Refuse a deserialized graph (and its submodules' graphs) that calls anything but an
    operator or one of :data:`SAFE_CALLABLES` -- a file's graph names its call targets as
    dotted strings, and torch resolves them by attribute lookup."""
    for name, module in graph_module.named_modules():
        graph = getattr(module, "graph", None)
        if not isinstance(graph, torch.fx.Graph):
            continue
        for node in graph.nodes:
            if node.op != "call_function":
                if node.op in ("call_method", "call_module") and module is graph_module:
                    raise UnsafeFileError(
                        f"{what}: node {node.name!r} is a {node.op} ({node.target!r}); an "
                        "exported program calls operators only, so the file is refused")
                continue
            target = node.target
            if not (_is_operator(target) or _is_safe_callable(target)):
                where = f" in {name}" if name else ""
                raise UnsafeFileError(
                    f"{what}: node {node.name!r}{where} calls {target!r}, which is neither an "
                    "operator nor one of the arithmetic helpers an exported graph uses; the "
                    "file is refused (a graph read from a file may only call operators)")
