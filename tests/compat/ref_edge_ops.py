"""Runs under the reference interpreter (ExecuTorch 1.5.1): facts about its Edge dialect.

    python ref_edge_ops.py allowed-types OUT.json OP [OP ...]
        OP is ``ns::name.overload`` (``aten::add.Tensor``); writes, per op, each tensor
        argument's and result's ``allowed_types`` as sorted dtype names.
    python ref_edge_ops.py passes SOURCE.py OUT.json
        executes SOURCE (pass definitions written against ``executorch``), then for each
        ``CASES`` entry exports the model, runs ``to_edge(...).transform(passes)``, and writes
        the Edge graph's call targets and ExecuTorch's runtime outputs for the inputs.
"""

from __future__ import annotations

import json
import sys


def _op(name: str):
    from executorch.exir.dialects._ops import ops as exir_ops

    ns, rest = name.split("::")
    op, _, overload = rest.partition(".")
    return getattr(getattr(getattr(exir_ops.edge, ns), op), overload or "default")


def allowed_types(out: str, names: list[str]) -> None:
    result = {}
    for name in names:
        schema = _op(name)._schema
        entry = {}
        for i, a in enumerate(list(schema.arguments) + list(schema.returns)):
            if hasattr(a, "allowed_types"):
                key = a.name if i < len(schema.arguments) else f"__ret_{i - len(schema.arguments)}"
                entry[key] = sorted(str(d) for d in a.allowed_types)
        result[name] = entry
    with open(out, "w") as f:
        json.dump(result, f)


def passes(source: str, out: str) -> None:
    import torch
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    scope: dict = {"__name__": "ref_passes"}
    exec(compile(open(source).read(), source, "exec"), scope)
    result = {}
    for name, (model, inputs, make_passes) in scope["CASES"].items():
        edge = to_edge(torch.export.export(model, inputs)).transform(make_passes())
        gm = edge.exported_program().graph_module
        targets = [str(n.target.__name__) for n in gm.graph.nodes if n.op == "call_function"]
        program = Runtime.get().load_program(edge.to_executorch().buffer)
        outputs = program.load_method("forward").execute(list(inputs))
        result[name] = {"targets": targets, "outputs": [o.tolist() for o in outputs]}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "allowed-types":
        allowed_types(args[0], args[1:])
    elif command == "passes":
        passes(*args)
    else:
        raise SystemExit(f"unknown command {command}")
