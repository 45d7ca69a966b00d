"""ExecuTorch side of the whole-program feature tests. Runs INSIDE the reference venv.

    python ref_features.py export FEATURE OUTDIR     -> OUTDIR/FEATURE.pte (+ .ptd files)
    python ref_features.py run FEATURE PTE OUT.npz [--ptd PATH]
        runs the feature's scenario in ExecuTorch's runtime; outputs arr_0, arr_1, ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from feature_models import FEATURES, run_scenario  # noqa: E402


def cmd_export(args: argparse.Namespace) -> None:
    from executorch.exir import ExecutorchBackendConfig, to_edge

    feature = FEATURES[args.feature]()
    edge = to_edge(feature.programs, constant_methods=feature.constant_methods)
    et = edge.to_executorch(ExecutorchBackendConfig(**feature.config))
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.feature}.pte").write_bytes(et.buffer)
    if feature.config.get("external_constants"):
        et.write_tensor_data_to_file(str(out))


def cmd_run(args: argparse.Namespace) -> None:
    from executorch.runtime import Runtime

    feature = FEATURES[args.feature]()
    kwargs = {"data_path": args.ptd} if args.ptd else {}
    program = Runtime.get().load_program(Path(args.pte), **kwargs)
    outs = run_scenario(feature, program.load_method)
    np.savez(args.out, *outs)


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("feature")
    e.add_argument("outdir")
    e.set_defaults(fn=cmd_export)
    r = sub.add_parser("run")
    r.add_argument("feature")
    r.add_argument("pte")
    r.add_argument("out")
    r.add_argument("--ptd")
    r.set_defaults(fn=cmd_run)
    args = p.parse_args()
    args.fn(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
