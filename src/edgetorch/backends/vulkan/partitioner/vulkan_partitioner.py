"""``VulkanPartitioner``: hand the Vulkan delegate every node it implements in a
representation that fits the GPU's limits (ExecuTorch 1.5.1's partitioner).

A node is taken when its dtypes are Vulkan's, its operator is registered (``op_registry``),
its arguments pass the operator's check, it has no tensor of more than 4 dims unless the
operator allows it, it can resize when dynamic shapes are required, and every tensor of the
call keeps at least one (storage, layout) representation within the texture limits. Nodes of
a fusable pattern (``patterns``) are taken whole; a transpose feeding a ``mm``/``addmm`` goes
with it only when that matmul is taken. Partitions are capability-based, single nodes
allowed, tagged ``tag<partition id>``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx.passes.operator_support import OperatorSupportBase

from ....exir.backend import CompileSpec, DelegationSpec, Partitioner, PartitionResult
from ....exir.backend.utils import (
    tag_capability_partitions,
    tag_constant_data,
    tag_mutated_buffer,
)
from ....exir.dialects._ops import ops as exir_ops
from .. import patterns as vk_patterns
from .. import utils
from ..op_registry import OpFeatures, OpKey, get_op_features, has_impl, vulkan_supported_ops
from ..serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType
from ..vulkan_preprocess import VulkanBackend

logger = logging.getLogger(__name__)

# Kept whole by to_edge_transform_and_lower: the delegate has shaders for them.
ops_not_to_decompose = [torch.ops.aten.hardswish.default, torch.ops.aten.upsample_nearest2d.vec,
                        torch.ops.aten.pixel_shuffle.default]

_AUTO_FUNCTIONALIZED = (torch.ops.higher_order.auto_functionalized,
                        torch.ops.higher_order.auto_functionalized_v2)


def _effective_target(node: torch.fx.Node) -> Any:
    """A functionalized custom op stands for the op it wraps (by name)."""
    if node.target in _AUTO_FUNCTIONALIZED:
        assert isinstance(node.args[0], torch._ops.OpOverload)
        return node.args[0].name()
    return node.target


class VulkanSupportedOperators(OperatorSupportBase):
    def __init__(self, texture_limits: utils.ImageExtents, buffer_limit: int,
                 require_dynamic_shape: bool = False, skip_bool_tensors: bool = False,
                 operator_blocklist: set | None = None, operator_allowlist: set | None = None,
                 fusable_subgraphs: list | None = None, nn_module_blocklist: set | None = None,
                 nn_module_allowlist: set | None = None) -> None:
        super().__init__()
        self.texture_limits = texture_limits
        self.buffer_limit = buffer_limit
        self.require_dynamic_shapes = require_dynamic_shape
        self.skip_bool_tensors = skip_bool_tensors
        self.operator_blocklist = operator_blocklist if operator_blocklist is not None else set()
        self.operator_allowlist = operator_allowlist
        self.fusable_subgraphs = fusable_subgraphs if fusable_subgraphs is not None else []
        self.fusable_nodes = {n for m in self.fusable_subgraphs for n in m.all_nodes}
        self.nn_module_blocklist = nn_module_blocklist
        self.nn_module_allowlist = nn_module_allowlist

    def op_node_is_compatible(self, node: torch.fx.Node,
                              features: OpFeatures | None = None) -> tuple[bool, str]:
        """Every tensor of the call keeps some representation the implementation takes."""
        target = _effective_target(node)
        if (utils.is_torch_op_node(node) and self.operator_allowlist is not None
                and target not in self.operator_allowlist):
            return False, "op is not in allowlist"
        if target in self.operator_blocklist:
            return False, "op is in blocklist"
        if features is None:
            if not has_impl(target):
                return False, "no operator implementation"
            features = get_op_features(target)
        # bools are int8 buffers, which some GPUs lack
        if self.skip_bool_tensors and utils.op_contains_bool_tensor(node):
            return False, f"op {utils.node_io_str(node)} contains bool tensor"
        if features.make_op_repsets(node, self.texture_limits).any_is_empty():
            return False, f"no valid representations for op {utils.node_io_str(node)}"
        return True, "Op is compatible"

    def node_is_compatible(self, node: torch.fx.Node,
                           features: OpFeatures | None = None) -> tuple[bool, str]:
        if utils.is_tensor_node(node):
            return self.op_node_is_compatible(node, features=features)
        if hasattr(node, "target"):
            return node.target in vulkan_supported_ops, "Op is compatible"
        return False, f"Unsupported node type: {node.format_node()}"

    def is_linear_permute(self, node: torch.fx.Node) -> tuple[bool, bool]:
        """``(feeds a mm/addmm as its transposed weight, that matmul is taken)``: such a
        transpose goes with its matmul, which the preprocess turns into ``linear``."""
        if node.target not in (exir_ops.edge.aten.t_copy.default,
                               exir_ops.edge.aten.permute_copy.default) or len(node.users) != 1:
            return False, False
        user = next(iter(node.users))
        if user.target in (exir_ops.edge.aten.mm.default, exir_ops.edge.aten.addmm.default):
            return True, self.node_is_compatible(user)[0]
        return False, False

    def log_skip(self, node: torch.fx.Node, reason: str) -> None:
        if node.op == "call_function":
            logger.info(f"[Vulkan Partitioner] Due to [{reason}], skipping "
                        f"{utils.node_io_str(node)}")

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module],
                          node: torch.fx.Node) -> bool:
        return self._is_node_supported(node)

    def _is_node_supported(self, node: torch.fx.Node) -> bool:  # noqa: C901
        if utils.is_tensor_node(node) and not utils.io_dtypes_are_supported(node):
            self.log_skip(node, "dtype not supported")
            return False
        if node.op == "call_function":
            if self.nn_module_allowlist is not None and not \
                    utils.node_comes_from_any_nn_module_in_set(node, self.nn_module_allowlist):
                self.log_skip(node, "source nn.Module is not in allowlist")
                return False
            if self.nn_module_blocklist is not None and \
                    utils.node_comes_from_any_nn_module_in_set(node, self.nn_module_blocklist):
                self.log_skip(node, "source nn.Module is in blocklist")
                return False
            if node in self.fusable_nodes:
                return True
        target = _effective_target(node)
        permute, linear_ok = self.is_linear_permute(node)
        if permute:
            if not linear_ok:  # leave it for another backend to fuse into its linear
                self.log_skip(node, "permute node of non compatible linear node")
            return linear_ok
        if target in vulkan_supported_ops:
            features = vulkan_supported_ops[target]
        elif hasattr(target, "name") and target.name() in vulkan_supported_ops:
            features = vulkan_supported_ops[target.name()]
        else:
            self.log_skip(node, "no operator implementation")
            return False
        ok, reason = features.check_dtypes(node)
        if not ok:
            self.log_skip(node, reason)
            return False
        if not features.are_node_inputs_supported_fn(node):
            self.log_skip(node, "op args not supported")
            return False
        if not features.supports_highdim and utils.op_contains_high_dim_tensor(node):
            self.log_skip(node, "op does not support high dim tensors")
            return False
        if self.require_dynamic_shapes and not features.supports_resize:
            self.log_skip(node, "no dynamic shape support")
            return False
        ok, reason = self.node_is_compatible(node, features=features)
        if not ok:
            self.log_skip(node, reason)
        return ok


def parse_compile_options(compile_options: Mapping[str, Any]) -> list[CompileSpec]:
    """The compile specs the options become: storage/layout overrides as u32, bools as one
    byte, ``texture_limits`` as three u32 (``texture_limits_x/y/z``),
    ``external_constants_max_data_bytes`` as u64. Other options stay partitioner-only."""
    specs = []
    for key, value in compile_options.items():
        if key == "external_constants_max_data_bytes":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 1 << 64:
                raise ValueError("external_constants_max_data_bytes must be a positive uint64")
            specs.append(CompileSpec(key, value.to_bytes(8, "little")))
            continue
        if isinstance(value, (VkStorageType, VkMemoryLayout)):
            specs.append(CompileSpec(key, int(value).to_bytes(4, "little")))
        if isinstance(value, bool):
            specs.append(CompileSpec(key, value.to_bytes(1, "little")))
        if key == "texture_limits":
            for axis, limit in zip("xyz", value):
                specs.append(CompileSpec(f"texture_limits_{axis}",
                                         int(limit).to_bytes(4, "little")))
    return specs


class VulkanPartitioner(Partitioner):
    """Partition for ExecuTorch's Vulkan delegate.

    ``compile_options``: ``texture_limits`` (x, y, z), ``small_texture_limits``,
    ``buffer_limit``, ``require_dynamic_shapes``, ``skip_bool_tensors``,
    ``storage_type_override`` / ``memory_layout_override``, ``force_fp16``,
    ``downcast_64_bit``, ``skip_tag_memory_metadata``, ``skip_memory_planning``,
    ``alias_buffer_mutations``, ``external_constants_max_data_bytes``. Operators and
    ``nn.Module`` type names can be blocked or allowed.
    """

    def __init__(self, compile_options: dict[str, Any] | None = None,
                 operator_blocklist: list[OpKey] | None = None,
                 operator_allowlist: list[OpKey] | None = None,
                 nn_module_blocklist: list[str] | None = None,
                 nn_module_allowlist: list[str] | None = None) -> None:
        super().__init__()
        self.options: dict[str, Any] = compile_options if compile_options is not None else {}
        self.delegation_spec = DelegationSpec(VulkanBackend.__name__,
                                              parse_compile_options(self.options))
        self.operator_blocklist: set = set(operator_blocklist or [])
        self.operator_allowlist = None if operator_allowlist is None else set(operator_allowlist)
        self.nn_module_blocklist = None if nn_module_blocklist is None else set(
            nn_module_blocklist)
        self.nn_module_allowlist = None if nn_module_allowlist is None else set(
            nn_module_allowlist)

    def ops_to_not_decompose(
            self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Callable[[torch.fx.Node], bool] | None]:
        return ops_not_to_decompose, lambda node: True

    def texture_limits(self) -> utils.ImageExtents:
        """An explicit ``texture_limits`` wins over ``small_texture_limits``."""
        if "texture_limits" in self.options:
            return self.options["texture_limits"]
        if self.options.get("small_texture_limits", False):
            return utils.SMALL_TEXTURE_LIMITS
        return utils.DEFAULT_TEXTURE_LIMITS

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        support = VulkanSupportedOperators(
            self.texture_limits(),
            self.options.get("buffer_limit", utils.DEFAULT_BUFFER_LIMIT),
            require_dynamic_shape=self.options.get("require_dynamic_shapes", False),
            skip_bool_tensors=self.options.get("skip_bool_tensors", False),
            operator_blocklist=self.operator_blocklist,
            operator_allowlist=self.operator_allowlist,
            fusable_subgraphs=vk_patterns.get_all_fusable_subgraphs(
                exported_program.graph_module),
            nn_module_blocklist=self.nn_module_blocklist,
            nn_module_allowlist=self.nn_module_allowlist)
        tags = tag_capability_partitions(exported_program.graph_module, support,
                                         self.delegation_spec)
        if tags:
            logger.info(f"Found {len(tags)} Vulkan subgraphs to be partitioned.")
        else:
            logger.warning("No Vulkan subgraphs can be partitioned!")
        tag_constant_data(exported_program)
        tag_mutated_buffer(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
