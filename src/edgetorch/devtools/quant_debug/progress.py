"""Progress bars for the debugger and sweeps: edgetorch's shared helper when this edgetorch has
it (``edgetorch.util.progress``: bars on a terminal only, ``EDGETORCH_PROGRESS`` to force),
else tqdm directly, else none."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


def progress_bar(iterable: Iterable | None = None, *, desc: str, total: int | None = None,
                 unit: str = "it") -> Any:
    try:
        from ...util.progress import bar
    except ImportError:
        bar = None
    if bar is not None:
        return bar(iterable, desc=desc, total=total, unit=unit)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, file=sys.stderr,
                disable=not sys.stderr.isatty())
