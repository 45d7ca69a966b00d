"""Runtime half of the demo backend: interprets the JSON program ``preprocess`` wrote.

The blob is ``{"version", "inputs", "outputs", "constants", "instructions"}``; every
instruction is ``{"op": "aten.add.Tensor", "args": ["%x", "%y", 1], "out": "add",
"dtype": "float32"}`` (and ``"kwargs"`` when the node had keyword arguments) where
``"%name"`` refers to an input, a constant or an earlier ``out``.
NumPy only: this module must import without torch.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidProgramError
from ...kernels.portable.resample import upsample_nearest2d_vec_out
from ...runtime.backends import BackendExecutionContext, BackendInitContext, backend

BACKEND_ID = "BackendWithCompilerDemo"
VERSION = 1


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    y = x @ w.T
    return y if b is None else y + b


def _sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, attn_mask: np.ndarray | None = None,
          dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
          enable_gqa: bool = False) -> np.ndarray:
    """softmax(q k^T * scale + mask) v, as torch's scaled_dot_product_attention (inference:
    dropout must be 0)."""
    if dropout_p:
        raise InvalidProgramError(f"{BACKEND_ID}: scaled_dot_product_attention with dropout "
                                  f"{dropout_p}; export the model in eval mode")
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:  # heads shared by groups
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    factor = np.float32(1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)
    scores = (q @ k.swapaxes(-1, -2)) * factor
    if is_causal:
        rows, cols = scores.shape[-2:]
        scores = np.where(np.tri(rows, cols, dtype=bool), scores, -np.inf)
    if attn_mask is not None:
        scores = np.where(attn_mask, scores, -np.inf) if attn_mask.dtype == bool \
            else scores + attn_mask
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (scores / scores.sum(axis=-1, keepdims=True)) @ v


def _upsample_nearest2d(x: np.ndarray, output_size: list[int] | None,
                        scale_factors: list[float] | None) -> np.ndarray:
    if output_size is not None:
        size = list(output_size)
    else:
        size = [int(n * f) for n, f in zip(x.shape[2:], scale_factors or [])]
    out = np.empty((*x.shape[:2], *size), dtype=x.dtype)
    return upsample_nearest2d_vec_out(x, output_size, scale_factors, out=out)


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
    "aten.scaled_dot_product_attention.default": _sdpa,
    "aten.upsample_nearest2d.vec": _upsample_nearest2d,
}


def store_outputs(values: list[Any], out_args: list[int], results: list[Any],
                  context: BackendExecutionContext | None) -> None:
    """Put a delegate's results in the method's output slots: into the planned memory when
    the shape fits, re-viewed within its bound when it does not (dynamic shapes)."""
    for idx, result in zip(out_args, results):
        slot = values[idx]
        if isinstance(slot, np.ndarray):
            result = np.asarray(result)
            if slot.shape == result.shape:
                np.copyto(slot, result)
                continue
            if context is not None:
                np.copyto(context.resize(idx, result.shape), result)
                continue
        values[idx] = result


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
            keywords = {k: env[a[1:]] if isinstance(a, str) and a.startswith("%") else a
                        for k, a in ins.get("kwargs", {}).items()}
            result = OPS[ins["op"]](*operands, **keywords)
            env[ins["out"]] = np.asarray(result).astype(ins["dtype"], copy=False)
        store_outputs(values, args[n_in:], [env[name] for name in handle.outputs], context)

    def destroy(self, handle: DemoProgram) -> None:
        handle.constants.clear()
