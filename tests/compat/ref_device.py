"""ExecuTorch side of the device-planning tests. Runs INSIDE the reference venv.

    python ref_device.py export OUT.pte     ExecuTorch's .pte for feature_models.device_programs
                                            (forward2 delegated to cuda:0, device planned)
    python ref_device.py run PTE OUT.json   load it in ExecuTorch's runtime: forward's output,
                                            the error load_method("forward2") raises, forward again
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from feature_models import device_programs  # noqa: E402


def export(out: str) -> None:
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.backend.test.device_util import DeviceAwarePartitioner

    edge = to_edge(device_programs()).to_backend({"forward2": DeviceAwarePartitioner()})
    et = edge.to_executorch(ExecutorchBackendConfig(enable_non_cpu_memory_planning=True))
    Path(out).write_bytes(et.buffer)


def run(pte: str, out: str) -> None:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(Path(pte))
    inputs = [torch.ones(2, 2), torch.full((2, 2), 2.0)]
    method = program.load_method("forward")
    result = {"forward": method.execute(inputs)[0].tolist()}
    try:
        program.load_method("forward2")
        result["forward2_error"] = None
    except Exception as e:  # noqa: BLE001 (the message is what is compared)
        result["forward2_error"] = f"{type(e).__name__}: {e}"
    result["forward_after"] = method.execute(inputs)[0].tolist()
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    {"export": export, "run": run}[sys.argv[1]](*sys.argv[2:])
