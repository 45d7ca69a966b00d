"""``edgetorch arm run``: ExecuTorch's ``examples/arm/run.sh`` without an FVP.

    edgetorch arm run --aot_arm_compiler_flags="--delegate --quantize --intermediates mv2_u85/ \\
        --debug --evaluate" --output=mv2_u85 --target=ethos-u85-128 --model_name=mv2

    edgetorch arm run --aot_arm_compiler_flags="--quantize" --target=cortex-m55 --model_name=mv2
    edgetorch arm run --aot_arm_compiler_flags="--delegate --quantize" --target=vgf --model_name=mv2

run.sh compiles with ``aot_arm_compiler``, builds the bare-metal runner and runs it on a
Corstone FVP. Here the same compile step runs (``edgetorch.backends.arm.scripts.aot_arm_compiler``
with the given flags, ``--model_name``, ``--target``, ``--output``, ``--system_config``,
``--memory_mode``, ``--config``), then the program runs in edgetorch's runtime -- Ethos-U and
VGF delegates simulated from their TOSA graphs, a ``cortex-m*`` target's ``cortex_m::`` operators
with CMSIS-NN's integer arithmetic: it prints the outputs, the comparison with the quantized
eager model, Vela's estimates (Ethos-U) and the delegation summary. run.sh's build options
(``--et_build_root``, ``--build_only``, ``--scratch-dir``, ...) are accepted and ignored.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

import numpy as np

IGNORED = ("--et_build_root", "--scratch-dir", "--ethos_u_scratch_dir", "--toolchain",
           "--select_ops_list", "--bundleio_flags", "--extra_build_flags", "--pte_placement",
           "--timeout")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="arm_command", required=True)
    r = sub.add_parser("run", help="compile for Ethos-U or Cortex-M and run it here "
                                   "(ExecuTorch's run.sh)",
                       description=__doc__.splitlines()[0].replace("``", ""))
    r.add_argument("--aot_arm_compiler_flags", default="--delegate --quantize",
                   help="flags for aot_arm_compiler (run.sh's default: --delegate --quantize)")
    r.add_argument("--model_name", required=True)
    r.add_argument("--target", default="ethos-u55-128")
    r.add_argument("--output", default=None, help="output folder (default: arm_test/<model>)")
    r.add_argument("--system_config", default=None)
    r.add_argument("--memory_mode", default=None)
    r.add_argument("--config", default=None, help="Vela configuration file")
    r.add_argument("--build_only", action="store_true", help="compile only, do not simulate")
    for flag in IGNORED:
        r.add_argument(flag, default=None, help=argparse.SUPPRESS)
    r.set_defaults(fn=main_from_args)


def aot_argv(args: argparse.Namespace) -> list[str]:
    argv = shlex.split(args.aot_arm_compiler_flags or "")
    argv += [f"--model_name={args.model_name}", f"--target={args.target}",
             f"--output={args.output or f'arm_test/{args.model_name}'}"]
    for name in ("system_config", "memory_mode", "config"):
        if getattr(args, name):
            argv.append(f"--{name}={getattr(args, name)}")
    if not args.build_only and "--evaluate" not in argv and "-e" not in argv:
        argv.append("--evaluate")  # running is what run.sh is for
    return argv


def _preview(array: np.ndarray, n: int = 8) -> str:
    flat = np.asarray(array).reshape(-1)
    text = np.array2string(flat[:n], precision=4, separator=", ")
    top = ""
    if flat.size >= 10 and np.asarray(array).ndim == 2:
        idx = np.argsort(-flat)[:5]
        top = f"; top-5 classes {idx.tolist()}"
    return f"{list(np.shape(array))} {flat.dtype}: {text}{' ...' if flat.size > n else ''}{top}"


def _vgf_how() -> str:
    from ..runtime.vgf import simulation

    return {"scenario-runner": "VGF on the ML SDK scenario-runner (lavapipe)",
            "tosa": "VGF simulated from TOSA",
            "compare": "VGF on the scenario-runner, equal to its TOSA simulation"}[simulation({})]


def main_from_args(args: argparse.Namespace) -> int:
    from .aot_arm_compiler import main as aot_main

    # aot_arm_compiler prints the delegation summary, the comparison and Vela's estimates
    result: Any = aot_main(aot_argv(args))
    if result.evaluation is not None:
        how = ("cortex_m:: operators with CMSIS-NN's arithmetic" if args.target.startswith(
            "cortex-m") else _vgf_how() if args.target == "vgf" else "Ethos-U simulated from TOSA")
        print(f"Outputs (edgetorch runtime, {how}):")
        for k, out in enumerate(result.evaluation["outputs"]):
            print(f"  output {k} {_preview(out)}")
    return 0
