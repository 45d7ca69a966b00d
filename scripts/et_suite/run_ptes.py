"""Run every ``.pte`` of a folder in one runtime; used by the runner for both sides.

    python run_ptes.py executorch|edgetorch FOLDER

For each ``X.pte`` the method ``forward`` gets inputs made from its metadata (seeded random
values of each input's dtype and shape; the inputs of the first side are saved to
``X.inputs.npz`` and reused by the second), and its outputs go to ``X.<side>.npz`` or the
error to ``X.<side>.err``. One process, so thousands of programs cost one interpreter start;
``X.<side>.running`` marks the program in progress, so when a runtime aborts the process the
runner starts it again and the culprit is skipped (and reported as crashed).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import numpy as np
import torch

# ExecuTorch's ScalarType codes -> torch dtypes the generator makes.
DTYPES = {1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
          6: torch.float32, 7: torch.float64, 11: torch.bool, 0: torch.uint8}


def _inputs(method_meta, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(method_meta.num_inputs()):
        info = method_meta.input_tensor_meta(i)
        dtype = DTYPES.get(int(info.dtype()), torch.float32)
        shape = list(info.sizes())
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=g).to(dtype)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=g).bool()
        else:
            t = torch.randint(0, 4, shape, generator=g).to(dtype)
        out.append(t)
    return out


def main() -> int:
    side, folder = sys.argv[1], Path(sys.argv[2])
    if side == "executorch":
        from executorch.runtime import Runtime
    else:
        import edgetorch.backends.xnnpack  # noqa: F401  (registers the XNNPACK runtime)
        from edgetorch.runtime import Runtime
    runtime = Runtime.get()
    for pte in sorted(folder.glob("*.pte")):
        saved = pte.with_suffix(".inputs.npz")
        running = pte.with_suffix(f".{side}.running")
        if any(pte.with_suffix(f".{side}{s}").exists() for s in (".npz", ".err", ".running")):
            continue  # done, or the one a previous process died on
        running.touch()
        try:
            program = runtime.load_program(pte.read_bytes())
            method = program.load_method("forward")
            if saved.exists():
                with np.load(saved) as f:
                    inputs = [torch.from_numpy(f[f"arr_{i}"]) for i in range(len(f.files))]
            else:
                inputs = _inputs(method.metadata, seed=len(pte.stem))
                np.savez(saved, *[t.numpy() for t in inputs])
            outputs = method.execute(inputs)
            np.savez(pte.with_suffix(f".{side}.npz"),
                     *[np.asarray(o) if isinstance(o, torch.Tensor) or hasattr(o, "shape")
                       else np.asarray(o) for o in outputs])
        except BaseException as e:  # noqa: BLE001 - every failure is data for the report
            pte.with_suffix(f".{side}.err").write_text(
                f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}")
            if isinstance(e, KeyboardInterrupt):
                raise
        running.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
