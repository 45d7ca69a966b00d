"""Reference artifacts from ExecuTorch 1.5.1's Cortex-M flow; runs ONLY in .venv-ref-arm.

    .venv-ref-arm/bin/python ref_cortex_m.py MODEL TARGET OUTDIR

Runs ``aot_arm_compiler``'s own Cortex-M path (``_to_edge_cortex_m``: channels-last inputs,
``CortexMQuantizer``, ``CortexMPassManager``) on ``cortex_m_models.MODELS[MODEL]`` and writes
``OUTDIR/model.pte`` (as ``aot_arm_compiler --target=TARGET --quantize``), ``OUTDIR/inputs.npz``
(the example inputs), ``OUTDIR/edge.npz`` (the outputs of the final edge program, i.e. of
ExecuTorch's Python reference implementations of the ``cortex_m::`` operators) and, node by
node, what that program computed: ``OUTDIR/nodes.json`` (each call's target, its arguments with
nodes as ``{"ref": name}``, and each tensor's dim order) and ``OUTDIR/values.npz`` (every
tensor, logical layout).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cortex_m_models import MODELS  # noqa: E402


def _encode(arg):
    if isinstance(arg, torch.fx.Node):
        return {"ref": arg.name}
    if isinstance(arg, torch.dtype):
        return {"dtype": str(arg).replace("torch.", "")}
    if isinstance(arg, (list, tuple)):
        return [_encode(a) for a in arg]
    if arg is None or isinstance(arg, (bool, int, float, str)):
        return arg
    return {"unsupported": repr(arg)}


def dump_nodes(ep, inputs, out: Path) -> None:
    """Run ``ep``'s graph node by node (the reference ops) and save every value."""
    sig = ep.graph_signature
    feeds, user = [], iter(inputs)
    for spec in sig.input_specs:
        if spec.kind.name == "USER_INPUT":
            feeds.append(next(user))
        elif spec.target in ep.state_dict:
            feeds.append(ep.state_dict[spec.target])
        else:
            feeds.append(ep.constants[spec.target])
    values, layouts = {}, {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            if isinstance(result, torch.Tensor):
                values[n.name] = result.detach().contiguous().numpy()
                layouts[n.name] = [int(d) for d in result.dim_order()]
            return result

    with torch.no_grad():
        Recorder(ep.graph_module).run(*feeds)
    nodes = [{"name": n.name, "target": str(n.target), "args": _encode(list(n.args)),
              "kwargs": {k: _encode(v) for k, v in n.kwargs.items()}}
             for n in ep.graph.nodes if n.op == "call_function"]
    (out / "nodes.json").write_text(json.dumps({"nodes": nodes, "layouts": layouts}))
    np.savez(out / "values.npz", **values)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("target")
    ap.add_argument("outdir")
    args = ap.parse_args()

    import executorch.backends.arm.scripts.aot_arm_compiler as aot
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig
    from executorch.exir import ExecutorchBackendConfig

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    model, inputs = MODELS[args.model]()
    model.requires_grad_(False)
    exported = torch.export.export(model, inputs, strict=True)
    flags = argparse.Namespace(cortex_m_explicit_layout=False, quantize=True, strict_export=True)
    _, edge, inputs_cl = aot._to_edge_cortex_m(
        exported, flags, exported.module(), inputs, None,
        CortexMTargetConfig.from_target_string(args.target))
    with torch.no_grad():  # before to_executorch, which turns the ops into .out variants
        result = edge.exported_program().module()(*inputs_cl)
    dump_nodes(edge.exported_program(), inputs_cl, out)
    program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    (out / "model.pte").write_bytes(program.buffer)
    import flatbuffers  # the serializer's layout depends on its release

    (out / "env.json").write_text(json.dumps({"flatbuffers": flatbuffers.__version__}))
    result = result if isinstance(result, (tuple, list)) else (result,)
    np.savez(out / "inputs.npz", *[t.numpy() for t in inputs])
    np.savez(out / "edge.npz", *[t.contiguous().numpy() for t in result])
    print("wrote", out)


if __name__ == "__main__":
    main()
