"""ExecuTorch 1.5.1's Ethos-U flow on the simulator's test models; runs ONLY in .venv-ref-arm.

    .venv-ref-arm/bin/python ref_npu.py OUTDIR TARGET NAME [NAME ...]

For each model of ``npu_models.py`` (``NAME@a16w8``: int16 activations) writes ``OUTDIR/NAME/model.pte`` (inline delegate) and
``OUTDIR/NAME/inter/`` (the TOSA graph of each partition and Vela's files), in one process so
ExecuTorch's import cost is paid once. A model ExecuTorch cannot lower gets ``OUTDIR/NAME/error``.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from npu_models import MODELS  # noqa: E402


def lower(name: str, target: str, out: Path) -> None:
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    base, _, quant = name.partition("@")
    model, inputs = MODELS[base]()
    inter = out / "inter"
    inter.mkdir(parents=True, exist_ok=True)
    cs = EthosUCompileSpec(target)
    cs.dump_intermediate_artifacts_to(str(inter) + "/")
    q = EthosUQuantizer(cs)
    if quant == "a16w8":  # int16 activations, int8 weights
        from executorch.backends.arm.quantizer import get_symmetric_a16w8_quantization_config

        q.set_global(get_symmetric_a16w8_quantization_config())
    else:
        q.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(check_guards=False), q)
    prepared(*inputs)
    qm = convert_pt2e(prepared)
    edge = to_edge_transform_and_lower(torch.export.export(qm, inputs),
                                       partitioner=[EthosUPartitioner(cs)])
    et = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    (out / "model.pte").write_bytes(et.buffer)


def main() -> None:
    root, target, names = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    for name in names:
        out = root / name
        if (out / "model.pte").exists() or (out / "error").exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        try:
            lower(name, target, out)
        except Exception:
            (out / "error").write_text(traceback.format_exc())
        print(name, flush=True)


if __name__ == "__main__":
    main()
