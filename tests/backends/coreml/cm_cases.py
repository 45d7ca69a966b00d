"""How the Core ML tests lower and run models with edgetorch, and read a delegate back."""

from __future__ import annotations

import torch
from delegate_checks import eager, fp16_tolerance, run  # noqa: F401 (tests/support)

from edgetorch.backends.apple.coreml import inmemoryfs
from edgetorch.backends.apple.coreml.runtime import mlmodel_schema
from edgetorch.backends.apple.coreml.runtime.protobuf import decode
from edgetorch.schema.pte import PteFile

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





def delegates(pte: bytes) -> list[dict[str, bytes]]:
    f = PteFile.parse(pte)
    return [{k: bytes(v) for k, v in inmemoryfs.unflatten(f.delegate_bytes(d)).files().items()}
            for d in f.program.execution_plan[0].delegates]


def decoded_model(files: dict[str, bytes]) -> dict:
    return decode(files[MODEL_PATH], mlmodel_schema.MODEL, "Model")
