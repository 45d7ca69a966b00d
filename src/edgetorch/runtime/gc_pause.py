"""Loading without the cyclic garbage collector's interruptions.

Parsing a ``.pte`` and building a method allocate tens of thousands of small objects (the
flatbuffer's tables, values, instruction records) and free almost none, yet each burst of
allocations triggers collections that find nothing: 17 during one load of MiniLM (86 MB),
about 1.5 ms. Worse, one of them is now and then a full collection, which walks every object
of the process: in a process that also holds torch and a model (~400,000 objects) a full
collection took 320 ms, ten times the load itself. Loads therefore run with automatic
collection paused, as bulk loaders do; the collector resumes afterwards (and stays off where
the caller had turned it off).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
