"""Export the benchmark's ``.pte`` files with one toolchain: edgetorch or ExecuTorch 1.5.1.

The same script runs in both environments (edgetorch's venv with ``--tool edgetorch``, the
reference venv with ``--tool executorch``); only the imports differ, so both files of a model
come from the same ``torch.export`` graph, the same example inputs and the same recipe:

* ``portable``: ``to_edge(ep).to_executorch()``,
* ``xnnpack``: ``to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])``,
* ``xnnpack_q8``: PT2E static int8 (each toolchain's own ``XNNPACKQuantizer``, symmetric
  per-tensor, one calibration run) then the XNNPACK lowering.

It also times the export itself (``to_edge`` + ``to_executorch``, and the XNNPACK lowering +
``to_executorch``; ``torch.export`` is torch's and is left out), after an untimed warm-up
export so the first model does not pay for imports. Writes ``<out>/<tool>/<model>.<path>.pte``
and ``<out>/<tool>/export.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch

from edgetorch.examples import get_example  # imports only torch (src/ on PYTHONPATH)

MODELS = ["tiny_classifier", "mlp", "cnn", "mobilenet_v2", "resnet18", "transformer_encoder",
          "llama_decoder", "bert_encoder"]
# Static int8 suits the convolution / linear models; the attention models keep fp32.
QUANTIZED = {"simple_model", "tiny_classifier", "mlp", "cnn", "mobilenet_v2", "resnet18"}


def _toolchain(tool: str):
    if tool == "edgetorch":
        from edgetorch.backends.xnnpack import XnnpackPartitioner
        from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from edgetorch.exir import to_edge, to_edge_transform_and_lower
    else:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from executorch.exir import to_edge, to_edge_transform_and_lower
    return (to_edge, to_edge_transform_and_lower, XnnpackPartitioner, XNNPACKQuantizer,
            get_symmetric_quantization_config)


def _quantize(model, inputs, quantizer_cls, config_fn):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = quantizer_cls()
    quantizer.set_global(config_fn(is_per_channel=False))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def export_model(name: str, tool: str, out: Path, paths: list[str]) -> dict:
    to_edge, lower, Partitioner, Quantizer, config_fn = _toolchain(tool)
    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    row: dict = {}
    for path in paths:
        if path == "xnnpack_q8" and name not in QUANTIZED:
            continue
        try:
            m = _quantize(model, inputs, Quantizer, config_fn) if path == "xnnpack_q8" else model
            ep = torch.export.export(m, inputs)
            start = time.perf_counter()
            if path == "portable":
                prog = to_edge(ep).to_executorch()
            else:
                prog = lower(ep, partitioner=[Partitioner()]).to_executorch()
            buf = prog.buffer
            row[f"{path}_export_s"] = time.perf_counter() - start
            (out / f"{name}.{path}.pte").write_bytes(buf)
        except Exception as e:  # recorded, not fatal: the table shows the gap
            row[f"{path}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            traceback.print_exc()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", choices=["edgetorch", "executorch"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--paths", default="portable,xnnpack,xnnpack_q8")
    parser.add_argument("models", nargs="*", default=MODELS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = args.out / args.tool
    out.mkdir(parents=True, exist_ok=True)
    paths = args.paths.split(",")
    export_model("simple_model", args.tool, out, paths)  # warm-up (imports, caches), untimed
    for path in paths:
        (out / f"simple_model.{path}.pte").unlink(missing_ok=True)
    rows = {}
    for name in args.models:
        rows[name] = export_model(name, args.tool, out, paths)
        print(f"{args.tool} {name}: {rows[name]}", flush=True)
    (out / "export.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
