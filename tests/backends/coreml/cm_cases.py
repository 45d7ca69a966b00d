"""How the Core ML tests lower and run models with edgetorch, and read a delegate back."""

from __future__ import annotations

import numpy as np
import torch

from edgetorch.backends.apple.coreml import inmemoryfs
from edgetorch.backends.apple.coreml.runtime import mlmodel_schema
from edgetorch.backends.apple.coreml.runtime.protobuf import decode
from edgetorch.runtime import Runtime
from edgetorch.schema.pte import PteFile

FP16_UNIT_ROUNDOFF = 2.0 ** -11
MODEL_PATH = "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"


def compile_specs(**kwargs):
    from edgetorch.backends.apple.coreml.compiler import CoreMLBackend

    return CoreMLBackend.generate_compile_specs(**kwargs)


def lower(model: torch.nn.Module, inputs: tuple, **spec_kwargs) -> bytes:
    from edgetorch.backends.apple.coreml.partition import CoreMLPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    partitioner = CoreMLPartitioner(compile_specs=compile_specs(**spec_kwargs))
    ep = torch.export.export(model, inputs)
    return to_edge_transform_and_lower(ep, partitioner=[partitioner]).to_executorch().buffer


def run(pte: bytes, inputs: tuple) -> tuple[list[np.ndarray], list]:
    method = Runtime.get().load_program(pte).load_method("forward")
    outs = method.execute([t.numpy() for t in inputs])
    return list(outs), [h for _, h in method._delegate_handles]


def eager(model: torch.nn.Module, inputs: tuple) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*inputs)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def fp16_tolerance(reference: np.ndarray, rounding_ops: int) -> float:
    """Each operation of an fp16 program rounds its result (relative error <= 2**-11);
    through ``rounding_ops`` operations of gain near one the output is off by at most about
    ``rounding_ops * 2**-11 * max|output|``."""
    return rounding_ops * FP16_UNIT_ROUNDOFF * float(np.abs(reference).max())


def delegates(pte: bytes) -> list[dict[str, bytes]]:
    f = PteFile.parse(pte)
    return [{k: bytes(v) for k, v in inmemoryfs.unflatten(f.delegate_bytes(d)).files().items()}
            for d in f.program.execution_plan[0].delegates]


def decoded_model(files: dict[str, bytes]) -> dict:
    return decode(files[MODEL_PATH], mlmodel_schema.MODEL, "Model")
