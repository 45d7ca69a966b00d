"""``--evaluate``: run the freshly written program in edgetorch's runtime (Ethos-U delegates
simulated from their TOSA graphs, ``cortex_m::`` operators with CMSIS-NN's arithmetic),
compare it with the quantized eager model, print Vela's estimates (Ethos-U). ExecuTorch's
script needs an FVP for any of this."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....schema import program as S


def output_scales(program: S.Program, method: str = "forward") -> list[float]:
    """Scales of the CPU ``dequantize_per_tensor`` calls, in instruction order."""
    plan = next(p for p in program.execution_plan if p.name == method)
    scales = []
    for chain in plan.chains:
        for ins in chain.instructions:
            call = ins.instr_args
            if isinstance(call, S.KernelCall) and \
                    plan.operators[call.op_index].name.endswith("dequantize_per_tensor"):
                value = plan.values[call.args[1]].val
                scales.append(float(getattr(value, "double_val", float("nan"))))
    return scales


def compare(outputs: list[np.ndarray], expected: list[np.ndarray],
            scales: list[float]) -> list[dict[str, Any]]:
    """Per output: max/mean |difference| and, when its output scale is known, in steps."""
    rows = []
    offset = max(len(scales) - len(outputs), 0)  # the output DQs come last
    for k, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
        row = {"output": k, "shape": list(np.shape(got)), "max_abs": float(diff.max(initial=0)),
               "mean_abs": float(diff.mean()) if diff.size else 0.0}
        if offset + k < len(scales) and scales[offset + k] > 0:
            steps = np.round(diff / scales[offset + k])
            row.update(scale=scales[offset + k], max_steps=int(steps.max(initial=0)),
                       mean_steps=float(steps.mean()) if steps.size else 0.0,
                       steps_histogram={int(s): int(n) for s, n in
                                        zip(*np.unique(steps, return_counts=True), strict=True)})
        rows.append(row)
    return rows


def evaluate(result: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import torch

    from ....runtime import Runtime

    ethos_u = "ethos-u" in str(getattr(result.compile_spec, "target", ""))
    options = {}
    if ethos_u:
        from ..ethosu.backend import tosa_graphs

        options = {"EthosUBackend": {"tosa_graphs": tosa_graphs(result.edge)}}
    program = Runtime.get().load_program(result.program.buffer, backend_options=options)
    outputs = program.load_method("forward").execute(
        [t.detach().numpy() for t in result.example_inputs])
    reference = result.quantized_model if result.quantized_model is not None else result.model
    with torch.no_grad():
        want = reference(*result.example_inputs)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    rows = compare([np.asarray(o) for o in outputs], [w.numpy() for w in want],
                   output_scales(result.program.executorch_program))
    what = "quantized eager model" if result.quantized_model is not None else "eager model"
    print(f"Evaluation: {result.output} in edgetorch's runtime vs the {what}:")
    for r in rows:
        steps = (f", {r['max_steps']} quantization steps max ({r['mean_steps']:.2f} mean)"
                 if "max_steps" in r else "")
        print(f"  output {r['output']} {r['shape']}: max |diff| {r['max_abs']:.6g}, mean "
              f"{r['mean_abs']:.6g}{steps}")
    estimates = []
    if ethos_u:
        from ..ethosu.estimates import format_estimates, vela_estimates

        estimates = vela_estimates(result.edge)
    if estimates:
        print("Vela estimates:")
        print(format_estimates(estimates))
    return {"outputs": [np.asarray(o) for o in outputs], "comparison": rows}, estimates
