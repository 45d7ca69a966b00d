"""``CortexMPassManager``: the ordered passes that turn a quantized Edge program into
``cortex_m::`` calls (``transform``), and the graph clean-ups the quantizer runs before
annotating (``transform_for_annotation``)."""

from __future__ import annotations

import inspect
from typing import Any

from torch.export import ExportedProgram

from ....errors import InvalidArgumentError
from ....exir.pass_base import run_passes
from ....exir.passes.lift_constants import lift_constant_tensor_pass
from ...transforms.replace_scalar_with_tensor import ReplaceScalarWithTensorArgPass
from ..target_config import CortexM, CortexMTargetConfig
from .activation import ActivationFusionPass, QuantizedClampActivationPass
from .annotation import (
    ClampHardswishPass,
    DecomposeMeanPass,
    DeduplicateGetAttrPass,
    MatmulToBmmPass,
    ScalarsToAttributePass,
)
from .decompose_hardswish import DecomposeHardswishPass
from .lowering import AtenToCortexMPass
from .qparams import FoldAndAnnotateQParamsPass
from .remove_getitem import RemoveGetItemPass
from .replace_quant_nodes_pass import ReplaceQuantNodesPass


class CortexMPassManager:
    pass_list: list[type] = [
        RemoveGetItemPass,  # before folding: qparams attach to max_pool2d, not its getitem
        FoldAndAnnotateQParamsPass,
        ReplaceScalarWithTensorArgPass,
        ReplaceQuantNodesPass,
        ActivationFusionPass,
        QuantizedClampActivationPass,
        DecomposeHardswishPass,
        AtenToCortexMPass,
    ]
    pass_list_transform_for_annotation: list[type] = [
        ScalarsToAttributePass,
        ReplaceScalarWithTensorArgPass,
        ClampHardswishPass,
        DecomposeMeanPass,
        MatmulToBmmPass,
        DeduplicateGetAttrPass,
    ]

    def __init__(self, exported_program: ExportedProgram | None,
                 passes: list[type] | None = None,
                 target_config: CortexMTargetConfig | None = None,
                 use_explicit_layout: bool = False) -> None:
        if use_explicit_layout:
            raise InvalidArgumentError(
                "the explicit-layout Cortex-M pipeline (ExecuTorch's experimental "
                "--cortex-m-explicit-layout) is not implemented in edgetorch; use the default "
                "channels-last flow")
        self.exported_program = exported_program
        self.passes = list(passes if passes is not None else self.pass_list)
        self.target_config = target_config or CortexMTargetConfig(cpu=CortexM.M55)

    def transform_for_annotation(self, model: Any) -> Any:
        for p in self.pass_list_transform_for_annotation:
            model = p().call(model).graph_module
        return model

    def transform(self) -> ExportedProgram:
        ep = self.exported_program
        if not isinstance(ep, ExportedProgram):
            raise InvalidArgumentError(f"{type(self).__name__}.transform() needs an "
                                       f"ExportedProgram, got {ep!r}")
        for cls in self.passes:
            if not isinstance(cls, type):
                raise InvalidArgumentError(f"{type(self).__name__} expects pass classes, not "
                                           f"instances; got {cls!r}")
            params = inspect.signature(cls).parameters
            kwargs: dict[str, Any] = {}
            if "exported_program" in params:
                kwargs["exported_program"] = ep
            if "target_config" in params:
                kwargs["target_config"] = self.target_config
            run_passes(ep, [cls(**kwargs)])
        # the passes may have added constants (LUTs, clamp bounds): lift them as buffers
        return lift_constant_tensor_pass(ep)
