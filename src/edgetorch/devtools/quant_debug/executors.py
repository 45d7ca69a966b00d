"""Where sweep candidates run: in this process, in local worker processes
(``concurrent.futures``, the default), or as Ray tasks (``ray="auto"`` or a cluster address;
Ray comes with the ``edgetorch[ray]`` extra).

Every executor runs the same function on the same task and returns its row; Ray gets the
evaluation data as object references (one per shard, put once) and each task reads them back.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from ...errors import FeatureNotAvailableError

Task = Any
Row = dict[str, Any]


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


class InProcess:
    """Runs the tasks one after another in this process."""

    def put(self, value: Any) -> Any:
        return value

    def map_unordered(self, fn: Callable[[Task], Row], tasks: Sequence[Task]) -> Iterator[Row]:
        for task in tasks:
            yield fn(task)

    def close(self) -> None:
        pass


class LocalProcesses(InProcess):
    """A pool of fresh Python processes (spawned: no torch state is forked)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or default_workers()

    def map_unordered(self, fn: Callable[[Task], Row], tasks: Sequence[Task]) -> Iterator[Row]:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx) as pool:
            pending = {pool.submit(fn, task) for task in tasks}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()


class RayTasks(InProcess):
    """Each candidate a Ray task on the cluster at ``address`` (``"auto"``: the one this
    process is connected to, else a running one, else a new local one)."""

    def __init__(self, address: str = "auto", num_cpus_per_task: float = 1.0) -> None:
        try:
            import ray
        except ImportError:
            raise FeatureNotAvailableError(
                "--ray needs Ray: pip install 'edgetorch[ray]' (or run without --ray for "
                "local processes)") from None
        self.ray = ray
        if not ray.is_initialized():
            if address == "auto":
                try:
                    ray.init(address="auto")
                except ConnectionError:
                    ray.init()
            else:
                ray.init(address=address)
        self.num_cpus = num_cpus_per_task

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def map_unordered(self, fn: Callable[[Task], Row], tasks: Sequence[Task]) -> Iterator[Row]:
        remote = self.ray.remote(num_cpus=self.num_cpus, max_retries=0)(fn)
        pending = [remote.remote(task) for task in tasks]
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for ref in done:
                yield self.ray.get(ref)


def make_executor(ray: str | None = None, workers: int | None = None) -> InProcess:
    """Ray when ``ray`` is given, else local processes (``workers=0``: this process)."""
    if ray:
        return RayTasks(ray)
    if workers == 0:
        return InProcess()
    return LocalProcesses(workers)


def resolve(value: Any) -> Any:
    """A task field that may be a Ray object reference (read back) or the value itself."""
    if type(value).__name__ == "ObjectRef":
        import ray

        return ray.get(value)
    return value
