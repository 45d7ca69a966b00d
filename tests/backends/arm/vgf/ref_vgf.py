"""Reference artifacts from ExecuTorch 1.5.1's VGF flow; runs ONLY in .venv-ref-vgf.

    .venv-ref-vgf/bin/python ref_vgf.py MODEL TOSA_SPEC OUTDIR

ExecuTorch's VGF tutorial flow (``VgfCompileSpec``, ``VgfQuantizer`` for INT specs,
``VgfPartitioner``, ``to_edge_transform_and_lower``, inline delegates) on
``ethosu_models.MODELS[MODEL]``: writes ``OUTDIR/model.pte``, the intermediates in
``OUTDIR/inter`` (the ``.tosa`` and the converter's ``.vgf``) and ``OUTDIR/inputs.npz``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ethosu"))
from ethosu_models import MODELS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tosa_spec")
    ap.add_argument("outdir")
    args = ap.parse_args()

    from executorch.backends.arm.quantizer import (
        VgfQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    out = Path(args.outdir)
    (out / "inter").mkdir(parents=True, exist_ok=True)
    model, inputs = MODELS[args.model]()
    spec = VgfCompileSpec(args.tosa_spec)
    spec.dump_intermediate_artifacts_to(str(out / "inter"))
    exported = torch.export.export(model, inputs)
    if "INT" in args.tosa_spec:
        quantizer = VgfQuantizer(spec)
        quantizer.set_global(get_symmetric_quantization_config())
        prepared = prepare_pt2e(exported.module(check_guards=False), quantizer)
        prepared(*inputs)
        exported = torch.export.export(convert_pt2e(prepared), inputs)
    edge = to_edge_transform_and_lower(exported, partitioner=[VgfPartitioner(spec)])
    program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    (out / "model.pte").write_bytes(program.buffer)
    np.savez(out / "inputs.npz", *[t.numpy() for t in inputs])
    print("wrote", out)


if __name__ == "__main__":
    main()
