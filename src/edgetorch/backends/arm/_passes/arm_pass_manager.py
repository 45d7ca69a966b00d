"""``ArmPassManager``: the graph rewrites the Arm flow runs before quantization annotation.

ExecuTorch's manager also holds the pipeline that rewrites an Edge program for TOSA; edgetorch
lowers an Edge partition to TOSA in one walk instead (``tosa/lowering.py``), so only the
annotation pipeline lives here: the rewrites ``TOSAQuantizer.transform_for_annotation`` runs,
in order, on a graph module (``ArmTester``'s ``run_transform_for_annotation_pipeline`` calls it
to compare the rewritten graph with eager).
"""

from __future__ import annotations

from torch.fx import GraphModule

from ..common.arm_compile_spec import ArmCompileSpec
from ..quantizer.annotator import (
    adaptive_pool_as_avg_pool,
    drop_guard_calls,
    get_attrs_before_use,
    relu6_as_hardtanh,
    scalars_to_attributes,
)
from ..quantizer.decompositions import decompose_for_annotation


class ArmPassManager:
    def __init__(self, compile_spec: ArmCompileSpec | None = None) -> None:
        self.compile_spec = compile_spec

    def transform_for_annotation_pipeline(self, graph_module: GraphModule) -> GraphModule:
        """Rewrite ``graph_module`` in place into what the Arm quantizer annotates; returns it."""
        # As in ExecuTorch, asking for the pipeline config here is what makes the U55/U65
        # ``transform_pipeline_config`` appear in the compile spec.
        if self.compile_spec is not None:
            self.compile_spec._get_pass_pipeline_config()
        drop_guard_calls(graph_module)
        relu6_as_hardtanh(graph_module)
        adaptive_pool_as_avg_pool(graph_module)
        decompose_for_annotation(graph_module, scalars_to_attributes)
        get_attrs_before_use(graph_module)
        return graph_module
