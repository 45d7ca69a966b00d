"""ExecuTorch's side of the LLM compatibility tests; runs ONLY in the reference venv.

    ref_llm.py export VARIANT OUT.pte          ExecuTorch's .pte of llm_models.build(VARIANT)
                                               lowered to XNNPACK (+ OUT.expected.npz: eager
                                               outputs of llm_models.steps())
    ref_llm.py run PTE STEPS.npz OUT.npz       run (tokens, input_pos) pairs in order through
                                               ExecuTorch's runtime; OUT.json gets every
                                               constant (metadata) method's values
    ref_llm.py greedy PTE IDS N OUT.json       greedy continuation: prefill IDS (comma list)
                                               in one call, then N-1 single-token steps
    ref_llm.py export_llama CKPT PARAMS OUT.pte [--qmode Q --group-size G]
                                               ExecuTorch's own export_llama (model_class
                                               smollm2, KV cache + sdpa_with_kv_cache custom
                                               ops, dynamic shape, XNNPACK, max_seq_length 128,
                                               max_context_length 512) of a Meta checkpoint

Every command imports ``executorch.extension.llm.custom_ops.custom_ops`` (the ``llama::``
kernels) and ``executorch.kernels.quantized`` first, as ExecuTorch requires.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import executorch.extension.llm.custom_ops.custom_ops  # noqa: E402, F401
import executorch.kernels.quantized  # noqa: E402, F401
import llm_models  # noqa: E402


def _load(path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[n] for n in sorted(data.files, key=lambda n: int(n[4:]))]


def _method(pte: str, name: str = "forward"):
    from executorch.runtime import Runtime

    return Runtime.get().load_program(Path(pte)).load_method(name)


def cmd_export(args) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    model = llm_models.build(args.variant)
    ep = llm_models.export(model)
    edge = to_edge_transform_and_lower(
        ep, partitioner=[XnnpackPartitioner()],
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
        constant_methods={"get_max_seq_len": llm_models.MAX_SEQ})
    Path(args.out).write_bytes(edge.to_executorch().buffer)
    eager = llm_models.build(args.variant)
    with torch.no_grad():
        expected = [eager(t, p).numpy() for t, p in llm_models.steps()]
    np.savez(Path(args.out).with_suffix(".expected.npz"), *expected)


def cmd_run(args) -> None:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(Path(args.pte))
    method = program.load_method("forward")
    arrays = _load(args.steps)
    outs = []
    for tokens, pos in zip(arrays[0::2], arrays[1::2]):
        outs.append(method.execute([torch.from_numpy(tokens), torch.from_numpy(pos)])[0].numpy())
    np.savez(args.out, *outs)
    meta = {}
    for name in program.method_names:
        if name != "forward":
            values = program.load_method(name).execute([])
            meta[name] = [v.item() if hasattr(v, "item") else v for v in values]
    Path(args.out).with_suffix(".json").write_text(json.dumps(meta))


def cmd_greedy(args) -> None:
    method = _method(args.pte)
    ids = [int(x) for x in args.ids.split(",")]
    logits = method.execute([torch.tensor([ids]), torch.tensor([0])])[0]
    out = [int(logits.argmax())]
    pos = len(ids)
    while len(out) < args.n:
        logits = method.execute([torch.tensor([[out[-1]]]), torch.tensor([pos])])[0]
        out.append(int(logits.argmax()))
        pos += 1
    Path(args.out).write_text(json.dumps(out))


def cmd_export_llama(args) -> None:
    from executorch.examples.models.llama.export_llama_lib import export_llama
    from executorch.extension.llm.export.config.llm_config import LlmConfig, ModelType

    c = LlmConfig()
    c.base.model_class = ModelType.smollm2  # an enum: a str fails inside export_llama
    c.base.checkpoint, c.base.params = args.checkpoint, args.params
    c.base.metadata = '{"get_bos_id": 1, "get_eos_ids": [2]}'
    c.model.use_kv_cache = c.model.use_sdpa_with_kv_cache = True
    c.model.enable_dynamic_shape = True
    c.export.max_seq_length, c.export.max_context_length = 128, 512
    c.export.output_name = str(Path(args.out).resolve())  # ends in .pte: used as given
    c.backend.xnnpack.enabled = True
    if args.qmode:
        c.quantization.qmode, c.quantization.group_size = args.qmode, args.group_size
    export_llama(c)


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("variant")
    e.add_argument("out")
    r = sub.add_parser("run")
    r.add_argument("pte")
    r.add_argument("steps")
    r.add_argument("out")
    g = sub.add_parser("greedy")
    g.add_argument("pte")
    g.add_argument("ids")
    g.add_argument("n", type=int)
    g.add_argument("out")
    x = sub.add_parser("export_llama")
    x.add_argument("checkpoint")
    x.add_argument("params")
    x.add_argument("out")
    x.add_argument("--qmode")
    x.add_argument("--group-size", type=int, default=32)
    args = p.parse_args()
    {"export": cmd_export, "run": cmd_run, "greedy": cmd_greedy,
     "export_llama": cmd_export_llama}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
