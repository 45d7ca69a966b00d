"""edgetorch's TOSA flow for the tests: quantize with TOSAQuantizer, lower with TOSAPartitioner,
write the .pte, and run it in edgetorch's runtime."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import arm_models
import numpy as np
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from edgetorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
from edgetorch.backends.arm.tosa.compile_spec import TosaCompileSpec
from edgetorch.backends.arm.tosa.partitioner import TOSAPartitioner
from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from edgetorch.runtime import Runtime


@dataclass
class Flow:
    inputs: tuple[torch.Tensor, ...]
    quantized_out: np.ndarray       # the converted (fake-quantized) eager model's output
    out_scale: float                # the output's quantization step
    pte: bytes
    inter: Path
    partitioner: TOSAPartitioner
    edge: object

    def tosa_files(self) -> list[Path]:
        return sorted(self.inter.glob("output_*.tosa"))

    def run(self, pte: bytes | None = None) -> np.ndarray:
        method = Runtime.get().load_program(pte or self.pte).load_method("forward")
        return np.asarray(method.execute([t.numpy() for t in self.inputs])[0])


def quantize(model, inputs, cs=None):
    cs = cs or TosaCompileSpec("TOSA-1.0+INT")
    q = TOSAQuantizer(cs).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), q)
    prepared(*inputs)
    return convert_pt2e(prepared)


def output_scale(converted) -> float:
    """The scale of the last quantize before the output (the output's int8 step)."""
    last = [n for n in converted.graph.nodes if "quantize_per_tensor" in str(n.target)
            and "dequantize" not in str(n.target)][-1]
    return float(last.args[1])


def run_flow(name: str, out_dir: Path, tosa_spec: str = "TOSA-1.0+INT") -> Flow:
    model, inputs = getattr(arm_models, name)()
    cs = TosaCompileSpec(tosa_spec).dump_intermediate_artifacts_to(str(out_dir / "inter"))
    converted = quantize(model, inputs, cs)
    with torch.no_grad():
        expected = converted(*inputs)
    partitioner = TOSAPartitioner(cs)
    edge = to_edge_transform_and_lower(torch.export.export(converted, inputs),
                                       partitioner=[partitioner])
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    return Flow(inputs, expected.numpy(), output_scale(converted), pte, out_dir / "inter",
                partitioner, edge)
