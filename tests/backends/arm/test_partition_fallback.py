"""The TOSA partitioner never takes what the lowering cannot do (issue 31).

The partitioner lowers each proposed partition for real before committing to it: a node the
lowering refuses stays on the CPU and is named in ``rejected_nodes_report()`` with the
lowering's reason, a kept-whole operator (``linear``) it leaves behind is decomposed for the
portable kernels, a partition that would pass a delegate input straight to an output is not
built (Vela refuses a TOSA output no operator writes), and the export always succeeds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from arm_env import require_tosa_tools

require_tosa_tools()

import arm_models  # noqa: E402
from arm_flow import output_scale, quantize  # noqa: E402

from edgetorch.backends.arm.tosa import lowering  # noqa: E402
from edgetorch.backends.arm.tosa.compile_spec import TosaCompileSpec  # noqa: E402
from edgetorch.backends.arm.tosa.partitioner import TOSAPartitioner  # noqa: E402
from edgetorch.errors import ExportError  # noqa: E402
from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

U55 = "TOSA-1.0+INT+int16+int4+u55"
aten = torch.ops.aten


def _lower(model, inputs, spec="TOSA-1.0+INT", partitioner_cls=TOSAPartitioner):
    cs = TosaCompileSpec(spec) if spec.startswith("TOSA") else spec
    converted = quantize(model, inputs, cs)
    part = partitioner_cls(cs)
    edge = to_edge_transform_and_lower(torch.export.export(converted, inputs), partitioner=[part])
    return converted, part, edge


def _run(edge, inputs):
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    method = Runtime.get().load_program(pte).load_method("forward")
    return [np.asarray(o) for o in method.execute([t.numpy() for t in inputs])]


def _ops(edge) -> set[str]:
    return {str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"}


def test_a_refused_node_stays_on_the_cpu_with_the_lowering_reason(monkeypatch):
    """The lowering refuses ``linear`` (a stand-in for any case it cannot do): the partitioner
    leaves it out, says why, and the kept-whole linear is decomposed for the CPU."""
    def refuse(self, node):
        raise ExportError(f"TOSA lowering: %{node.name} refused by this test")

    monkeypatch.setitem(lowering._HANDLERS, aten.linear.default, refuse)
    model, inputs = arm_models.gap_linear()
    converted, part, edge = _lower(model, inputs)
    (name,) = [n for n, (t, _) in part.rejected.items() if t == "aten.linear.default"]
    assert "refused by this test" in part.rejected[name][1]
    assert name in part.rejected_nodes_report()
    ops = _ops(edge)
    assert "executorch_call_delegate" in str(ops)      # the conv and the mean are delegated
    assert not any("linear" in op for op in ops)        # decomposed: ExecuTorch has no linear.out
    assert any("addmm" in op for op in ops)
    with torch.no_grad():
        expected = converted(*inputs).numpy()
    (out,) = _run(edge, inputs)
    assert np.abs(out - expected).max() <= 2 * output_scale(converted) + 1e-6


class _PassThrough(torch.nn.Module):
    """A conv and the input itself as outputs: the quantized input's clone would leave the
    delegate unchanged, an output with no writer (Vela refuses it)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return self.conv(x), x.clone()


def test_a_pass_through_output_is_not_delegated():
    torch.manual_seed(0)
    model, inputs = _PassThrough().eval(), (torch.randn(1, 3, 4, 4),)
    converted, part, edge = _lower(model, inputs)
    assert any("delegate input" in why for _, why in part.rejected.values()), \
        part.rejected_nodes_report()
    with torch.no_grad():
        expected = [t.numpy() for t in converted(*inputs)]
    for out, exp in zip(_run(edge, inputs), expected):
        assert np.abs(out - exp).max() <= 2 * output_scale(converted) + 1e-6


class _OnlyReshape(torch.nn.Module):
    def forward(self, x):
        return x.reshape(1, 48)


def test_a_partition_of_views_alone_is_not_delegated():
    """As in ExecuTorch: nothing would be left of it after lowering."""
    model, inputs = _OnlyReshape().eval(), (torch.randn(1, 3, 4, 4),)
    _, part, edge = _lower(model, inputs)
    assert "executorch_call_delegate" not in str(_ops(edge))
    assert any("only ops which are removed" in why for _, why in part.rejected.values())


@pytest.mark.parametrize("name", ["tiny_tfm", "tiny_vit"])
@pytest.mark.parametrize("spec", ["TOSA-1.0+INT", U55])
def test_small_transformers_export_and_run(name, spec):
    """The issue's reproduction: nn.MultiheadAttention/LayerNorm/GELU/softmax and a ViT-style
    model export on every spec, whatever part the lowering takes, and run within 2 steps of
    the fake-quantized eager model."""
    model, inputs = getattr(arm_models, name)()
    converted, part, edge = _lower(model, inputs, spec)
    assert part.rejected_nodes_report()
    with torch.no_grad():
        expected = converted(*inputs).numpy()
    (out,) = _run(edge, inputs)
    assert np.abs(out - expected).max() <= 2 * output_scale(converted) + 1e-6
