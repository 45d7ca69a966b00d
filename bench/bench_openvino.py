"""OpenVINO vs XNNPACK vs eager on the built-in examples, in one run.

For each example, median latency (ms, after a warm-up) of: eager PyTorch; edgetorch's runtime
running the OpenVINO delegate (device-default precision, and with
``CompileSpec("inference_precision", b"f32")``); edgetorch's runtime running the XNNPACK
delegate (NumPy); and, when the OpenVINO reference environment is there, ExecuTorch 1.5.1's
runtime running edgetorch's OpenVINO ``.pte``. Run in the OpenVINO venv:

    EDGETORCH_REF_OV_PYTHON=.venv-ref-ov/bin/python .venv-ov/bin/python bench/bench_openvino.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

# One BLAS/OpenMP thread for eager and the NumPy runtime, as bench_examples.py; OpenVINO keeps
# its own thread pool (its CPU plugin's default streams), as it does in ExecuTorch.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat"))
from refenv_openvino import TOOL, _run, ref_ov_python, ref_ov_status  # noqa: E402
from timing import median_ms  # noqa: E402

from edgetorch.backends.openvino import OpenvinoPartitioner  # noqa: E402
from edgetorch.backends.xnnpack import XnnpackPartitioner  # noqa: E402
from edgetorch.examples import EXAMPLES  # noqa: E402
from edgetorch.exir import to_edge_transform_and_lower  # noqa: E402
from edgetorch.exir.backend import CompileSpec  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

MODELS = ["tiny_classifier", "cnn", "transformer_encoder", "mobilenet_v2", "resnet18"]


def _lower(model, inputs, partitioner) -> bytes:
    ep = torch.export.export(model, inputs)
    return to_edge_transform_and_lower(ep, partitioner=[partitioner]).to_executorch().buffer


def _ours_ms(pte: bytes, inputs, runs: int) -> float:
    method = Runtime.get().load_program(pte).load_method("forward")
    arrays = [t.numpy() for t in inputs]
    return median_ms(lambda: method.execute(arrays), runs)


def _executorch_ms(pte: bytes, inputs, runs: int) -> float | None:
    if not ref_ov_status()[0]:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path, npz, out, js = (Path(tmp) / n for n in ("m.pte", "in.npz", "out.npz", "t.json"))
        path.write_bytes(pte)
        np.savez(npz, *[t.numpy() for t in inputs])
        _run(["run", str(path), str(npz), str(out), "--time", str(runs), "--json", str(js)])
        return json.loads(js.read_text())["median_ms"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=MODELS, choices=sorted(EXAMPLES))
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    f32 = [CompileSpec("device", b"CPU"), CompileSpec("inference_precision", b"f32")]
    print(f"ExecuTorch runtime: {ref_ov_status()[1] if ref_ov_status()[0] else 'not available'}"
          f" ({ref_ov_python()}, {TOOL.name})")
    head = ["model", "eager", "ours+OV", "ours+OV f32", "ours+XNNPACK", "ET+OV"]
    print(" | ".join(f"{h:>14}" for h in head))
    for name in args.models:
        model, inputs = EXAMPLES[name].build()
        with torch.no_grad():
            eager = median_ms(lambda: model(*inputs), args.runs)  # noqa: B023
        ov = _lower(model, inputs, OpenvinoPartitioner())
        row = [eager, _ours_ms(ov, inputs, args.runs),
               _ours_ms(_lower(model, inputs, OpenvinoPartitioner(f32)), inputs, args.runs),
               _ours_ms(_lower(model, inputs, XnnpackPartitioner()), inputs, args.runs),
               _executorch_ms(ov, inputs, args.runs)]
        cells = [f"{v:14.3f}" if v is not None else f"{'-':>14}" for v in row]
        print(" | ".join([f"{name:>14}", *cells]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
