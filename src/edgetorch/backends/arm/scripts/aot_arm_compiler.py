"""Export a model for Arm Ethos-U, VGF, Cortex-M or plain TOSA: ExecuTorch's ``aot_arm_compiler``.

    python -m edgetorch.backends.arm.scripts.aot_arm_compiler --model_name=mv2 --delegate \\
        --quantize --intermediates mv2_u85/ --target=ethos-u85-128 --output=mv2_u85 --evaluate
    python -m edgetorch.backends.arm.scripts.aot_arm_compiler --model_name=mv2 --quantize \\
        --target=cortex-m55 --output=mv2_m55.pte --evaluate

Same flags and file names as ExecuTorch 1.5.1's script (``<model>_arm_delegate_<target>.pte``,
``<model>_exported_program.pt2`` and ``delegation_info.txt`` in the intermediates folder),
on edgetorch's compiler. One difference that helps: ``--evaluate`` (a no-op in ExecuTorch, which
needs an FVP to run anything) runs the ``.pte`` in edgetorch's runtime -- the Ethos-U delegate
simulated from its TOSA graph -- compares it with the quantized eager model and prints Vela's
estimates. As in ExecuTorch, the CPU-side int8 quantize/dequantize become ``cortex_m::`` ops
(CMSIS-NN on the device; edgetorch's runtime has kernels for them). A ``cortex-m*`` target
delegates nothing: the model is quantized with ``CortexMQuantizer`` (channels-last inputs)
and lowered to ``cortex_m::`` operators, which edgetorch's runtime runs with CMSIS-NN's
arithmetic.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from ....errors import FeatureNotAvailableError, InvalidArgumentError
from ....exir.torch_export import export_program
from ....util import progress
from ...cortex_m.target_config import TARGETS as CORTEX_M_TARGETS
from ..ethosu.compile_spec import TARGETS as ETHOSU_TARGETS

logger = logging.getLogger(__name__)
FORMAT = "[%(levelname)s %(asctime)s %(filename)s:%(lineno)s] %(message)s"
TOSA_TARGETS = ["TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+INT+int16"]
TARGETS = [*ETHOSU_TARGETS, "vgf", *TOSA_TARGETS, *CORTEX_M_TARGETS]


def build_parser() -> argparse.ArgumentParser:
    from ....examples.models import MODEL_NAME_TO_MODEL

    p = argparse.ArgumentParser(prog="aot_arm_compiler", description=__doc__.splitlines()[0])
    p.add_argument("-m", "--model_name", required=True,
                   help=f"a .py file (ModelUnderTest, ModelInputs), a .pt/.pth module, or one of "
                        f"{sorted(MODEL_NAME_TO_MODEL)}")
    p.add_argument("--model_input", default=None,
                   help="a .pt file of example inputs, or a variable name of the .py model file")
    p.add_argument("-d", "--delegate", action="store_true", help="delegate to the Arm backend")
    p.add_argument("--bundleio", action="store_true",
                   help="write a BundledProgram (.bpte) with the example inputs and outputs")
    p.add_argument("--etrecord", action="store_true", help="also write an ETRecord")
    p.add_argument("-t", "--target", default="ethos-u55-128", choices=TARGETS,
                   help="Ethos-U/VGF/TOSA targets delegate; cortex-m<variant> lowers to "
                        "CMSIS-NN operators without a delegate")
    p.add_argument("--cortex-m-explicit-layout", action="store_true",
                   help="ExecuTorch's experimental explicit-layout Cortex-M pipeline (not "
                        "implemented in edgetorch)")
    p.add_argument("-e", "--evaluate", nargs="?", const="generic",
                   choices=["generic", "mv2", "deit_tiny", "resnet18"],
                   help="simulate the .pte, compare with the quantized eager model, print "
                        "Vela's estimates")
    p.add_argument("-c", "--evaluate_config", default=None, help=argparse.SUPPRESS)
    p.add_argument("-q", "--quantize", action="store_true", help="produce an INT8 model")
    p.add_argument("--calibration_data", default=None,
                   help="a .pt/.pth file or a folder of them (up to 1000 samples)")
    p.add_argument("-s", "--so_library", default=None, help="custom-op library to load")
    p.add_argument("--debug", action="store_true", help="log at DEBUG (Vela --verbose-all)")
    p.add_argument("-i", "--intermediates", default=None,
                   help="folder for the TOSA files, Vela's output and delegation_info.txt")
    p.add_argument("-o", "--output", default=None,
                   help="a .pte/.bpte file name or a folder (default: current folder)")
    p.add_argument("--system_config", default=None, help="Vela system config (see vela.ini)")
    p.add_argument("--memory_mode", default=None, help="Vela memory mode (see vela.ini)")
    p.add_argument("--config", default="Arm/vela.ini", help="Vela configuration file")
    p.add_argument("--non_strict_export", dest="strict_export", action="store_false")
    p.add_argument("--enable_qdq_fusion_pass", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--enable_debug_mode", choices=["json", "tosa"], default=None)
    p.add_argument("--direct_drive", action="store_true",
                   help="Vela --separate-io-regions --cop-format=COP2")
    return p


@dataclass
class CompileResult:
    """What ``main`` produced (the CLI prints it; tests read it)."""

    output: str
    edge: Any
    program: Any
    model: Any
    quantized_model: Any
    example_inputs: tuple
    compile_spec: Any
    evaluation: dict[str, Any] | None = None
    estimates: list[dict[str, Any]] = field(default_factory=list)


def get_compile_spec(args: argparse.Namespace) -> Any:
    from ..common.arm_compile_spec import ArmCompileSpec

    if args.target.startswith("TOSA"):
        from ..tosa.compile_spec import TosaCompileSpec

        spec: Any = TosaCompileSpec(args.target)
    elif "ethos-u" in args.target:
        from ..ethosu.compile_spec import EthosUCompileSpec

        extra = ["--verbose-operators", "--verbose-cycle-estimate"]
        if args.enable_debug_mode is not None:
            extra.append("--enable-debug-db")
        if args.direct_drive:
            extra += ["--separate-io-regions", "--cop-format=COP2"]
        spec = EthosUCompileSpec(args.target, system_config=args.system_config,
                                 memory_mode=args.memory_mode, extra_flags=extra,
                                 config_ini=args.config)
    elif args.target == "vgf":
        from ..vgf.compile_spec import VgfCompileSpec

        # ExecuTorch's choice: INT when quantizing, else FP (float graphs, lowering_float)
        spec = VgfCompileSpec("TOSA-1.0+INT" if args.quantize else "TOSA-1.0+FP")
    else:
        raise FeatureNotAvailableError(f"unknown target {args.target!r}")
    if args.intermediates is not None:
        spec.dump_intermediate_artifacts_to(args.intermediates)
    if args.enable_debug_mode is not None:
        spec.dump_debug_info(ArmCompileSpec.DebugMode[args.enable_debug_mode.upper()])
    return spec


def _quantizer(spec: Any) -> Any:
    from ..quantizer import (
        EthosUQuantizer,
        TOSAQuantizer,
        VgfQuantizer,
        get_symmetric_quantization_config,
    )

    q = {"EthosUCompileSpec": EthosUQuantizer, "VgfCompileSpec": VgfQuantizer}.get(
        type(spec).__name__, TOSAQuantizer)(spec)
    q.set_global(get_symmetric_quantization_config(is_per_channel=True))
    return q


def _partitioner(spec: Any) -> Any:
    if type(spec).__name__ == "EthosUCompileSpec":
        from ..ethosu.partitioner import EthosUPartitioner

        return EthosUPartitioner(spec)
    if type(spec).__name__ == "VgfCompileSpec":
        from ..vgf.partitioner import VgfPartitioner

        return VgfPartitioner(spec)
    from ..tosa.partitioner import TOSAPartitioner

    return TOSAPartitioner(spec)


def quantize(model: Any, spec: Any, example_inputs: tuple, samples: list[tuple] | None) -> Any:
    """PT2E with the Arm quantizer, calibrated on ``samples`` (default: the example inputs)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    logger.info("Quantizing Model...")
    prepared = prepare_pt2e(model, _quantizer(spec))
    for sample in progress.bar(samples or [example_inputs], desc="calibrating", unit="sample"):
        if len(sample) != len(example_inputs):
            raise InvalidArgumentError(
                f"a calibration sample has {len(sample)} inputs, the model takes "
                f"{len(example_inputs)}; give samples shaped like the example inputs")
        prepared(*sample)
    return convert_pt2e(prepared)


def _cortex_m(args: argparse.Namespace, exported: Any, example_inputs: tuple,
              samples: list[tuple] | None) -> tuple[Any, Any, tuple]:
    """The ``cortex-m*`` path: no delegate, CMSIS-NN operators (ExecuTorch's
    ``_to_edge_cortex_m``)."""
    from .cortex_m import to_edge_cortex_m

    if args.cortex_m_explicit_layout:
        raise FeatureNotAvailableError(
            "--cortex-m-explicit-layout (ExecuTorch's experimental explicit NCHW/NHWC permute "
            "pipeline) is not implemented in edgetorch; leave it out for the default "
            "channels-last (dim-order) lowering")
    if args.delegate:
        logger.warning("--delegate is ignored for target %r (this target does not use "
                       "delegated ops).", args.target)
        args.delegate = False
    return to_edge_cortex_m(exported.module(), tuple(example_inputs), args.target,
                            quantize=args.quantize, samples=samples,
                            strict=args.strict_export, exported=exported)


def output_file_name(args: argparse.Namespace, model_name: str) -> str:
    stem = f"{model_name}_arm_delegate_{args.target}" if args.delegate else \
        f"{model_name}_arm_{args.target}"
    name = stem + (".bpte" if args.bundleio else ".pte")
    if args.output is None:
        return name
    if args.output.endswith((".pte", ".bpte")):
        if args.bundleio != args.output.endswith(".bpte"):
            raise InvalidArgumentError(
                f"--output {args.output}: use a .bpte name with --bundleio and a .pte name "
                "without it")
        if os.path.dirname(args.output):
            os.makedirs(os.path.dirname(args.output), exist_ok=True)
        return args.output
    os.makedirs(args.output, exist_ok=True)
    return os.path.join(args.output, name)


def main(argv: list[str] | None = None) -> CompileResult:
    """Run the script; returns what it built (``.output`` is the written file)."""
    from ....exir.foreign_warnings import filtered

    args = build_parser().parse_args(argv)
    stages = ["loading the model", "exporting", *(["quantizing"] if args.quantize else []),
              "lowering" + (" (Vela)" if args.delegate else ""), "emitting", "writing",
              *(["evaluating"] if args.evaluate is not None else [])]
    with filtered(), progress.steps("aot_arm_compiler", stages) as step:
        return _compile(args, step)


def _compile(args: argparse.Namespace, step: progress.Steps) -> CompileResult:
    import torch

    from ....exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
    from .delegation import dump_delegation_info
    from .models import load_calibration_samples, load_model

    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format=FORMAT,
                        force=True)
    if args.calibration_data is not None and not args.quantize:
        raise InvalidArgumentError("--calibration_data requires --quantize to be enabled.")
    if args.so_library is not None:
        torch.ops.load_library(args.so_library)
    if args.evaluate_config is not None:
        logger.warning("--evaluate_config is ignored: --evaluate compares with the quantized "
                       "eager model and prints Vela's estimates")

    step.next()
    model, example_inputs = load_model(args.model_name, args.model_input)
    samples = load_calibration_samples(args.calibration_data, example_inputs)
    model = model.eval()
    model.requires_grad_(False)
    step.next()
    exported = export_program(model, example_inputs, strict=args.strict_export)
    model_name = os.path.basename(os.path.splitext(args.model_name)[0])
    if args.intermediates:
        os.makedirs(args.intermediates, exist_ok=True)
        torch.export.save(exported, f"{args.intermediates}/{model_name}_exported_program.pt2",
                          pickle_protocol=5)

    if args.target.startswith("cortex-m"):
        spec = None
        if args.quantize:
            step.next()
        quantized, edge, example_inputs = _cortex_m(args, exported, example_inputs, samples)
        step.next()
    else:
        spec = get_compile_spec(args)
        quantized = None
        if args.quantize:
            step.next()
            quantized = quantize(exported.module(), spec, example_inputs, samples)
            exported = export_program(quantized, example_inputs, strict=args.strict_export)
        # after quantizing: the partitioner stores the spec as it is now (see EthosUPartitioner)
        partitioners = [_partitioner(spec)] if args.delegate else []
        step.next()
        edge = to_edge_transform_and_lower(
            exported, partitioner=partitioners,
            compile_config=EdgeCompileConfig(_check_ir_validity=False))
        if args.target != "vgf" and not args.direct_drive:
            from .cortex_m import replace_quant_nodes

            edge = edge.transform([replace_quant_nodes])
    dump_delegation_info(edge, args.intermediates)
    step.next()
    program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    step.next()
    output = output_file_name(args, model_name)
    result = CompileResult(output, edge, program, model, quantized, tuple(example_inputs), spec)
    if args.bundleio:
        from .bundle import save_bpte

        save_bpte(program, quantized or model, example_inputs, output, args.intermediates)
        print(f"Bundle PTE file saved as {output}")
    else:
        with open(output, "wb") as f:
            program.write_to_file(f)
        print(f"PTE file saved as {output}")
    if args.etrecord or args.bundleio:
        raise_or_warn = args.etrecord
        try:
            etrecord = os.path.splitext(output)[0] + "_etrecord.bin"
            from ....devtools import generate_etrecord

            generate_etrecord(etrecord, edge, program)
            print(f"ETRecord saved as {etrecord}")
        except Exception as e:  # ETRecord is a side product of --bundleio
            if raise_or_warn:
                raise
            logger.warning("ETRecord generation failed (non-fatal): %s", e)
    if args.evaluate is not None:
        from .evaluate import evaluate

        step.next()
        result.evaluation, result.estimates = evaluate(result)
    return result


if __name__ == "__main__":
    main()
