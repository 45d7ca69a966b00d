"""Small helpers shared by the Ethos-U tests (no ExecuTorch imports)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgetorch.backends.arm.scripts.evaluate import output_scales as _product_output_scales
from edgetorch.schema.pte import PteFile


def load_npz(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"arr_{k}"] for k in range(len(data.files))]


def output_scales(pte_bytes: bytes) -> list[float]:
    """Scales of the method's CPU output dequantize calls, in order (the product's helper)."""
    return _product_output_scales(PteFile.parse(pte_bytes).program)


def steps_off(ours: np.ndarray, ref: np.ndarray, scale: float) -> float:
    """Largest difference in quantization steps."""
    return float(np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max() / scale)


def structure(pte: bytes) -> dict:
    """A program without its memory plan and value numbering: what must match ExecuTorch."""
    plan = PteFile.parse(pte).program.execution_plan[0]
    instrs = []
    for ins in plan.chains[0].instructions:
        call = ins.instr_args
        kind = type(call).__name__
        instrs.append((kind, plan.operators[call.op_index].name if kind == "KernelCall" else
                       call.delegate_index if kind == "DelegateCall" else None, len(call.args)))
    scalars = sorted(repr(v.val) for v in plan.values if type(v.val).__name__ != "Tensor")
    tensors = sorted((t.scalar_type, tuple(t.sizes)) for t in
                     (v.val for v in plan.values) if type(t).__name__ == "Tensor")
    return {"operators": [(o.name, o.overload) for o in plan.operators], "instructions": instrs,
            "delegates": [(d.id, [(c.key, bytes(c.value)) for c in d.compile_specs],
                           bytes(PteFile.parse(pte).delegate_bytes(d))) for d in plan.delegates],
            "scalars": sorted(set(scalars)), "tensors": sorted(set(tensors)),
            "inputs": len(plan.inputs), "outputs": len(plan.outputs)}
