"""The ``edgetorch`` command: export, run, inspect, oplist, visualize, inspector, arm, llm, demo.

``run``, ``inspect``, ``oplist`` and ``llm`` need only the runtime (no torch); ``export``,
``visualize`` and ``demo`` need the compiler (``pip install edgetorch[compiler]``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from .errors import EdgeTorchError


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# ---- export --------------------------------------------------------------------------


def export_model(spec: str, out: str, algo: str = "greedy", delegate: str | None = None,
                 quantize: str | None = None, calibration: str | None = None) -> dict:
    """Export a built-in example or ``path/to/file.py:factory`` to ``out``; returns stats
    (``"quantization"``: what was quantized and what stayed float, with ``quantize``).

    ``delegate="xnnpack"`` lowers to XNNPACK; ``quantize`` (static, dynamic, 8da4w) quantizes
    first, calibrating on the example inputs or the ``.npy`` files in ``calibration``.
    ``delegate="openvino"`` lowers to OpenVINO; with it ``quantize="static"`` is NNCF's int8.
    ``delegate="vulkan"`` / ``"coreml"`` lower with the partitioner's defaults."""
    from .examples import load_model_spec
    from .exir import ExecutorchBackendConfig, MemoryPlanningPass
    from .exir.foreign_warnings import filtered
    from .util import progress

    if quantize is not None and delegate not in ("xnnpack", "openvino"):
        raise EdgeTorchError("--quantize needs --delegate xnnpack or openvino (the "
                             "quantized operators run in the backend)")
    if calibration and quantize in ("dynamic", "8da4w"):
        raise EdgeTorchError(f"--calibration applies to --quantize static only: {quantize} "
                             "quantizes activations at each call, so there is nothing to "
                             "calibrate")
    if quantize not in (None, "static") and delegate == "openvino":
        raise EdgeTorchError(f"--quantize {quantize} is not available with --delegate "
                             "openvino; use --quantize static (NNCF int8)")
    stages = (["quantizing and exporting" if quantize else "exporting",
               f"lowering to {delegate}" if delegate else "converting to Edge",
               "planning memory and emitting", "writing"])
    with filtered(), progress.steps(f"export {spec}", stages) as step:
        step.next()
        model, inputs = load_model_spec(spec)
        t0 = time.perf_counter()
        ep, summary = _capture(model, inputs, delegate, quantize, calibration)
        step.next()
        edge = _lower(ep, delegate)
        step.next()
        et = edge.to_executorch(ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(memory_planning_algo=algo)))
        step.next()
        with open(out, "wb") as f:
            et.write_to_file(f)
    plans = {p.name: p.non_const_buffer_sizes[1:] for p in et.executorch_program.execution_plan}
    return {"model": spec, "path": out, "bytes": len(et.buffer), "planned": plans,
            "export_seconds": time.perf_counter() - t0, "quantization": summary}


def _capture(model, inputs, delegate: str | None, quantize: str | None,
             calibration: str | None):
    """The exported (and, with ``quantize``, quantized) program, and the quantization summary
    (None without ``quantize``, and for OpenVINO's NNCF, which reports nothing per layer)."""
    from .exir.torch_export import export_program

    if quantize is None:
        return export_program(model, inputs), None
    from .backends.xnnpack.quantizer.recipes import load_calibration

    samples = load_calibration(calibration, inputs) if calibration else None
    if delegate == "openvino":
        from .backends.openvino.recipes import quantize_for_openvino

        return quantize_for_openvino(model, inputs, samples), None
    from .backends.xnnpack.quantizer.recipes import quantize_with_summary

    return quantize_with_summary(model, inputs, quantize, samples)


def _lower(ep, delegate: str | None):
    from .exir import to_edge, to_edge_transform_and_lower

    if delegate == "xnnpack":
        from .backends.xnnpack.partition import XnnpackPartitioner

        return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    if delegate == "openvino":
        from .backends.openvino import OpenvinoPartitioner

        return to_edge_transform_and_lower(ep, partitioner=[OpenvinoPartitioner()])
    if delegate == "vulkan":
        from .backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        return to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()])
    if delegate == "coreml":
        from .backends.apple.coreml.partition import CoreMLPartitioner

        return to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner()])
    return to_edge(ep)


def _cmd_export(args: argparse.Namespace) -> int:
    stats = export_model(args.model, args.output, args.algo, args.delegate, args.quantize,
                         args.calibration)
    if stats["quantization"] is not None:
        print(stats["quantization"])
    planned = ", ".join(f"{k}: {_fmt_bytes(sum(v))}" for k, v in stats["planned"].items())
    print(f"wrote {stats['path']}: {_fmt_bytes(stats['bytes'])}; planned memory {planned}; "
          f"export took {stats['export_seconds']:.2f} s")
    return 0


# ---- run -----------------------------------------------------------------------------


def _random_inputs(meta, seed: int) -> list[np.ndarray]:
    from .schema.scalar_type import to_numpy_dtype

    rng = np.random.default_rng(seed)
    inputs = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        dtype = to_numpy_dtype(info.dtype())
        shape = info.sizes()
        if np.issubdtype(dtype, np.floating) or dtype.name == "bfloat16":
            inputs.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == np.bool_:
            inputs.append(rng.integers(0, 2, shape).astype(np.bool_))
        else:
            inputs.append(rng.integers(0, 10, shape).astype(dtype))
    return inputs


def _cmd_run(args: argparse.Namespace) -> int:
    from .runtime import Runtime

    if args.verify or str(args.program).endswith(".bpte"):
        from .runtime.bundled import load_bundled_program

        bundled = load_bundled_program(args.program)
        if not args.verify:  # run the bundled inputs only
            for name in bundled.method_names:
                for idx in range(bundled.num_test_cases(name)):
                    outs = bundled.run_bundled_input(name, idx)
                    shapes = [list(getattr(o, "shape", [])) for o in outs]
                    print(f"{name}[{idx}]: ran, output shapes {shapes}")
            print("add --verify to check the bundled expected outputs")
            return 0
        for line in bundled.verify_all(rtol=args.rtol, atol=args.atol):  # raises on mismatch
            print(line)
        print("bundled program verified")
        return 0
    if args.debug_buffer_size and not args.etdump:
        raise EdgeTorchError("--debug-buffer-size needs --etdump PATH (the ETDump it goes with)")
    program = Runtime.get().load_program(args.program, enable_etdump=bool(args.etdump),
                                         debug_buffer_size=args.debug_buffer_size)
    method = program.load_method(args.method)
    meta = method.metadata
    inputs = [np.load(p) for p in args.inputs] if args.inputs else _random_inputs(meta, args.seed)
    from .kernels import accel

    warming = accel.pending()  # compiled kernels still loading: time them once loaded
    outputs = method.execute(inputs)
    if warming:
        accel.wait_until_warm()
    # untimed: the second call may build a plan (a delegate's larger or dynamic graph)
    untimed = 2
    method.execute(inputs)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        method.execute(inputs)
        times.append(time.perf_counter() - t0)
    print(meta)
    for i, out in enumerate(outputs):
        if isinstance(out, np.ndarray):
            flat = out.astype(np.float64).ravel() if out.size else np.zeros(1)
            print(f"output {i}: {out.dtype}{list(out.shape)} min {flat.min():.6g} max {flat.max():.6g} "
                  f"mean {flat.mean():.6g}")
            if args.save:
                np.save(f"{args.save}_{i}.npy", out)
        else:
            print(f"output {i}: {out!r}")
    for _backend, handle in getattr(method, "_delegate_handles", []):
        if hasattr(handle, "report"):  # e.g. Ethos-U: what simulated it, the NPU operations
            print(handle.report())
    if times:
        print(latency_line(times, untimed))
    if args.etdump:
        debug_buffer = f"{args.etdump}.debug_buffer.bin" if args.debug_buffer_size else None
        program.write_etdump_result_to_file(args.etdump, debug_buffer)
        print(f"wrote {args.etdump} ({untimed + len(times)} runs)"
              + (f" and {debug_buffer}" if debug_buffer else "")
              + f"; read it with: edgetorch inspector --etdump_path {args.etdump}"
              + (f" --debug_buffer_path {debug_buffer}" if debug_buffer else ""))
    return 0


def latency_line(seconds: list[float], untimed: int = 1) -> str:
    """Median, 90th percentile, min and mean of timed runs, in milliseconds."""
    ms = 1e3 * np.asarray(seconds)
    return (f"latency: median {np.median(ms):.3f} ms, p90 {np.percentile(ms, 90):.3f} ms, "
            f"min {ms.min():.3f} ms, mean {ms.mean():.3f} ms over {len(ms)} runs "
            f"(after {untimed} untimed run{'s' if untimed > 1 else ''})")


# ---- inspect -------------------------------------------------------------------------


def inspect_program(path: str, tensors: int = 0) -> str:
    from .runtime import Runtime

    program = Runtime.get().load_program(path)
    lines = [f"{path}: {_fmt_bytes(os.path.getsize(path)) if os.path.exists(path) else ''}"]
    for name in sorted(program.method_names):
        meta = program.metadata(name)
        plan = program._plan(name)
        lines.append(f"method {name}")
        for i in range(meta.num_inputs()):
            lines.append(f"  input  {i}: {meta.input_tensor_meta(i)}")
        for i in range(meta.num_outputs()):
            lines.append(f"  output {i}: {meta.output_tensor_meta(i)}")
        sizes = [meta.memory_planned_buffer_size(i) for i in range(meta.num_memory_planned_buffers())]
        lines.append(f"  instructions: {meta.num_instructions()}   values: {len(plan.values)}   "
                     f"planned arenas: {', '.join(_fmt_bytes(s) for s in sizes) or 'none'}")
        counts: dict[str, int] = {}
        for chain in plan.chains:
            for ins in chain.instructions:
                a = ins.instr_args
                key = plan.operators[a.op_index].qualified_name if hasattr(a, "op_index") else type(a).__name__
                if hasattr(a, "delegate_index"):
                    key = f"delegate {plan.delegates[a.delegate_index].id}"
                counts[key] = counts.get(key, 0) + 1
        lines.append("  operators:")
        lines += [f"    {n:>4} x {op}" for op, n in sorted(counts.items(), key=lambda kv: -kv[1])]
        for d in plan.delegates:
            lines.append(f"  delegate {d.id}: {d.processed.location.name} #{d.processed.index}, "
                         f"{len(d.compile_specs)} compile specs")
    lines.append("size breakdown:")
    for section, n in program.size_breakdown().items():
        lines.append(f"  {section:<20} {_fmt_bytes(n):>12}")
    if tensors:
        from .devtools.size_report import format_size_items, size_items

        lines.append(f"largest stored tensors and blobs (top {tensors}):")
        lines += format_size_items(size_items(program._pte), tensors, _fmt_bytes)
    return "\n".join(lines)


def _cmd_inspect(args: argparse.Namespace) -> int:
    if args.ethosu:
        from .backends.arm.runtime.npu.listing import ethosu_listing

        print(ethosu_listing(args.program))
        return 0
    print(inspect_program(args.program, args.tensors))
    return 0


# ---- visualize -----------------------------------------------------------------------


def _cmd_visualize(args: argparse.Namespace) -> int:

    from .devtools.visualization import visualize
    from .examples import load_model_spec
    from .exir import to_edge, to_edge_transform_and_lower
    from .exir.torch_export import export_program

    model, inputs = load_model_spec(args.model)
    program = export_program(model, inputs)
    if args.stage != "exported":
        partitioners = []
        if args.delegate == "xnnpack":
            from .backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

            partitioners.append(XnnpackPartitioner())
        program = to_edge_transform_and_lower(program, partitioner=partitioners) \
            if partitioners else to_edge(program)
        if args.stage == "executorch":
            program = program.to_executorch()
    path = visualize(program, args.output, title=f"{args.model} ({args.stage})")
    print(f"wrote {path}")
    return 0


# ---- oplist (selective build) ------------------------------------------------------------


def _cmd_oplist(args: argparse.Namespace) -> int:
    from .runtime.selective_build import dump_oplist, gen_oplist
    from .schema.pte import PteFile

    programs = []
    for path in args.programs:
        try:
            with open(path, "rb") as f:
                programs.append((path, PteFile.parse(memoryview(f.read())).program))
        except OSError as e:
            raise EdgeTorchError(f"cannot read program {path!r}: {e}") from e
    out = args.output
    if os.path.isdir(out):  # as gen_oplist.py: a directory gets selected_operators.yaml
        out = os.path.join(out, "selected_operators.yaml")
    oplist = gen_oplist(programs)
    with open(out, "w") as f:
        f.write(dump_oplist(oplist))
    print(f"wrote {out}: {len(oplist['operators'])} operators from {len(programs)} program(s); "
          f"restrict a runtime to it with EDGETORCH_SELECTED_OPS={out}")
    return 0


# ---- demo ----------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.model, args.output, args.rounds)


DESCRIPTION = """\
Compile PyTorch models to ExecuTorch .pte programs; run, inspect and profile .pte
programs with a NumPy-only runtime."""
EPILOG = """\
run, inspect, oplist and llm need only the runtime; export, visualize and demo
need the compiler: pip install 'edgetorch[compiler]'.
edgetorch COMMAND --help shows a command's options."""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The texts above as written (and --version on one line); command names in one column
    (argparse measures subcommands without their indent, so 'visualize' went to a line of
    its own)."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            longest = max(len(name) for name in action.choices)
            self._action_max_length = max(self._action_max_length,
                                          longest + self._current_indent + self._indent_increment)


def version_line() -> str:
    """edgetorch's version and the versions of what it runs with (for bug reports); torch's
    from its installed metadata, without importing it."""
    from importlib import metadata

    from . import __version__

    found = []
    for dist in ("numpy", "torch", "torchao"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"no {dist}")
    return (f"edgetorch {__version__} (ExecuTorch 1.5.1's formats; Python "
            f"{sys.version.split()[0]}, {', '.join(found)})")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="edgetorch", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=_HelpFormatter)
    p.add_argument("--version", action="version", version=version_line())
    sub = p.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")

    e = sub.add_parser("export", help="export a model to a .pte program")
    e.add_argument("model", help="a built-in example name, or path/to/file.py:factory")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--algo", default="greedy", choices=["greedy", "naive"],
                   help="memory planning algorithm")
    e.add_argument("--delegate", choices=["xnnpack", "openvino", "vulkan", "coreml"],
                   help="lower to a backend (coreml needs the coreml extra)")
    e.add_argument("--quantize", choices=["static", "dynamic", "8da4w"], nargs="?",
                   const="static", help="quantize first (needs --delegate; bare --quantize is "
                   "static; openvino takes static only: NNCF int8)")
    e.add_argument("--calibration", metavar="DIR",
                   help="calibrate on the .npy files in DIR (default: the example inputs)")
    e.set_defaults(fn=_cmd_export)

    r = sub.add_parser("run", help="run a .pte program with random or .npy inputs")
    r.add_argument("program")
    r.add_argument("--method", default="forward")
    r.add_argument("--inputs", nargs="*", help=".npy files, one per input")
    r.add_argument("--repeat", type=int, default=10,
                   help="timed runs, after two untimed ones (plans are built in the second)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--save", help="save outputs as PREFIX_<i>.npy")
    r.add_argument("--etdump", metavar="PATH",
                   help="record every run's events and write them as an ETDump (.etdp) for "
                   "the inspector")
    r.add_argument("--debug-buffer-size", type=int, default=0, metavar="BYTES",
                   help="with --etdump: also keep each operator's outputs, up to BYTES, "
                   "written to PATH.debug_buffer.bin")
    r.add_argument("--verify", action="store_true",
                   help="a .bpte: run every bundled test case and check its expected outputs")
    r.add_argument("--rtol", type=float, default=1e-5, help="with --verify")
    r.add_argument("--atol", type=float, default=1e-8, help="with --verify")
    r.set_defaults(fn=_cmd_run)

    i = sub.add_parser("inspect", help="show methods, operators, arenas and sizes of a .pte")
    i.add_argument("program")
    i.add_argument("--ethosu", action="store_true",
                   help="list each Ethos-U delegate's register command stream (as Vela prints it)")
    i.add_argument("--tensors", type=int, default=0, metavar="N",
                   help="also list the N largest stored tensors, delegate blobs and named data")
    i.set_defaults(fn=_cmd_inspect)

    o = sub.add_parser("oplist", help="write ExecuTorch's selected_operators.yaml for .pte files")
    o.add_argument("programs", nargs="+", metavar="program.pte")
    o.add_argument("-o", "--output", default="selected_operators.yaml",
                   help="the YAML file (or a directory for selected_operators.yaml)")
    o.set_defaults(fn=_cmd_oplist)

    v = sub.add_parser("visualize", help="draw a model's graph as a self-contained HTML page")
    v.add_argument("model", help="a built-in example name, or path/to/file.py:factory")
    v.add_argument("-o", "--output", default="graph.html")
    v.add_argument("--stage", default="edge", choices=["exported", "edge", "executorch"])
    v.add_argument("--delegate", choices=["xnnpack"], help="lower to a backend first")
    v.set_defaults(fn=_cmd_visualize)

    from .devtools.inspector import inspector_cli  # no torch import until it runs

    ins = sub.add_parser("inspector", help="profile table of an ETDump (+ ETRecord)")
    inspector_cli.add_arguments(ins)
    ins.set_defaults(fn=inspector_cli.run)

    from .backends.arm.scripts import run as arm_run  # no torch import until it runs

    arm = sub.add_parser("arm", help="Arm Ethos-U, Cortex-M: 'arm run' compiles and runs (run.sh)")
    arm_run.add_arguments(arm)

    from .extension.llm.cli import add_llm_parser  # imports nothing heavy until it runs

    add_llm_parser(sub)

    from .devtools.quant_debug.cli import add_quant_parser  # no torch import until it runs

    add_quant_parser(sub)

    d = sub.add_parser("demo", help="export a built-in model, run it, compare with eager")
    d.add_argument("model", nargs="?", default="mobilenet_v2")
    d.add_argument("-o", "--output", default=None)
    d.add_argument("--rounds", type=int, default=10,
                   help="timed rounds (one call of edgetorch and one of eager each)")
    d.set_defaults(fn=_cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except EdgeTorchError as e:
        print(f"edgetorch: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        if "torch" in str(e):
            print(f"edgetorch: '{args.command}' needs the compiler: pip install 'edgetorch[compiler]'",
                  file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())

