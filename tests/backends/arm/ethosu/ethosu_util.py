"""Small helpers shared by the Ethos-U tests (no ExecuTorch imports)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgetorch.schema import program as S
from edgetorch.schema.pte import PteFile


def load_npz(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"arr_{k}"] for k in range(len(data.files))]


def output_scales(pte_bytes: bytes) -> list[float]:
    """Scales of the method's dequantize_per_tensor kernel calls (the CPU output DQs), in order."""
    plan = PteFile.parse(pte_bytes).program.execution_plan[0]
    scales = []
    for chain in plan.chains:
        for ins in chain.instructions:
            call = ins.instr_args
            if isinstance(call, S.KernelCall) and \
                    plan.operators[call.op_index].name.endswith("dequantize_per_tensor"):
                scales.append(plan.values[call.args[1]].val.double_val)
    return scales


def steps_off(ours: np.ndarray, ref: np.ndarray, scale: float) -> float:
    """Largest difference in quantization steps."""
    return float(np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max() / scale)
