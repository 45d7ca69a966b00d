"""ExecuTorch's side of the quantized compatibility tests; runs ONLY in the reference venv.

    ref_quantized.py export MODEL OUT.pte     ExecuTorch's .pte for a quant_models model
                                              (+ OUT.inputs.npz, OUT.expected.npz)
    ref_quantized.py run-many MANIFEST.json   run [{"pte", "inputs", "outputs"}, ...] in
                                              ExecuTorch's runtime with its quantized kernels;
                                              per-item errors go to "error" in MANIFEST.out.json

Both commands ``import executorch.kernels.quantized`` first, as ExecuTorch requires for
programs with ``quantized_decomposed`` kernels.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import executorch.kernels.quantized  # noqa: E402, F401  (kernels + out variants)
from quant_models import CONFIG, build  # noqa: E402


def _np(t) -> np.ndarray:
    return t.detach().contiguous().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def cmd_export(args) -> None:
    from executorch.exir import ExecutorchBackendConfig, to_edge

    ep, example, eager = build(args.model)
    with torch.no_grad():
        expected = eager(*example)
    program = to_edge(ep).to_executorch(ExecutorchBackendConfig(**CONFIG.get(args.model, {})))
    out = Path(args.out)
    out.write_bytes(program.buffer)
    np.savez(out.with_suffix(".inputs.npz"), *[_np(t) for t in example])
    flat = expected if isinstance(expected, (tuple, list)) else [expected]
    np.savez(out.with_suffix(".expected.npz"), *[_np(t) for t in flat])


def _load(path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[n] for n in sorted(data.files, key=lambda n: int(n[4:]))]


def cmd_run_many(args) -> None:
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    items = json.loads(Path(args.manifest).read_text())
    for item in items:
        try:
            method = runtime.load_program(Path(item["pte"])).load_method("forward")
            inputs = [torch.from_numpy(np.array(a, order="C")) for a in _load(item["inputs"])]  # (ascontiguousarray makes 0-d 1-d)
            outputs = method.execute(inputs)
            np.savez(item["outputs"], *[_np(o) for o in outputs])
        except Exception as e:  # noqa: BLE001  (reported per item)
            item["error"] = f"{type(e).__name__}: {e}"
    Path(args.manifest).with_suffix(".out.json").write_text(json.dumps(items))


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("export")
    p.add_argument("model")
    p.add_argument("out")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("run-many")
    p.add_argument("manifest")
    p.set_defaults(fn=cmd_run_many)
    args = parser.parse_args()
    try:
        args.fn(args)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
