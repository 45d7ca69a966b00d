"""Reference artifacts from ExecuTorch 1.5.1's Cortex-M flow; runs ONLY in .venv-ref-arm.

    .venv-ref-arm/bin/python ref_cortex_m.py MODEL TARGET OUTDIR

Runs ``aot_arm_compiler``'s own Cortex-M path (``_to_edge_cortex_m``: channels-last inputs,
``CortexMQuantizer``, ``CortexMPassManager``) on ``cortex_m_models.MODELS[MODEL]`` and writes
``OUTDIR/model.pte`` (as ``aot_arm_compiler --target=TARGET --quantize``), ``OUTDIR/inputs.npz``
(the example inputs) and ``OUTDIR/edge.npz`` (the outputs of the final edge program, i.e. of
ExecuTorch's Python reference implementations of the ``cortex_m::`` operators).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cortex_m_models import MODELS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("target")
    ap.add_argument("outdir")
    args = ap.parse_args()

    import executorch.backends.arm.scripts.aot_arm_compiler as aot
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig
    from executorch.exir import ExecutorchBackendConfig

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    model, inputs = MODELS[args.model]()
    model.requires_grad_(False)
    exported = torch.export.export(model, inputs, strict=True)
    flags = argparse.Namespace(cortex_m_explicit_layout=False, quantize=True, strict_export=True)
    _, edge, inputs_cl = aot._to_edge_cortex_m(
        exported, flags, exported.module(), inputs, None,
        CortexMTargetConfig.from_target_string(args.target))
    with torch.no_grad():  # before to_executorch, which turns the ops into .out variants
        result = edge.exported_program().module()(*inputs_cl)
    program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    (out / "model.pte").write_bytes(program.buffer)
    result = result if isinstance(result, (tuple, list)) else (result,)
    np.savez(out / "inputs.npz", *[t.numpy() for t in inputs])
    np.savez(out / "edge.npz", *[t.contiguous().numpy() for t in result])
    print("wrote", out)


if __name__ == "__main__":
    main()
