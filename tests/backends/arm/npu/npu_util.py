"""Helpers of the command-stream simulator's tests: TOSA graphs from edgetorch's Ethos-U flow,
Vela compiles for any MAC config, and the comparison with tosa-tools' reference model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgetorch.backends.arm.ethosu.compile_spec import EthosUCompileSpec
from edgetorch.backends.arm.ethosu.vela import vela_compile
from edgetorch.backends.arm.ethosu.vela_bin import VelaBin, parse_vela_bin
from edgetorch.backends.arm.runtime.ethosu import tosa_graph_io
from edgetorch.backends.arm.runtime.npu.simulator import NpuProgram

U55_U65 = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256",
           "ethos-u65-512"]


def tosa_files(model, inputs, out_dir: Path, target: str = "ethos-u55-128") -> list[Path]:
    """edgetorch's Ethos-U flow on a torch model; the TOSA graph of each partition."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.arm.ethosu import EthosUPartitioner
    from edgetorch.backends.arm.quantizer import (
        EthosUQuantizer,
        get_symmetric_quantization_config,
    )
    from edgetorch.exir import to_edge_transform_and_lower

    cs = EthosUCompileSpec(target)
    cs.dump_intermediate_artifacts_to(str(out_dir) + "/")
    q = EthosUQuantizer(cs)
    q.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), q)
    prepared(*inputs)
    qm = convert_pt2e(prepared)
    to_edge_transform_and_lower(torch.export.export(qm, inputs), partitioner=[EthosUPartitioner(cs)])
    return sorted(out_dir.glob("output_*.tosa"))


def vela_blob(tosa: bytes, target: str) -> VelaBin:
    """Vela (as a library) on a TOSA graph with the target's default flags."""
    return parse_vela_bin(vela_compile(tosa, EthosUCompileSpec(target).compiler_flags).processed_bytes)


def random_inputs(ins, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for t in ins:
        info = np.iinfo(t.dtype)
        out.append(rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype))
    return out


def compare_with_reference(tosa: bytes, vela: VelaBin, trials: int = 4, seed: int = 0,
                           target: str | None = None) -> tuple[list[int], NpuProgram]:
    """Largest |simulator - reference model| per trial (over all outputs), and the program."""
    runner, ins, outs = tosa_graph_io(tosa)
    prog = NpuProgram.from_vela_bin(vela, target)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(trials):
        feeds = random_inputs(ins, rng)
        ref = runner.run(feeds)
        got = prog.run(feeds)
        assert len(ref) == len(got)
        diffs.append(max(int(np.abs(np.asarray(r).reshape(-1).astype(np.int64)
                                    - g.reshape(-1).astype(np.int64)).max(initial=0))
                         for r, g in zip(ref, got, strict=True)))
    return diffs, prog


def compile_pte(model, inputs, target: str, intermediates: str | None = None) -> bytes:
    """edgetorch's Ethos-U flow (the Python API of ExecuTorch's docs) -> ``.pte`` bytes."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.arm.ethosu import EthosUPartitioner
    from edgetorch.backends.arm.quantizer import (
        EthosUQuantizer,
        get_symmetric_quantization_config,
    )
    from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    cs = EthosUCompileSpec(target)
    if intermediates:
        cs.dump_intermediate_artifacts_to(intermediates)
    q = EthosUQuantizer(cs)
    q.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), q)
    prepared(*inputs)
    qm = convert_pt2e(prepared)
    edge = to_edge_transform_and_lower(torch.export.export(qm, inputs),
                                       partitioner=[EthosUPartitioner(cs)])
    return edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer


def run_pte(pte, inputs, simulation: str, **kw):
    """Run ``forward`` with the Ethos-U simulation chosen; returns (outputs, delegate handles)."""
    from edgetorch.runtime import Runtime

    options = {"EthosUBackend": {"simulation": simulation, **kw}}
    method = Runtime.get().load_program(pte, backend_options=options).load_method("forward")
    outs = method.execute([np.asarray(t) for t in inputs])
    return outs, [h for _, h in method._delegate_handles]


def float_inputs(example, rng: np.random.Generator, scale: float = 1.5) -> list[np.ndarray]:
    """Random float inputs shaped like the example ones (beyond the calibration range too)."""
    return [(rng.standard_normal(np.asarray(t).shape) * scale).astype(np.float32) for t in example]
