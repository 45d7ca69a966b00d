"""What the steady-state memory tests measure: RSS and traced Python memory over many calls."""

from __future__ import annotations

import gc
import os
import tracemalloc
from collections.abc import Callable
from typing import Any


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def steady_state_growth(call: Callable[[], Any], calls: int = 10_000) -> tuple[int, int, Any]:
    """``call()`` 200 times to warm up (node buffers, caches, first-touch pages), then
    ``calls`` times more: (RSS growth, traced Python memory growth, the last call's result)."""
    for _ in range(200):
        call()
    gc.collect()
    rss = rss_bytes()
    tracemalloc.start()
    try:
        for _ in range(100):
            call()
        gc.collect()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(calls):
            last = call()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return rss_bytes() - rss, end - start, last
