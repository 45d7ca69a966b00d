"""``TOSAQuantizer`` and ``EthosUQuantizer``: PT2E quantizers for the Arm backends.

    cs = EthosUCompileSpec("ethos-u55-128")          # or TosaCompileSpec("TOSA-1.0+INT")
    quantizer = EthosUQuantizer(cs).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, x).module(), quantizer)

Precedence as in ExecuTorch: module-name configs, then module-type configs, then the global
one (each skips nodes a more specific config already covered), then ``set_io``. A ``None``
config keeps that part float.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import QuantizationConfig, Quantizer

from ..common.arm_compile_spec import ArmCompileSpec
from .annotator import annotate_graph, annotate_io
from .arm_quantizer_utils import module_name_filter, module_type_filter
from .quantization_config import (
    get_symmetric_a8w4_quantization_config,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)

__all__ = ["EthosUQuantizer", "TOSAQuantizer", "VgfQuantizer",
           "get_symmetric_a8w4_quantization_config", "get_symmetric_a16w8_quantization_config",
           "get_symmetric_quantization_config"]


class TOSAQuantizer(Quantizer):
    """Quantizer for ``TOSABackend`` (and the base of ``EthosUQuantizer``)."""

    def __init__(self, compile_spec_or_tosa_spec: Any, use_composable_quantizer: bool = True):
        super().__init__()
        if isinstance(compile_spec_or_tosa_spec, ArmCompileSpec):
            self.compile_spec: ArmCompileSpec | None = compile_spec_or_tosa_spec
            self.tosa_spec = compile_spec_or_tosa_spec.tosa_spec
        else:
            self.compile_spec = None
            self.tosa_spec = compile_spec_or_tosa_spec
        self.global_config: QuantizationConfig | None = None
        self.io_config: QuantizationConfig | None = None
        self.module_type_config: dict[type, QuantizationConfig | None] = {}
        self.module_name_config: dict[str, QuantizationConfig | None] = {}

    def set_global(self, quantization_config: QuantizationConfig | None) -> TOSAQuantizer:
        self.global_config = quantization_config
        return self

    def set_module_type(self, module_type: type,
                        quantization_config: QuantizationConfig | None) -> TOSAQuantizer:
        self.module_type_config[module_type] = quantization_config
        return self

    def set_module_name(self, module_name: str,
                        quantization_config: QuantizationConfig | None) -> TOSAQuantizer:
        self.module_name_config[module_name] = quantization_config
        return self

    def set_io(self, quantization_config: QuantizationConfig | None) -> TOSAQuantizer:
        self.io_config = quantization_config
        return self

    def _quantize_with_submodules(self, model: GraphModule, calibration_samples: list[tuple],
                                  is_qat: bool = False, fold_quantize: bool = True
                                  ) -> GraphModule:
        """PT2E quantization with this quantizer: prepare (QAT or not), run every calibration
        sample, convert. ExecuTorch's tester quantizes through this. torchao's prepare and
        convert already reach a ``while_loop``'s body; ``cond`` branches would need their own
        calibration paths, which this quantizer does not prepare, so they are refused."""
        from torchao.quantization.pt2e.quantize_pt2e import (
            convert_pt2e,
            prepare_pt2e,
            prepare_qat_pt2e,
        )

        from ....errors import UnsupportedOperatorError

        for node in model.graph.nodes:
            if node.op == "call_function" and getattr(node.target, "__name__", "") == "cond":
                raise UnsupportedOperatorError(
                    f"{node.name}: quantizing the branches of torch.cond is not supported")
        prepared = (prepare_qat_pt2e if is_qat else prepare_pt2e)(model, self)
        for sample in calibration_samples:
            prepared(*sample)
        return convert_pt2e(prepared, fold_quantize=fold_quantize)

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        # imported here: the pass manager reads this package's annotator modules
        from .._passes.arm_pass_manager import ArmPassManager

        return ArmPassManager(self.compile_spec).transform_for_annotation_pipeline(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        covered: list[Callable[[Node], bool]] = []
        scoped = [(module_name_filter(n), c) for n, c in self.module_name_config.items()]
        scoped += [(module_type_filter(t), c) for t, c in self.module_type_config.items()]
        for accepts, cfg in scoped:
            prior = list(covered)
            annotate_graph(model, cfg,
                           lambda n, a=accepts, p=prior: a(n) and not any(f(n) for f in p))
            covered.append(accepts)
        annotate_graph(model, self.global_config, lambda n: not any(f(n) for f in covered))
        if self.io_config is not None:
            annotate_io(model, self.io_config)
        return model

    def validate(self, model: GraphModule) -> None:
        return None


class EthosUQuantizer(TOSAQuantizer):
    """Quantizer for ``EthosUBackend``: ``EthosUQuantizer(EthosUCompileSpec(...))``."""


class VgfQuantizer(TOSAQuantizer):
    """Quantizer for ``VgfBackend``: ``VgfQuantizer(VgfCompileSpec(...))``. ExecuTorch's VGF
    config differs from the TOSA one only for the grid-sampler custom lowering, which edgetorch
    does not implement, so the annotation is the TOSA quantizer's."""
