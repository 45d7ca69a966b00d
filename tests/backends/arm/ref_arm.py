"""Reference harness for the Arm TOSA path; runs ONLY inside the Arm reference venv
(``/work/main/.venv-ref-arm``, ``executorch[ethos-u]==1.5.1``).

    ref_arm.py tosa MODEL TOSA_SPEC OUT_DIR

``MODEL`` is ``edgetorch.examples.load_model_spec``'s spec (``tests/backends/arm/arm_models.py:add``).
Quantizes with ExecuTorch's ``TOSAQuantizer`` (``get_symmetric_quantization_config()``,
calibrated on the example inputs) when TOSA_SPEC has an INT profile (a ``+FP`` spec keeps the
float model), lowers with ``TOSAPartitioner`` and writes into OUT_DIR:
``model.pte`` (``extract_delegate_segments=False``), the intermediates (``output_<tag>_<spec>.tosa``)
under ``OUT_DIR/inter``, ``inputs.npz`` (example inputs) and ``quant_out.npz`` (the converted,
fake-quantized eager model's outputs; the float
model's under +FP). Only ``edgetorch.examples`` is imported from edgetorch.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import numpy as np
import torch

SRC = Path(__file__).resolve().parents[3] / "src"
sys.path.insert(0, str(SRC))

from edgetorch.examples import load_model_spec  # noqa: E402


def tosa(model_spec: str, tosa_spec: str, out_dir: str) -> None:
    from executorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model, inputs = load_model_spec(model_spec)
    cs = TosaCompileSpec(tosa_spec).dump_intermediate_artifacts_to(str(out / "inter"))
    if "INT" in tosa_spec:
        quantizer = TOSAQuantizer(cs)
        quantizer.set_global(get_symmetric_quantization_config())
        gm = torch.export.export(model, inputs).module(check_guards=False)
        prepared = prepare_pt2e(gm, quantizer)
        prepared(*inputs)
        quantized = convert_pt2e(prepared)
    else:  # a +FP spec: the float model as it is
        quantized = model
    with torch.no_grad():
        expected = quantized(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    edge = to_edge_transform_and_lower(torch.export.export(quantized, inputs),
                                       partitioner=[TOSAPartitioner(cs)])
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    (out / "model.pte").write_bytes(pte)
    np.savez(out / "inputs.npz", *[t.detach().numpy() for t in inputs])
    np.savez(out / "quant_out.npz", *[t.detach().numpy() for t in expected])


def main(argv: list[str]) -> int:
    try:
        if argv[0] == "tosa":
            tosa(*argv[1:4])
        else:
            raise SystemExit(f"unknown command {argv[0]!r}; expected 'tosa'")
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
