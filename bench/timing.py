"""Timing shared by the benchmarks: median wall time of repeated calls after a warm-up."""

import time

import numpy as np


def median_ms(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))
