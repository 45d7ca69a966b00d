"""Reference side of the Core ML compat tests; runs ONLY in the reference venv (executorch 1.5.1
with coremltools 9.0).

    python cm_ref.py export MODEL OUT.pte [--specs JSON] [--quantize]
    python cm_ref.py unflatten BLOB DIR

``export`` lowers a built-in example (``edgetorch.examples``, the only edgetorch import) with
ExecuTorch's ``CoreMLPartitioner(compile_specs=CoreMLBackend.generate_compile_specs(**specs))``
(``specs``: ``compute_unit`` / ``compute_precision`` / ``model_type`` by name,
``minimum_deployment_target`` by ``ct.target`` name) and writes OUT.pte; ``--quantize NAME``
runs ExecuTorch's ``CoreMLQuantizer`` first (``cm_quant.CONFIGS[NAME]``, calibrated on the
example's inputs) and writes the converted graph's quantize/dequantize parameters to
OUT.pte.qdq.json.
``unflatten`` writes a delegate blob's files with ExecuTorch's own ``executorchcoreml``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cm_quant import CONFIGS, qdq_params, quantize  # noqa: E402

from edgetorch.examples import EXAMPLES  # noqa: E402


def compile_specs(text: str):
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    specs = json.loads(text)
    kwargs = {}
    if "compute_unit" in specs:
        kwargs["compute_unit"] = ct.ComputeUnit[specs["compute_unit"]]
    if "compute_precision" in specs:
        kwargs["compute_precision"] = ct.precision[specs["compute_precision"]]
    if "minimum_deployment_target" in specs:
        kwargs["minimum_deployment_target"] = getattr(ct.target, specs["minimum_deployment_target"])
    if "model_type" in specs:
        kwargs["model_type"] = CoreMLBackend.MODEL_TYPE[specs["model_type"]]
    return CoreMLBackend.generate_compile_specs(**kwargs)


def export(args: argparse.Namespace) -> None:
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model, inputs = EXAMPLES[args.model].build()
    exported = torch.export.export(model, inputs)
    if args.quantize:
        from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer

        converted = quantize(model, inputs, CoreMLQuantizer, args.quantize)
        Path(args.out + ".qdq.json").write_text(json.dumps(qdq_params(converted)))
        exported = torch.export.export(converted, inputs)
    lowered = to_edge_transform_and_lower(
        exported, partitioner=[CoreMLPartitioner(compile_specs=compile_specs(args.specs))])
    Path(args.out).write_bytes(lowered.to_executorch().buffer)


def unflatten(args: argparse.Namespace) -> None:
    from executorch.backends.apple.coreml import executorchcoreml

    Path(args.dir).mkdir(parents=True, exist_ok=True)
    executorchcoreml.unflatten_directory_contents(Path(args.blob).read_bytes(), args.dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("model", choices=sorted(EXAMPLES))
    p.add_argument("out")
    p.add_argument("--specs", default="{}")
    p.add_argument("--quantize", choices=sorted(CONFIGS))
    p.set_defaults(func=export)
    p = sub.add_parser("unflatten")
    p.add_argument("blob")
    p.add_argument("dir")
    p.set_defaults(func=unflatten)
    args = parser.parse_args()
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
