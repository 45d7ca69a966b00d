"""The ahead-of-time half of the Vulkan backend: ``VulkanBackend.preprocess``.

``VulkanBackend`` is a ``BackendDetails`` (the class name is the backend id in the ``.pte``).
It runs ExecuTorch 1.5.1's Vulkan pass list on the delegated subgraph -- fusions that keep
the graph ATen-compliant, tensor specs, prepack nodes, the representation of every tensor,
symbolic shapes at their upper bounds, greedy memory planning without overlapping objects --
then builds the ``VkGraph`` and writes the blob (``VH00`` header + ``VK00`` flatbuffer), with
the weights in the program's named data. The runtime half is
``edgetorch.backends.vulkan.runtime`` (same id, no torch).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch.export import ExportedProgram
from torch.export._remove_auto_functionalized_pass import unsafe_remove_auto_functionalized_pass
from torch.fx.passes.infra.pass_base import PassBase

from ...exir.backend import BackendDetails, CompileSpec, PreprocessResult
from ...exir.backend.utils import DelegateMappingBuilder
from ...exir.memory_algorithms import MemoryPlanningAlgorithmSuite, greedy
from ...exir.pass_base import ExportPass, adopt_graph_module
from ...exir.passes import MemoryPlanningPass, SpecPropPass
from ...exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass
from ..transforms.addmm_mm_to_linear import AddmmToLinearTransform
from ..transforms.fuse_conv_with_clamp import FuseClampPass
from ..transforms.fuse_view_copy import FuseViewCopyTransform
from ..transforms.view_copy_to_squeeze_unsqueeze import ViewCopyToSqueezeUnsqueezePass
from ..xnnpack._passes.fuse_batch_norm import FuseBatchNormPass
from . import utils
from ._passes import (
    FoldQDQPass,
    FusePatternsPass,
    FuseQuantizedOpsTransform,
    InsertDtypePromotionPass,
    RemoveAssertsTransform,
    RemoveRedundantOpsTransform,
    SqueezeUnsqueezeInputs,
    TagMemoryMetaPass,
    insert_prepack_nodes,
)
from .serialization.vulkan_graph_builder import VkGraphBuilder
from .serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType
from .serialization.vulkan_graph_serialize import serialize_vulkan_graph

__all__ = ["VulkanBackend", "apply_passes", "parse_compile_spec"]

DEFAULT_DEBUG_HANDLE = 65535


def apply_passes(program: ExportedProgram, passes: list) -> ExportedProgram:
    """Run ``passes`` in order on ``program``: memory planning on its graph, graph passes
    (given the current program when they ask for it) adopted into it, program functions
    returning the new program."""
    for p in passes:
        if isinstance(p, MemoryPlanningPass):
            p.run(program.graph_module)
        elif isinstance(p, (ExportPass, PassBase, SpecPropPass)):
            if hasattr(p, "_exported_program"):
                p._exported_program = program
            if isinstance(p, SpecPropPass):
                _adopt(program, ExportPass()(program.graph_module))  # fresh metadata first
            _adopt(program, p(program.graph_module))
            if isinstance(p, SpecPropPass):
                p.update_placeholder_tensor_specs(program, program.graph_module)
        else:
            program = p(program)
    return program


def _adopt(program: ExportedProgram, result: Any) -> None:
    gm = getattr(result, "graph_module", result)
    if gm is not None and gm is not program.graph_module:
        adopt_graph_module(program, gm)
    program.graph_module.recompile()


def _external_max_bytes(value: bytes) -> int:
    # Compile specs can bypass the partitioner's option parsing: check the boundary here.
    if len(value) != 8:
        raise ValueError("external_constants_max_data_bytes must be encoded as uint64")
    n = int.from_bytes(value, "little")
    if n <= 0:
        raise ValueError("external_constants_max_data_bytes must be a positive uint64")
    return n


_BOOL_OPTIONS = ("skip_tag_memory_metadata", "downcast_64_bit", "force_fp16",
                 "small_texture_limits", "skip_memory_planning", "alias_buffer_mutations")


def parse_compile_spec(compile_specs: list[CompileSpec]) -> dict[str, Any]:
    """The options the compile specs carry; unknown keys are ignored."""
    options: dict[str, Any] = {}
    for spec in compile_specs:
        value = bytes(spec.value)
        if spec.key == "storage_type_override":
            options[spec.key] = VkStorageType(int.from_bytes(value, "little"))
        elif spec.key == "memory_layout_override":
            options[spec.key] = VkMemoryLayout(int.from_bytes(value, "little"))
        elif spec.key in ("texture_limits_x", "texture_limits_y", "texture_limits_z"):
            options[spec.key] = int.from_bytes(value, "little")
        elif spec.key in _BOOL_OPTIONS:
            options[spec.key] = bool.from_bytes(value, "little")
        elif spec.key == "external_constants_max_data_bytes":
            options[spec.key] = _external_max_bytes(value)
    return options


class VulkanBackend(BackendDetails):
    """Compiles Edge subgraphs to ExecuTorch's Vulkan delegate format."""

    @classmethod
    def preprocess(cls, program: ExportedProgram,
                   module_compile_spec: list[CompileSpec]) -> PreprocessResult:
        options = parse_compile_spec(module_compile_spec)
        # Mobile GPUs allow 16384 texels; small_texture_limits picks 2048 (most desktops).
        default = (utils.SMALL_TEXTURE_LIMITS if options.get("small_texture_limits", False)
                   else utils.DEFAULT_TEXTURE_LIMITS)
        texture_limits = tuple(options.get(f"texture_limits_{axis}", default[i])
                               for i, axis in enumerate("xyz"))
        force_fp16 = options.get("force_fp16", False)

        program = unsafe_remove_auto_functionalized_pass(program)
        # Fusions that keep every ATen op's schema (SpecPropPass runs the ops).
        program = apply_passes(program, [
            AddmmToLinearTransform(), FuseBatchNormPass(program), AddmmToLinearTransform(),
            InsertDtypePromotionPass(), FusePatternsPass(), FuseClampPass(),
            RemoveRedundantOpsTransform(), FuseQuantizedOpsTransform(), FoldQDQPass(),
            SqueezeUnsqueezeInputs(), FuseViewCopyTransform(), ViewCopyToSqueezeUnsqueezePass(),
        ])
        program = apply_passes(program, [SpecPropPass()])
        program = apply_passes(program, [RemoveAssertsTransform(), insert_prepack_nodes])
        if not options.get("skip_tag_memory_metadata", False):
            program = apply_passes(program, [TagMemoryMetaPass(
                texture_limits,
                default_storage_type=options.get("storage_type_override",
                                                 VkStorageType.TEXTURE_3D),
                default_memory_layout=options.get("memory_layout_override",
                                                  VkMemoryLayout.TENSOR_WIDTH_PACKED),
                force_fp16=force_fp16)])
        final: list = [ConstraintBasedSymShapeEvalPass()]
        if not options.get("skip_memory_planning", False):
            suite = MemoryPlanningAlgorithmSuite(
                algo_list=[partial(greedy, allow_overlapping_allocations=False)])
            final.append(MemoryPlanningPass(memory_planning_algo=suite))
        program = apply_passes(program, final)

        builder = VkGraphBuilder(program, DelegateMappingBuilder(generated_identifiers=True),
                                 downcast_64_bit=options.get("downcast_64_bit", True),
                                 force_fp16=force_fp16,
                                 alias_buffer_mutations=options.get("alias_buffer_mutations",
                                                                    False))
        graph = builder.build_graph()
        cap = options.get("external_constants_max_data_bytes")
        if cap is not None:  # only the constants the builder added are in pte_data
            builder.named_data_store.externalize_pte_data(cap, "vulkan_constants")
        return PreprocessResult(
            processed_bytes=serialize_vulkan_graph(graph, builder.const_tensors, []),
            debug_handle_map=builder.delegate_mapping_builder.get_delegate_mapping(),
            data_store_output=builder.named_data_store.get_named_data_store_output())

