"""Threads (issue 13, item 4): a Program is shared read-only, each thread loads its own Method,
and the results are bit-identical to a single-threaded run. One Method called from two threads
at once raises ``MethodBusyError`` (docs/reliability.md), never a wrong result.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import (  # noqa: E402
    XnnpackPartitioner,
)
from edgetorch.errors import InvalidArgumentError, MethodBusyError  # noqa: E402
from edgetorch.examples import get_example  # noqa: E402
from edgetorch.exir import to_edge, to_edge_transform_and_lower  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

THREADS, CALLS, DISTINCT_INPUTS = 8, 100, 10
# Two examples through the portable kernels, and one through the XNNPACK delegate (its
# runtime state lives in a per-Method handle).
PROGRAMS = [("tiny_classifier", False), ("shape_ops", False), ("mlp", True)]


def _export(name: str, xnnpack: bool) -> bytes:
    ex = get_example(name)
    ep = torch.export.export(ex.factory(), ex.example_inputs())
    if xnnpack:
        return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    return to_edge(ep).to_executorch().buffer


@pytest.fixture(scope="module", params=PROGRAMS, ids=[f"{n}{'-xnnpack' if x else ''}" for n, x in PROGRAMS])
def program_and_inputs(request):
    name, xnnpack = request.param
    program = Runtime.get().load_program(_export(name, xnnpack))
    ex = get_example(name)
    inputs = [[t.numpy() for t in ex.example_inputs(seed=s)] for s in range(DISTINCT_INPUTS)]
    single = program.load_method("forward")
    expected = [single.execute(x) for x in inputs]
    return program, inputs, expected


def _assert_same(got, want, ctx):
    assert len(got) == len(want), ctx
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, ctx
        assert np.array_equal(g, w), f"{ctx}: differs from the single-threaded result"


def test_methods_on_threads_match_single_threaded(program_and_inputs):
    program, inputs, expected = program_and_inputs
    start = threading.Barrier(THREADS)
    errors: list[str] = []
    done = [0] * THREADS

    def worker(t: int) -> None:
        try:
            method = program.load_method("forward")  # loads run concurrently too
            start.wait()
            for c in range(CALLS):
                k = (t + c) % DISTINCT_INPUTS  # neighbouring threads run different inputs
                _assert_same(method.execute(inputs[k]), expected[k], f"thread {t} call {c}")
                done[t] += 1
        except Exception as e:  # reported below, with the thread that failed
            errors.append(f"thread {t}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, "\n".join(errors)
    assert done == [CALLS] * THREADS


def test_one_method_from_two_threads_raises_busy(program_and_inputs):
    program, inputs, expected = program_and_inputs
    method = program.load_method("forward")
    entered, release = threading.Event(), threading.Event()
    run = method._execute

    def held(x):  # hold the first call inside execute until the second has been refused
        entered.set()
        release.wait(timeout=60)
        return run(x)

    method._execute = held
    result: list = []
    first = threading.Thread(target=lambda: result.append(method.execute(inputs[0])))
    first.start()
    assert entered.wait(timeout=60)
    with pytest.raises(MethodBusyError, match="already executing.*load_method") as info:
        method.execute(inputs[1])
    assert info.value.code.name == "InvalidState"
    release.set()
    first.join()
    _assert_same(result[0], expected[0], "the call that held the method")
    del method._execute
    _assert_same(method.execute(inputs[1]), expected[1], "after the busy error")


def test_busy_guard_is_released_after_an_error(program_and_inputs):
    program, inputs, expected = program_and_inputs
    method = program.load_method("forward")
    with pytest.raises(InvalidArgumentError):
        method.execute([])
    _assert_same(method.execute(inputs[2]), expected[2], "after a failed call")


def test_hammering_one_method_never_gives_a_wrong_result(program_and_inputs):
    """Without coordination, every call either returns the right answer or is refused."""
    program, inputs, expected = program_and_inputs
    method = program.load_method("forward")
    start = threading.Barrier(2)
    wrong: list[str] = []
    ok, busy = [0, 0], [0, 0]  # per thread: no shared counter to race on

    def worker(t: int) -> None:
        start.wait()
        for c in range(50):
            k = (3 * t + c) % DISTINCT_INPUTS
            try:
                got = method.execute(inputs[k])
            except MethodBusyError:
                busy[t] += 1
                continue
            if not all(np.array_equal(g, w) for g, w in zip(got, expected[k])):
                wrong.append(f"thread {t} call {c}")
            ok[t] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong, wrong
    assert sum(ok) + sum(busy) == 100 and sum(ok) > 0
