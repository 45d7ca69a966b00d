"""Warnings and log lines from torch and torchao that say nothing to an edgetorch user, in one
table, dropped while edgetorch exports, lowers or imports torchao (``filtered()``).

Each entry matches one message of one category (or logger) and says why it is noise; anything
else (a user's own warnings, torch's warnings about the user's model) passes untouched. When
torch or torchao stops emitting a message its entry just stops matching.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, TypeVar

# (category, message regex matched at the start): warnings.filterwarnings entries
WARNINGS: list[tuple[type[Warning], str, str]] = [
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated",
     "torch's own run_decompositions deep-copies its pytree specs (torch 2.13)"),
]

# (logger name, message regex searched): log records dropped
LOG_RECORDS: list[tuple[str, str, str]] = [
    ("torchao", r"^Failed to load .*torchao/_C\w*\.(cpython-[^/]*|abi3)\.so",
     "torchao's CUDA kernels (mxfp8, cutlass) do not load on a CPU-only torch; edgetorch "
     "uses none of them"),
    ("torch.utils._pytree", r"is an Enum subclass and is now natively supported",
     "torchao registers its KernelPreference enum with a torch API deprecated in 2.13"),
    ("torchao.kernel.intmm", r"Detected no triton",
     "torchao's GPU matmul kernels need Triton; edgetorch compiles for CPUs and NPUs"),
    ("torch.fx.experimental.symbolic_shapes", r"^Unable to find user code corresponding to",
     "torch's note while it builds a data-dependent error; edgetorch's error names the line"),
]

_active = threading.local()


class _DropForeign(logging.Filter):
    def __init__(self, patterns: list[re.Pattern]) -> None:
        super().__init__()
        self.patterns = patterns

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(_active, "depth", 0):
            return True
        message = record.getMessage()
        return not any(p.search(message) for p in self.patterns)


def _install_log_filters() -> None:
    by_logger: dict[str, list[re.Pattern]] = {}
    for name, pattern, _why in LOG_RECORDS:
        by_logger.setdefault(name, []).append(re.compile(pattern))
    for name, patterns in by_logger.items():
        logging.getLogger(name).addFilter(_DropForeign(patterns))


_install_log_filters()  # inert outside filtered(): a filter passes everything when not active


@contextlib.contextmanager
def filtered() -> Iterator[None]:
    """Drop the table's warnings and log records for the duration (nestable)."""
    _active.depth = getattr(_active, "depth", 0) + 1
    try:
        with warnings.catch_warnings():
            for category, message, _why in WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category)
            yield
    finally:
        _active.depth -= 1


F = TypeVar("F", bound=Callable[..., Any])


def quiet(fn: F) -> F:
    """Run ``fn`` inside :func:`filtered` (for edgetorch's export and lowering entry points)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with filtered():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def import_torchao() -> None:
    """Import torchao (once) with its import-time noise dropped."""
    with filtered():
        import torchao  # noqa: F401
