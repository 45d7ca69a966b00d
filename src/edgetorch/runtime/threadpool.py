"""How many threads the runtime's math uses: ExecuTorch's ``_unsafe_reset_threadpool`` equivalent.

edgetorch's kernels spend their time in NumPy, whose matrix products run on the BLAS library
NumPy was built with (OpenBLAS, MKL, ...). The BLAS thread pool is therefore the runtime's
thread pool; ``threadpoolctl`` is the portable way to size it for whichever BLAS is loaded.
It is optional (pure Python, ``pip install threadpoolctl`` or ``edgetorch[threads]``), so the
core runtime keeps its two dependencies; without it, asking for a size is a clear error.

The default is whatever the BLAS chose at start-up (usually one thread per core), as
ExecuTorch's default threadpool; benchmarks set 1 to compare with ExecuTorch's XNNPACK default.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import InvalidArgumentError

_lock = threading.Lock()


def _threadpoolctl() -> Any:
    try:
        import threadpoolctl
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InvalidArgumentError(
            "setting the runtime's thread count needs the optional package threadpoolctl, "
            "which is not installed; try `pip install threadpoolctl` (or `edgetorch[threads]`)"
        ) from exc
    return threadpoolctl


def get_num_threads() -> int:
    """The number of threads the BLAS behind NumPy uses now (1 if none is loaded)."""
    info = _threadpoolctl().threadpool_info()
    blas = [pool["num_threads"] for pool in info if pool.get("user_api") == "blas"]
    return max(blas) if blas else 1


def set_num_threads(num_threads: int) -> int:
    """Size the runtime's thread pool (every BLAS NumPy loaded); returns the previous size.

    Process-wide, like ExecuTorch's ``_unsafe_reset_threadpool``: do not call it while another
    thread is executing a method.
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise InvalidArgumentError(
            f"num_threads must be a positive int, got {num_threads!r}; try 1 for one thread"
        )
    tpc = _threadpoolctl()
    with _lock:
        previous = get_num_threads()
        # Applied at once and kept until the next call (threadpoolctl restores the old size only
        # when used as a context manager, which this is not).
        tpc.threadpool_limits(limits=num_threads, user_api="blas")
    return previous

