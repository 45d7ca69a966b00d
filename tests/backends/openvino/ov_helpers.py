"""Lowering, running and summarising OpenVINO-delegated programs for the tests."""

from __future__ import annotations

import numpy as np
import torch

from edgetorch.backends.openvino import OpenvinoPartitioner
from edgetorch.backends.openvino.runtime import set_inference_precision
from edgetorch.examples import EXAMPLES
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.exir.backend import CompileSpec
from edgetorch.runtime import Runtime
from edgetorch.schema.pte import PteFile

CPU = CompileSpec("device", b"CPU")
F32 = CompileSpec("inference_precision", b"f32")

# The device-default precision: bfloat16 on this CPU family (AVX512-BF16) moves outputs by up
# to ~4e-2 on MobileNetV2 (outputs up to ~0.5) and ~1e-3 on the small nets. The stated
# tolerance: max|diff| <= 6e-2 * max(1, max|eager|). With f32 precision: 1e-4.
DEFAULT_TOL = 6e-2
F32_TOL = 1e-4


def has_bf16() -> bool:
    try:
        return "avx512_bf16" in open("/proc/cpuinfo").read()
    except OSError:
        return False


def lower(model, inputs, specs=(CPU,), **partitioner_kwargs) -> bytes:
    ep = torch.export.export(model, tuple(inputs))
    part = OpenvinoPartitioner(list(specs), **partitioner_kwargs)
    return to_edge_transform_and_lower(ep, partitioner=[part]).to_executorch().buffer


def lower_example(name: str, specs=(CPU,)) -> tuple[bytes, list[np.ndarray], list[np.ndarray]]:
    model, inputs = EXAMPLES[name].build()
    with torch.no_grad():
        eager = model(*inputs)
    flat = eager if isinstance(eager, (tuple, list)) else (eager,)
    return lower(model, inputs, specs), [t.numpy() for t in inputs], [t.numpy() for t in flat]


def run_ours(pte: bytes, inputs, precision: str | None = None,
             options: dict | None = None) -> list[np.ndarray]:
    """Run in edgetorch's runtime; ``precision`` overrides delegates that name none;
    ``options`` are the OpenvinoBackend's load options."""
    set_inference_precision(precision)
    try:
        method = Runtime.get().load_program(
            pte, backend_options={"OpenvinoBackend": options or {}}).load_method("forward")
        return [np.asarray(o) for o in method.execute([np.asarray(a) for a in inputs])]
    finally:
        set_inference_precision(None)


def max_diff(outs, refs) -> float:
    assert len(outs) == len(refs)
    return max(float(np.abs(np.asarray(o, np.float64) - r).max()) for o, r in zip(outs, refs))


def default_tolerance(refs) -> float:
    scale = max(1.0, max(float(np.abs(r).max()) for r in refs))
    return (DEFAULT_TOL if has_bf16() else F32_TOL) * scale


def structure(pte: bytes) -> dict:
    """What must match ExecuTorch: delegates (id, compile specs), operators left outside."""
    plan = next(p for p in PteFile.parse(pte).program.execution_plan if p.name == "forward")
    return {
        "delegates": [(d.id, [(c.key, bytes(c.value)) for c in d.compile_specs])
                      for d in plan.delegates],
        "operators": sorted(f"{o.name}.{o.overload}" for o in plan.operators),
        "delegate_calls": sum(type(i.instr_args).__name__ == "DelegateCall"
                              for c in plan.chains for i in c.instructions),
    }
