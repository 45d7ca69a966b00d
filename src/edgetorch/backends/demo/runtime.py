"""Runtime half of the demo backend: interprets the JSON program ``preprocess`` wrote.

The blob is ``{"version", "inputs", "outputs", "constants", "instructions"}``; every
instruction is ``{"op": "aten.add.Tensor", "args": ["%x", "%y", 1], "out": "add",
"dtype": "float32"}`` where ``"%name"`` refers to an input, a constant or an earlier ``out``.
NumPy only: this module must import without torch.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidProgramError
from ...runtime.backends import BackendExecutionContext, BackendInitContext, backend

BACKEND_ID = "BackendWithCompilerDemo"
VERSION = 1


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    y = x @ w.T
    return y if b is None else y + b


OPS = {
    "aten.add.Tensor": lambda a, b, alpha=1: a + alpha * b,
    "aten.add.Scalar": lambda a, b, alpha=1: a + alpha * b,
    "aten.sub.Tensor": lambda a, b, alpha=1: a - alpha * b,
    "aten.sub.Scalar": lambda a, b, alpha=1: a - alpha * b,
    "aten.mul.Tensor": np.multiply,
    "aten.mul.Scalar": np.multiply,
    "aten.div.Tensor": np.divide,
    "aten.neg.default": np.negative,
    "aten.sin.default": np.sin,
    "aten.cos.default": np.cos,
    "aten.exp.default": np.exp,
    "aten.tanh.default": np.tanh,
    "aten.relu.default": lambda a: np.maximum(a, 0),
    "aten.sigmoid.default": lambda a: 1 / (1 + np.exp(-a)),
    "aten.mm.default": np.matmul,
    "aten.linear.default": _linear,
}


@dataclass
class DemoProgram:
    """An initialized delegate: the parsed program with its constants as arrays."""

    inputs: list[str]
    outputs: list[str]
    constants: dict[str, np.ndarray]
    instructions: list[dict[str, Any]]
    compile_specs: dict[str, bytes]


@backend(BACKEND_ID)
class DemoBackend:
    def is_available(self) -> bool:
        return True

    def init(self, blob: memoryview, compile_specs: dict[str, bytes],
             context: BackendInitContext | None = None) -> DemoProgram:
        try:
            doc = json.loads(bytes(blob).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise InvalidProgramError(f"{BACKEND_ID}: the delegate blob is not JSON ({e}); "
                                      "re-export the program") from None
        if doc.get("version") != VERSION:
            raise InvalidProgramError(f"{BACKEND_ID}: blob version {doc.get('version')!r}, this "
                                      f"runtime reads version {VERSION}; re-export the program")
        for ins in doc["instructions"]:
            if ins["op"] not in OPS:
                raise InvalidProgramError(f"{BACKEND_ID}: unknown op {ins['op']!r}; this "
                                          f"runtime has {sorted(OPS)}")
        constants = {
            name: np.frombuffer(base64.b64decode(c["data"]), dtype=c["dtype"]).reshape(c["shape"])
            for name, c in doc["constants"].items()
        }
        return DemoProgram(doc["inputs"], doc["outputs"], constants, doc["instructions"],
                           dict(compile_specs))

    def execute(self, handle: DemoProgram, values: list[Any], args: list[int],
                context: BackendExecutionContext | None = None) -> None:
        n_in = len(handle.inputs)
        if len(args) != n_in + len(handle.outputs):
            raise InvalidProgramError(
                f"{BACKEND_ID}: called with {len(args)} values; the delegate takes "
                f"{n_in} inputs and {len(handle.outputs)} outputs")
        env: dict[str, Any] = dict(handle.constants)
        env.update(zip(handle.inputs, (values[i] for i in args[:n_in])))
        for ins in handle.instructions:
            operands = [env[a[1:]] if isinstance(a, str) and a.startswith("%") else a
                        for a in ins["args"]]
            env[ins["out"]] = np.asarray(OPS[ins["op"]](*operands)).astype(ins["dtype"],
                                                                           copy=False)
        for idx, name in zip(args[n_in:], handle.outputs):
            result, slot = env[name], values[idx]
            if isinstance(slot, np.ndarray) and slot.shape == result.shape:
                np.copyto(slot, result)  # into the planned output memory
            elif context is not None and isinstance(slot, np.ndarray):
                np.copyto(context.resize(idx, result.shape), result)  # dynamic shapes
            else:
                values[idx] = result

    def destroy(self, handle: DemoProgram) -> None:
        handle.constants.clear()
