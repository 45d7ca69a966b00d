"""The main job: export a built-in model, run it in the runtime, compare with eager PyTorch."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np


def run_demo(model_name: str = "mobilenet_v2", output: str | None = None, repeat: int = 5) -> int:
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
    outputs = method.execute(list(inputs))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        method.execute(list(inputs))
        times.append(time.perf_counter() - t)
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    eager_times = []
    with torch.no_grad():
        for _ in range(repeat):
            t = time.perf_counter()
            model(*inputs)
            eager_times.append(time.perf_counter() - t)
    err = max(float((o - e).abs().max()) for o, e in zip(outputs, expected))

    print(f"  program      {path}")
    print(f"  file size    {os.path.getsize(path):,} bytes")
    print(f"  planned mem  {sum(plan.non_const_buffer_sizes):,} bytes "
          f"(arenas {plan.non_const_buffer_sizes[1:]})")
    print(f"  instructions {len(plan.chains[0].instructions)}")
    print(f"  export time  {export_s:.2f} s")
    print(f"  latency      {1e3 * np.median(times):.1f} ms (edgetorch runtime, median of {repeat})"
          f" vs {1e3 * np.median(eager_times):.1f} ms eager PyTorch")
    print(f"  max |error|  {err:.3g} vs eager PyTorch")
    ok = err <= 1e-4
    print("  result       " + ("OK: matches eager PyTorch" if ok else "MISMATCH"))
    return 0 if ok else 1
