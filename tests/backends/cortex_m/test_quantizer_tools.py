"""The Cortex-M quantizer's tools at ExecuTorch's paths: node finders, the pattern matcher and
its report, CMSIS-NN's resolution, and the Arm helpers the test harness reads."""

from __future__ import annotations

import importlib
import logging
import sys

import pytest
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from edgetorch.backends.arm.quantizer.arm_quantizer_utils import PatternCheck
from edgetorch.backends.cortex_m.quantizer import CortexMQuantizer, node_finders
from edgetorch.backends.cortex_m.quantizer.pattern_matcher import PatternMatcher
from edgetorch.backends.cortex_m.quantizer_reporter import logger as report_logger
from edgetorch.errors import DependencyMissingError, InvalidArgumentError

aten = torch.ops.aten


class AddRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x) + x)


def _graph():
    return torch.export.export(AddRelu(), (torch.ones(2, 4),)).graph_module


def test_node_finders_select_by_target_name_and_module():
    gm = _graph()
    assert [n.name for n in node_finders.NodeTargetNodeFinder(aten.add.Tensor).find_nodes(gm)] \
        == ["add"]
    assert [n.name for n in node_finders.NodeNameNodeFinder(["relu", "x"]).find_nodes(gm)] \
        == ["x", "relu"]
    assert [n.target for n in node_finders.ModuleTypeNodeFinder(torch.nn.Linear).find_nodes(gm)] \
        == [aten.linear.default]
    assert [n.op for n in node_finders.OutputNodeFinder().find_nodes(gm)] == ["output"]
    assert str(node_finders.NodeTargetNodeFinder(aten.relu.default)) == \
        "NodeTargetNodeFinder targeting node targets: aten::relu"


class _Reject(PatternCheck):
    @classmethod
    def check_pattern(cls, pattern):
        return False


def test_pattern_matcher_falls_back_to_a_shorter_pattern_and_reports_both():
    gm = _graph()
    matcher = PatternMatcher({(aten.add.Tensor, aten.relu.default): _Reject,
                              (aten.add.Tensor,): None})
    nodes = node_finders.NodeTargetNodeFinder([aten.add.Tensor, aten.relu.default])
    results = list(matcher.find_pattern_matches(nodes.find_nodes(gm), object()))
    assert [([n.name for n in r.pattern], r.accepted) for r in results] == \
        [(["add", "relu"], False), (["add"], True)]
    assert results[0].message == PatternMatcher.REJECT_UNSUPPORTED_PATTERN


def test_quantizer_logs_its_report_at_debug(caplog):
    model = torch.export.export(AddRelu(), (torch.randn(2, 4),)).module()
    with caplog.at_level(logging.DEBUG, logger=report_logger.name):
        prepare_pt2e(model, CortexMQuantizer())
    text = caplog.text
    assert "QUANTIZATION REPORT" in text
    assert "Accepted nodes:" in text and "╒   add" in text and "╘   relu" in text


def test_full_like_clamp_bounds_become_integer_clamp():
    """A clamp whose bounds are ``full_like`` tensors is an integer ``clamp.default`` with the
    bounds quantized, as in ExecuTorch; the numbers stay eager's within one step."""
    from edgetorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
    from edgetorch.backends.cortex_m.passes import CortexMPassManager
    from edgetorch.exir import to_edge

    class Clamp(torch.nn.Module):
        def forward(self, x):
            return torch.clamp(x, torch.full_like(x, -1.0), torch.full_like(x, 1.0))

    x = torch.linspace(-2, 2, 40).reshape(2, 20)
    prepared = prepare_pt2e(torch.export.export(Clamp(), (x,)).module(), CortexMQuantizer())
    prepared(x)
    ep = torch.export.export(convert_pt2e(prepared), (x,))
    edge = to_edge(ep, compile_config=cortex_m_edge_compile_config())
    out = CortexMPassManager(edge.exported_program()).transform()
    clamps = [n for n in out.graph.nodes if n.op == "call_function" and "clamp" in str(n.target)]
    assert len(clamps) == 1 and "clamp.default" in str(clamps[0].target)
    lo, hi = clamps[0].args[1:3]
    assert isinstance(lo, int) and isinstance(hi, int) and lo < hi
    got = out.module()(x)
    torch.testing.assert_close(got, torch.clamp(x, -1.0, 1.0), atol=0.05, rtol=0)


def test_cmsis_nn_resolves_the_bundled_module_then_raises_without_any(monkeypatch):
    cmsis_nn = importlib.import_module("edgetorch.backends.cortex_m.library.cmsis_nn")
    assert cmsis_nn.resolve_backend(cmsis_nn.CortexM.M55) is cmsis_nn.Backend.MVE
    assert cmsis_nn.convolve_wrapper_buffer_size(
        cmsis_nn.Backend.MVE, cmsis_nn.DataType.A8W8, input_nhwc=[1, 8, 8, 16],
        filter_nhwc=[8, 3, 3, 16], output_nhwc=[1, 6, 6, 8], padding_hw=[0, 0],
        stride_hw=[1, 1], dilation_hw=[1, 1]) == 4 * ((16 * 9 + 15) // 16) * 16
    # neither module importable: None in sys.modules (and the bundled one not already an
    # attribute of its package, which ``from ... import`` would take first)
    monkeypatch.delattr(importlib.import_module(cmsis_nn.BUNDLED_MODULE.rpartition(".")[0]),
                        "cmsis_nn")
    monkeypatch.setitem(sys.modules, cmsis_nn.BUNDLED_MODULE, None)
    monkeypatch.setitem(sys.modules, cmsis_nn.EXTERNAL_MODULE, None)
    try:
        reloaded = importlib.reload(cmsis_nn)
        with pytest.raises(DependencyMissingError, match="dependencies are not installed"):
            reloaded.resolve_backend(reloaded.CortexM.M55)
    finally:
        monkeypatch.undo()
        importlib.reload(cmsis_nn)


def test_arm_helpers_describe_tensors_and_rebuild_compile_specs():
    pytest.importorskip("tosa_serializer")
    from edgetorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from edgetorch.backends.arm.tosa.mapping import extract_tensor_meta, map_dtype
    from edgetorch.backends.arm.util._factory import create_quantizer, parse_compile_spec

    gm = _graph()
    add = next(n for n in gm.graph.nodes if n.name == "add")
    dtype, shape = extract_tensor_meta(add.meta)
    assert dtype == map_dtype(torch.float32) and shape == (2, 4)
    with pytest.raises(InvalidArgumentError, match="TOSA has no tensor type"):
        map_dtype(torch.float64)
    spec = TosaCompileSpec("TOSA-1.0+INT")
    again = parse_compile_spec(spec._to_list())
    assert isinstance(again, TosaCompileSpec) and again == spec
    assert type(create_quantizer(spec)).__name__ == "TOSAQuantizer"


def test_dont_partition_checks_record_rejected_nodes():
    from edgetorch.exir.backend.operator_support import DontPartition, DontPartitionName

    gm = _graph()
    by_op, by_name = DontPartition(aten.add.Tensor), DontPartitionName("rel", exact=False)
    verdicts = {n.name: (by_op.is_node_supported({}, n), by_name.is_node_supported({}, n))
                for n in gm.graph.nodes if n.op == "call_function"}
    assert verdicts == {"linear": (True, True), "add": (False, True), "relu": (True, False)}
    assert [n.name for n in by_op.rejected_nodes()] == ["add"] and by_name.num_rejected() == 1


def test_replace_quant_nodes_refuses_aten_programs_with_the_pass_named():
    from edgetorch.backends.cortex_m.passes import ReplaceQuantNodesPass
    from edgetorch.errors import PassError
    from edgetorch.exir.program._program import _transform

    model = torch.export.export(AddRelu(), (torch.randn(2, 4),)).module()
    prepared = prepare_pt2e(model, CortexMQuantizer())
    prepared(torch.randn(2, 4))
    aten_program = torch.export.export(convert_pt2e(prepared), (torch.randn(2, 4),))
    with pytest.raises(PassError, match="An error occurred when running the "
                                        "'ReplaceQuantNodesPass' pass(?s:.*)after to_edge"):
        _transform(aten_program, ReplaceQuantNodesPass())
