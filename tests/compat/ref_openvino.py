"""ExecuTorch 1.5.1's OpenVINO backend, driven from our tests. Runs ONLY in the OpenVINO
reference venv (``executorch[openvino]==1.5.1`` + ``nncf==3.1.0``, ``make test-openvino``).

    python ref_openvino.py export MODEL OUT.pte [--quantize] [--calibration N]
    python ref_openvino.py run PTE INPUTS.npz OUT.npz [--time N --json FILE]
    python ref_openvino.py runmany PTE INPUTS.npz OUT.npz

``export`` lowers a built-in example with ExecuTorch's ``OpenvinoPartitioner([CompileSpec(
"device", b"CPU")])`` (after ``quantize_model`` on N seeded calibration inputs with
``--quantize``) and writes OUT.pte plus OUT.inputs.npz / OUT.expected.npz (eager outputs of
the float model). ``runmany`` runs a one-input method once per array of INPUTS.npz and
saves each first output. ``run`` executes a .pte in ExecuTorch's runtime, whose ``OpenvinoBackend``
finds libopenvino_c through the installed ``openvino`` package. Only ``edgetorch.examples`` is
imported from edgetorch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from edgetorch.examples import EXAMPLES  # noqa: E402


def calibration_inputs(name: str, n: int) -> list[tuple[torch.Tensor, ...]]:
    """The calibration set both sides use: the example's inputs drawn with seeds 1000.."""
    return [EXAMPLES[name].example_inputs(seed=1000 + i) for i in range(n)]


def _np(t) -> np.ndarray:
    return t.detach().contiguous().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def cmd_export(args: argparse.Namespace) -> None:
    from executorch.backends.openvino.partitioner import OpenvinoPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.backend_details import CompileSpec

    model, inputs = EXAMPLES[args.model].build()
    with torch.no_grad():
        eager = model(*inputs)
    exported = torch.export.export(model, inputs)
    if args.quantize:
        from executorch.backends.openvino.quantizer import quantize_model

        calib = [c[0] for c in calibration_inputs(args.model, args.calibration)]
        quantized = quantize_model(exported.module(), calib, subset_size=len(calib),
                                   transform_fn=lambda x: x)
        exported = torch.export.export(quantized, inputs)
    lowered = to_edge_transform_and_lower(
        exported, partitioner=[OpenvinoPartitioner([CompileSpec("device", b"CPU")])])
    out = Path(args.out)
    out.write_bytes(lowered.to_executorch().buffer)
    flat, _ = torch.utils._pytree.tree_flatten(eager)
    np.savez(out.with_suffix(".inputs.npz"), *[_np(t) for t in inputs])
    np.savez(out.with_suffix(".expected.npz"), *[_np(t) for t in flat])


def cmd_run(args: argparse.Namespace) -> None:
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(Path(args.pte)).load_method("forward")
    with np.load(args.inputs) as data:
        arrays = [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]
    inputs = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    outputs = method.execute(inputs)
    np.savez(args.out, *[_np(o) for o in outputs])
    if args.time:
        samples = []
        for _ in range(args.time):
            start = time.perf_counter()
            method.execute(inputs)
            samples.append((time.perf_counter() - start) * 1e3)
        stats = {"runs": args.time, "mean_ms": statistics.fmean(samples),
                 "median_ms": statistics.median(samples), "min_ms": min(samples)}
        Path(args.json).write_text(json.dumps(stats))


def cmd_runmany(args: argparse.Namespace) -> None:
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(Path(args.pte)).load_method("forward")
    with np.load(args.inputs) as data:
        arrays = [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]
    outs = [_np(method.execute([torch.from_numpy(np.ascontiguousarray(a))])[0]) for a in arrays]
    np.savez(args.out, *outs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("model", choices=sorted(EXAMPLES))
    p.add_argument("out")
    p.add_argument("--quantize", action="store_true")
    p.add_argument("--calibration", type=int, default=20)
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("run")
    p.add_argument("pte")
    p.add_argument("inputs")
    p.add_argument("out")
    p.add_argument("--time", type=int, default=0)
    p.add_argument("--json")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("runmany")
    p.add_argument("pte")
    p.add_argument("inputs")
    p.add_argument("out")
    p.set_defaults(func=cmd_runmany)
    args = parser.parse_args()
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
