"""The main job: export a built-in model, run it in the runtime, compare with eager PyTorch."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np


def run_demo(model_name: str = "mobilenet_v2", output: str | None = None, repeat: int = 10) -> int:
    import torch

    from .examples import get_example
    from .exir import to_edge
    from .exir.torch_export import export_program
    from .runtime import Runtime

    example = get_example(model_name)
    model = example.factory()
    inputs = example.example_inputs()
    print(f"edgetorch demo: {model_name} -- {example.description}")

    t0 = time.perf_counter()
    et = to_edge(export_program(model, inputs)).to_executorch()
    export_s = time.perf_counter() - t0
    path = output or os.path.join(tempfile.gettempdir(), f"{model_name}.pte")
    et.save(path)
    plan = et.executorch_program.execution_plan[0]

    method = Runtime.get().load_program(path).load_method("forward")
    outputs = method.execute(list(inputs))  # the first calls of each: not timed
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    times, eager_times = _interleaved_rounds(lambda: method.execute(list(inputs)),
                                             lambda: model(*inputs), repeat)
    err = max(float((o - e).abs().max()) for o, e in zip(outputs, expected))

    print(f"  program      {path}")
    print(f"  file size    {os.path.getsize(path):,} bytes")
    print(f"  planned mem  {sum(plan.non_const_buffer_sizes):,} bytes "
          f"(arenas {plan.non_const_buffer_sizes[1:]})")
    print(f"  instructions {len(plan.chains[0].instructions)}")
    print(f"  export time  {export_s:.2f} s")
    ours, eager = np.median(times), np.median(eager_times)
    print(f"  latency      {1e3 * ours:.2f} ms edgetorch runtime, {1e3 * eager:.2f} ms eager "
          f"PyTorch: {_speed(ours, eager)}")
    print(f"  measured     {how_measured(repeat, torch.get_num_threads())}")
    print(f"  max |error|  {err:.3g} vs eager PyTorch")
    ok = err <= 1e-4
    print("  result       " + ("OK: matches eager PyTorch" if ok else "MISMATCH"))
    return 0 if ok else 1


def _interleaved_rounds(ours, eager, rounds: int) -> tuple[list[float], list[float]]:
    """``rounds`` rounds, each timing one call of ``ours`` then one of ``eager`` (eager under
    no_grad): both see the same machine load, and each is reported as its median."""
    import torch

    times: tuple[list[float], list[float]] = ([], [])
    with torch.no_grad():
        for _ in range(rounds):
            for fn, out in ((ours, times[0]), (eager, times[1])):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
    return times


def _speed(ours: float, eager: float) -> str:
    if ours <= eager:
        return f"{eager / ours:.1f}x faster than eager"
    return f"{ours / eager:.1f}x slower than eager"


def how_measured(rounds: int, torch_threads: int) -> str:
    """One line saying how the latencies were measured."""
    try:
        from .runtime.threadpool import get_num_threads

        blas = f"{get_num_threads()} BLAS thread(s) under NumPy"
    except Exception:  # threadpoolctl is optional: say what is known
        blas = "NumPy's BLAS at its default thread count"
    return (f"in this process, medians of {rounds} interleaved rounds (one call of each per "
            f"round, after one untimed call of each) on the example inputs; {blas}, torch "
            f"{torch_threads} thread(s)")
