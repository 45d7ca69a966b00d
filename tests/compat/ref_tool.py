"""Reference harness around the real ExecuTorch; runs ONLY inside the reference venv.

Usage (from anywhere)::

    /work/.venv-ref/bin/python tests/compat/ref_tool.py export MODEL OUT.pte [--xnnpack]
    /work/.venv-ref/bin/python tests/compat/ref_tool.py run PTE INPUTS.npz OUT.npz [--time N]
    /work/.venv-ref/bin/python tests/compat/ref_tool.py stats PTE

``MODEL`` is a built-in example name or ``path/to/file.py:factory`` (see
``edgetorch.examples.load_model_spec``). ``export`` writes ``OUT.pte`` plus ``OUT.inputs.npz``
(the example inputs) and ``OUT.expected.npz`` (eager outputs); npz arrays are positional:
``arr_0``, ``arr_1``, ... ``stats`` and ``run --time`` print JSON on stdout and, with
``--json FILE``, also write it to FILE (robust against runtime log lines on stdout).
Any failure prints the traceback to stderr and exits with status 1.

Only ``edgetorch.examples`` is imported from edgetorch (it depends on torch alone); everything
else here is ExecuTorch's own code, which is the point: it is the ground truth we compare to.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np
import torch

SRC = Path(__file__).resolve().parents[2] / "src"
sys.path.insert(0, str(SRC))

from edgetorch.examples import load_model_spec  # noqa: E402


def sidecar_paths(pte: Path) -> tuple[Path, Path]:
    """Return the ``(inputs.npz, expected.npz)`` paths that ``export`` writes next to ``pte``."""
    return pte.with_suffix(".inputs.npz"), pte.with_suffix(".expected.npz")


def _to_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous().numpy()
    return np.asarray(value)


def _load_npz(path: Path) -> list[np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        names = list(data.files)
        bad = [n for n in names if not (n.startswith("arr_") and n[4:].isdigit())]
        if bad:
            raise ValueError(f"{path}: expected positional arrays arr_0, arr_1, ...; got {bad}")
        # Sort numerically so arr_10 follows arr_9.
        return [data[n] for n in sorted(names, key=lambda n: int(n[4:]))]


def cmd_export(args: argparse.Namespace) -> None:
    from executorch.exir import to_edge, to_edge_transform_and_lower

    model, inputs = load_model_spec(args.model)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    with torch.no_grad():
        eager = model(*inputs)
    eager_flat, _ = torch.utils._pytree.tree_flatten(eager)

    exported = torch.export.export(model, inputs)
    if args.xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )

        edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    else:
        edge = to_edge(exported)
    program = edge.to_executorch()
    out.write_bytes(program.buffer)

    inputs_path, expected_path = sidecar_paths(out)
    np.savez(inputs_path, *[_to_numpy(t) for t in inputs])
    np.savez(expected_path, *[_to_numpy(t) for t in eager_flat])
    print(f"wrote {out} ({out.stat().st_size} bytes), {inputs_path.name}, {expected_path.name}")


def cmd_run(args: argparse.Namespace) -> None:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(Path(args.pte))
    method = program.load_method(args.method)
    inputs = [torch.from_numpy(np.ascontiguousarray(a)) for a in _load_npz(Path(args.inputs))]

    outputs = method.execute(inputs)
    np.savez(args.out, *[_to_numpy(o) for o in outputs])

    if args.time:
        # The run above doubles as warm-up (first-touch allocations, delegate init).
        samples = []
        for _ in range(args.time):
            start = time.perf_counter()
            method.execute(inputs)
            samples.append((time.perf_counter() - start) * 1e3)
        _emit_json(
            {
                "pte": str(args.pte),
                "method": args.method,
                "runs": args.time,
                "mean_ms": statistics.fmean(samples),
                "median_ms": statistics.median(samples),
                "min_ms": min(samples),
                "stdev_ms": statistics.stdev(samples) if len(samples) > 1 else 0.0,
            },
            args.json,
        )


def pte_stats(pte: Path) -> dict:
    """Summarise a .pte: on-disk layout, and per method its ops, instructions and buffers."""
    from executorch.exir._serialize._program import (
        _flatbuffer_to_program,
        _get_extended_header,
        deserialize_pte_binary,
    )
    from executorch.exir.schema import Tensor as SchemaTensor

    data = pte.read_bytes()
    program = deserialize_pte_binary(data).program
    # deserialize_pte_binary folds segment data back into the Program, hiding where things
    # live in the file; re-parse the bare flatbuffer to report the on-disk layout.
    header = _get_extended_header(data)
    if header is not None and header.is_valid():
        fb_size = header.program_size
        layout = {
            "program_size": header.program_size,
            "segment_base_offset": header.segment_base_offset,
            "segment_data_size": header.segment_data_size,
        }
    else:
        fb_size, layout = len(data), None
    raw = _flatbuffer_to_program(data[:fb_size])

    methods = {}
    for plan in program.execution_plan:
        instrs = [i for chain in plan.chains for i in chain.instructions]
        op_names = [f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators]
        methods[plan.name] = {
            "operators": sorted(set(op_names)),
            "num_operators": len(plan.operators),
            "instruction_count": len(instrs),
            "instruction_kinds": dict(Counter(type(i.instr_args).__name__ for i in instrs)),
            "num_chains": len(plan.chains),
            "num_values": len(plan.values),
            "num_tensor_values": sum(isinstance(v.val, SchemaTensor) for v in plan.values),
            "inputs": list(plan.inputs),
            "outputs": list(plan.outputs),
            "non_const_buffer_sizes": list(plan.non_const_buffer_sizes),
            "delegates": [d.id for d in plan.delegates],
        }
    return {
        "path": str(pte),
        "file_size": len(data),
        "file_identifier": data[4:8].decode("ascii", errors="replace"),
        "program_version": raw.version,
        "extended_header": layout,
        "segment_sizes": [seg.size for seg in raw.segments],
        "constant_segment_index": raw.constant_segment.segment_index,
        # Entry 0 is the reserved placeholder for "no constant data".
        "num_constant_segment_offsets": len(raw.constant_segment.offsets),
        "num_inline_constant_buffers": len(raw.constant_buffer),
        "num_inline_delegate_data": len(raw.backend_delegate_data),
        "num_named_data": len(raw.named_data or []),
        "methods": methods,
    }


def cmd_stats(args: argparse.Namespace) -> None:
    _emit_json(pte_stats(Path(args.pte)), args.json)


def _emit_json(payload: dict, json_path: str | None) -> None:
    text = json.dumps(payload, indent=2, sort_keys=True)
    print(text)
    if json_path:
        Path(json_path).write_text(text + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (one subcommand per reference operation)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("export", help="export a model to .pte with ExecuTorch")
    p.add_argument("model", help="built-in example name or path/to/file.py:factory")
    p.add_argument("out", help="output .pte path; .inputs.npz/.expected.npz go beside it")
    p.add_argument("--xnnpack", action="store_true", help="lower to the XNNPACK delegate")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("run", help="run a .pte with ExecuTorch's runtime")
    p.add_argument("pte")
    p.add_argument("inputs", help="npz with positional inputs arr_0, arr_1, ...")
    p.add_argument("out", help="npz to write the outputs to (arr_0, ...)")
    p.add_argument("--method", default="forward")
    p.add_argument("--time", type=int, default=0, metavar="N", help="also time N runs")
    p.add_argument("--json", metavar="FILE", help="also write the timing JSON to FILE")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("stats", help="print JSON facts about a .pte")
    p.add_argument("pte")
    p.add_argument("--json", metavar="FILE", help="also write the JSON to FILE")
    p.set_defaults(func=cmd_stats)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
