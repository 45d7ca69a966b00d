"""Export an example model delegated to XNNPACK: ``<model>_xnnpack_fp32.pte`` or ``_q8.pte``.

    python -m edgetorch.examples.xnnpack.aot_compiler --model_name=mv2 --delegate [--quantize]
        [--output_dir DIR] [--test_after_export]

ExecuTorch's ``examples/xnnpack/aot_compiler.py`` (same flags and file names), on edgetorch's
compiler: ``torch.export`` (non-strict), optional PT2E quantization with the XNNPACK quantizer,
``to_edge_transform_and_lower`` with ``XnnpackPartitioner``, ``to_executorch`` (delegate blobs
inline), ``save_pte_program``. ``--test_after_export`` runs the file in edgetorch's runtime and
compares it with eager.
"""

from __future__ import annotations

import argparse
import logging

from ...exir.torch_export import export_program
from ..models import MODEL_NAME_TO_MODEL, create_model
from . import MODEL_NAME_TO_OPTIONS

logger = logging.getLogger(__name__)
FORMAT = "[%(levelname)s %(asctime)s %(filename)s:%(lineno)s] %(message)s"

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model_name", required=True,
                        help=f"Model name. Valid ones: {sorted(MODEL_NAME_TO_MODEL)}")
    parser.add_argument("-q", "--quantize", action="store_true", default=False,
                        help="Produce an 8-bit quantized model")
    parser.add_argument("-d", "--delegate", action="store_true", default=True,
                        help="Produce an XNNPACK delegated model")
    parser.add_argument("-r", "--etrecord", default="",
                        help="Generate and save an ETRecord to the given file location")
    parser.add_argument("-t", "--test_after_export", action="store_true", default=False,
                        help="Run the .pte in edgetorch's runtime and compare with eager")
    parser.add_argument("-o", "--output_dir", default=".", help="output directory")
    return parser

def main(argv: list[str] | None = None) -> str:
    """Run the script; returns the path of the written ``.pte``."""
    import torch

    from ...backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from ...backends.xnnpack.utils.configs import get_transform_passes
    from ...exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
    from ...extension.export_util.utils import save_pte_program

    args = build_parser().parse_args(argv)
    if args.model_name not in MODEL_NAME_TO_MODEL:
        raise RuntimeError(f"Model {args.model_name} is not a valid name. "
                           f"Available models are {sorted(MODEL_NAME_TO_MODEL)}.")
    if args.quantize and args.model_name not in MODEL_NAME_TO_OPTIONS:
        raise RuntimeError(f"Model {args.model_name} is not quantizable right now; quantizable "
                           f"models are {sorted(MODEL_NAME_TO_OPTIONS)}.")
    model, example_inputs, _, _ = create_model(args.model_name)
    ep = export_program(model, example_inputs, strict=False)
    if args.quantize:
        from .quantization.utils import quantize

        quant_type = MODEL_NAME_TO_OPTIONS[args.model_name].quantization
        logger.info("Quantizing Model...")
        quantized = quantize(ep.module(), example_inputs, quant_type)
        ep = export_program(quantized, example_inputs, strict=False)

    edge = to_edge_transform_and_lower(
        ep, partitioner=[XnnpackPartitioner()], transform_passes=get_transform_passes(),
        compile_config=EdgeCompileConfig(_check_ir_validity=not args.quantize,
                                         _skip_dim_order=True),
        generate_etrecord=bool(args.etrecord))
    logger.info("Exported and lowered graph:\n%s", edge.exported_program().graph)
    exec_prog = edge.to_executorch(config=ExecutorchBackendConfig(extract_delegate_segments=False))
    quant_tag = "q8" if args.quantize else "fp32"
    path = save_pte_program(exec_prog, f"{args.model_name}_xnnpack_{quant_tag}", args.output_dir)
    if args.etrecord:
        exec_prog.get_etrecord().save(args.etrecord)
        logger.info("Saved ETRecord to %s", args.etrecord)

    if args.test_after_export:
        from ...runtime import Runtime

        method = Runtime.get().load_program(path).load_method("forward")
        outputs = method.execute(list(example_inputs))
        with torch.no_grad():
            expected = model(*example_inputs)
        expected = expected if isinstance(expected, (tuple, list)) else (expected,)
        worst = max(float((got - want).abs().max()) for got, want in zip(outputs, expected))
        logger.info("Ran %s in edgetorch's runtime: max |error| vs eager %.3g", path, worst)
    return path

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=FORMAT)
    main()
