"""``CortexMQuantizer``: PT2E annotation for CMSIS-NN's int8 kernels.

Three annotators run in order, as in ExecuTorch: convolutions with the per-channel config,
then every other supported op chain with the per-tensor config, then ops that only move
values (views, clamps, cat, ...) sharing their neighbours' qparams. An op chain (``conv ->
relu``, ``add -> clamp``) is annotated as one unit: the longest pattern of ``PATTERNS``
that starts at a node and runs down single-user edges, if it passes its checks.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    ComposableQuantizer,
    QuantizationAnnotation,
    Quantizer,
    SharedQuantizationSpec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from ...arm.quantizer.arm_quantizer_utils import (
    SharedQspecQuantizer,
    has_float_output,
    mark_quantized,
)
from ..passes.qparams import QUANTIZED_KEY
from ..quantizer_reporter import (
    QuantizerInfo,
    QuantizerReport,
    QuantizerReporter,
    QuantizerReporterUser,
)
from . import pattern_checkers
from .pattern_checkers import CONV_TARGETS, PATTERNS
from .pattern_matcher import PatternMatcher
from .quantization_configs import INT8_PER_CHANNEL_CONFIG, INT8_PER_TENSOR_CONFIG

PARAMETER_TARGETS = {torch.ops.aten.linear.default, torch.ops.aten.convolution.default,
                     torch.ops.aten.conv1d.default, torch.ops.aten.conv1d.padding,
                     torch.ops.aten.conv2d.default, torch.ops.aten.conv2d.padding,
                     torch.ops.aten.conv3d.default, torch.ops.aten.conv3d.padding,
                     torch.ops.aten.conv_transpose2d.input}
UNOBSERVED = {torch.ops.aten.batch_norm.default: (1, 2, 3, 4)}
PATTERNS_PATH = pattern_checkers.__name__


def mark_node_as_annotated(node: Node, input_qspec_map: dict, output_qspec,
                           is_quantized: bool) -> None:
    """Annotate ``node`` with its input and output specs, and record whether the Cortex-M
    passes treat it as quantized (a ``None`` config keeps a matched node float)."""
    mark_quantized(node, input_qspec_map, output_qspec, is_quantized)


class PatternQuantizer(Quantizer, QuantizerReporterUser):
    def __init__(self, config, targets: set | None = None) -> None:
        Quantizer.__init__(self)
        QuantizerReporterUser.__init__(self)
        self.config = config
        self.targets = targets

    def get_quantizer_info(self) -> QuantizerInfo:
        nodes = "all nodes" if self.targets is None else \
            f"nodes targeting {', '.join(sorted(str(t) for t in self.targets))}"
        label = getattr(self.config, "label", None) or type(self.config).__name__
        return QuantizerInfo(type(self).__name__, nodes, label,
                             f"{PATTERNS_PATH}.PATTERNS")

    @staticmethod
    def _role(node: Node, index: int) -> bool:
        """Whether ``node`` is argument ``index`` of every user, all parameter-taking ops."""
        return node.op == "get_attr" and all(
            u.target in PARAMETER_TARGETS and len(u.args) > index and u.args[index] is node
            for u in node.users)

    def annotate_match(self, match: list[Node]) -> None:
        cfg = self.config
        for node in match:
            inputs: dict[Node, object] = {}
            for x in node.all_input_nodes:
                if not has_float_output(x) or any(
                        i < len(node.args) and node.args[i] is x
                        for i in UNOBSERVED.get(node.target, ())):
                    continue
                if self._role(x, 1):
                    inputs[x] = cfg.get_weight_qspec(node) if cfg else None
                elif self._role(x, 2):
                    inputs[x] = cfg.get_bias_qspec(node) if cfg else None
                elif x not in match:
                    inputs[x] = cfg.get_input_act_qspec(node, x) if cfg else None
            output = None
            if all(u not in match for u in node.users) and has_float_output(node):
                output = cfg.get_output_act_qspec(node) if cfg else None
            mark_node_as_annotated(node, inputs, output, is_quantized=cfg is not None)

    def annotate(self, model: GraphModule) -> GraphModule:
        nodes = (n for n in model.graph.nodes if self.targets is None or n.target in self.targets)
        for result in PatternMatcher(PATTERNS).find_pattern_matches(nodes, self.config):
            if result.accepted:
                self.annotate_match(result.pattern)
                self.report_accept(result.pattern)
            else:
                self.report_reject(result.pattern, result.message or "rejected")
        return model

    def validate(self, model: GraphModule) -> None:
        return None


class CortexMQuantizer(ComposableQuantizer):
    def __init__(self, per_tensor_config=None, use_explicit_layout: bool = False) -> None:
        if use_explicit_layout:
            from ....errors import InvalidArgumentError

            raise InvalidArgumentError("the explicit-layout Cortex-M quantizer is not "
                                       "implemented in edgetorch")
        super().__init__([
            PatternQuantizer(INT8_PER_CHANNEL_CONFIG, CONV_TARGETS),
            PatternQuantizer(per_tensor_config or INT8_PER_TENSOR_CONFIG),
            SharedQspecQuantizer(),
        ])

    def annotate(self, model: GraphModule) -> GraphModule:
        for q in self.quantizers:
            if isinstance(q, QuantizerReporterUser):
                q.quantizer_report = QuantizerReport()
        model = super().annotate(model)
        QuantizerReporter(self.quantizers).log_quantizer_report(model)
        return model

    def validate(self, model: GraphModule) -> None:
        return None

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        from ..passes.cortex_m_pass_manager import CortexMPassManager

        return CortexMPassManager(None).transform_for_annotation(model)


__all__ = ["CortexMQuantizer", "PatternQuantizer", "Q_ANNOTATION_KEY", "QUANTIZED_KEY",
           "QuantizationAnnotation", "SharedQuantizationSpec"]
