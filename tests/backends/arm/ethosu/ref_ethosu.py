"""Reference artifacts from the real ExecuTorch 1.5.1 Ethos-U flow; runs ONLY in .venv-ref-arm.

    .venv-ref-arm/bin/python ref_ethosu.py MODEL TARGET OUTDIR [--external weight_data=TAG]
    .venv-ref-arm/bin/python ref_ethosu.py --check PTE [--data PTD]   # JSON on stdout

Writes ``OUTDIR/model.pte`` (inline delegate, as aot_arm_compiler), ``OUTDIR/inter/`` (the
intermediates: .tosa per partition, Vela's files), ``OUTDIR/inputs.npz`` (example inputs) and
``OUTDIR/qeager.npz`` (the quantized eager model's outputs on them).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ethosu_models import MODELS  # noqa: E402


def check(pte: str, data: str | None) -> None:
    """Load ``pte`` with ExecuTorch's runtime and deserializer; print what it sees as JSON."""
    import json

    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.runtime import Runtime

    raw = Path(pte).read_bytes()
    rt = Runtime.get()
    program = rt.load_program(raw) if data is None else rt.load_program(pte, data_path=data)
    methods = sorted(program.method_names)
    meta = program.metadata("forward")
    prog = deserialize_pte_binary(raw).program
    delegates = [{"id": d.id, "compile_specs": [[c.key, c.value.decode()] for c in d.compile_specs]}
                 for plan in prog.execution_plan for d in plan.delegates]
    print(json.dumps({"methods": methods, "num_inputs": meta.num_inputs(),
                      "num_outputs": meta.num_outputs(), "delegates": delegates}))


def main() -> None:
    if sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--data" else None)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("target")
    ap.add_argument("outdir")
    ap.add_argument("--external", default=None, help="block=tag, e.g. weight_data=npu_weights")
    ap.add_argument("--segments", action="store_true", help="extract delegate segments")
    args = ap.parse_args()

    from executorch.backends.arm.ethosu import (
        EthosUCompileSpec,
        EthosUPartitioner,
        VelaExternalBlockPlacements,
    )
    from executorch.backends.arm.quantizer import (
        EthosUQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    out = Path(args.outdir)
    inter = out / "inter"
    inter.mkdir(parents=True, exist_ok=True)
    model, inputs = MODELS[args.model]()
    placements = None
    if args.external:
        block, tag = args.external.split("=")
        placements = VelaExternalBlockPlacements(**{block: tag})
    cs = EthosUCompileSpec(args.target, external_block_placements=placements)
    cs.dump_intermediate_artifacts_to(str(inter) + "/")
    q = EthosUQuantizer(cs)
    q.set_global(get_symmetric_quantization_config())
    gm = torch.export.export(model, inputs).module(check_guards=False)
    prepared = prepare_pt2e(gm, q)
    prepared(*inputs)
    qm = convert_pt2e(prepared)
    with torch.no_grad():
        qout = qm(*inputs)
    qout = qout if isinstance(qout, tuple) else (qout,)
    edge = to_edge_transform_and_lower(
        torch.export.export(qm, inputs), partitioner=[EthosUPartitioner(cs)])
    et = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=args.segments))
    (out / "model.pte").write_bytes(et.buffer)
    if args.external:
        et.write_tensor_data_to_file(str(out))
    np.savez(out / "inputs.npz", *[t.numpy() for t in inputs])
    np.savez(out / "qeager.npz", *[t.detach().numpy() for t in qout])
    print("wrote", sorted(os.listdir(out)), sorted(os.listdir(inter)))


if __name__ == "__main__":
    main()
