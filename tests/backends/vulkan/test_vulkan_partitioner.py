"""What the Vulkan partitioner takes and how it encodes its options (ExecuTorch 1.5.1's rules)."""

from __future__ import annotations

import pytest
import torch

from edgetorch.backends.vulkan import utils
from edgetorch.backends.vulkan.op_registry import get_op_features, has_impl, vulkan_supported_ops
from edgetorch.backends.vulkan.partitioner.vulkan_partitioner import (
    VulkanPartitioner,
    parse_compile_options,
)
from edgetorch.backends.vulkan.serialization.vulkan_graph_schema import (
    VkMemoryLayout,
    VkStorageType,
)
from edgetorch.backends.vulkan.vulkan_preprocess import parse_compile_spec
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.exir.dialects._ops import ops as exir_ops

pytestmark = pytest.mark.torch


def test_options_round_trip_through_compile_specs():
    options = {"storage_type_override": VkStorageType.BUFFER,
               "memory_layout_override": VkMemoryLayout.TENSOR_CHANNELS_PACKED,
               "texture_limits": (1024, 512, 256), "force_fp16": True,
               "require_dynamic_shapes": False, "external_constants_max_data_bytes": 1 << 20}
    specs = parse_compile_options(options)
    assert [s.key for s in specs] == [
        "storage_type_override", "memory_layout_override", "texture_limits_x",
        "texture_limits_y", "texture_limits_z", "force_fp16", "require_dynamic_shapes",
        "external_constants_max_data_bytes"]
    assert specs[0].value == (0).to_bytes(4, "little") and specs[5].value == b"\x01"
    parsed = parse_compile_spec(specs)
    assert parsed["storage_type_override"] == VkStorageType.BUFFER
    assert parsed["texture_limits_y"] == 512 and parsed["force_fp16"] is True
    assert parsed["external_constants_max_data_bytes"] == 1 << 20
    with pytest.raises(ValueError, match="positive uint64"):
        parse_compile_options({"external_constants_max_data_bytes": 0})


def test_edge_names_do_not_match_plain_aten_targets():
    assert exir_ops.edge.aten.add.Tensor in vulkan_supported_ops
    assert torch.ops.aten.add.Tensor not in vulkan_supported_ops
    assert not has_impl(torch.ops.aten.scalar_tensor.default)  # stays on the CPU, as in ET
    assert get_op_features(exir_ops.edge.aten.linear.default).supports_prepacking


def test_repsets_pick_texture_before_buffer_and_filter_by_limits():
    rs = utils.ANY_STORAGE
    assert rs.make_tensor_repr() == utils.TensorRepr(VkStorageType.TEXTURE_3D,
                                                     VkMemoryLayout.TENSOR_WIDTH_PACKED)
    fake = torch.empty(1, 8, 100000, 4, device="meta")
    small = utils.filter_invalid_reprs(fake, rs, (2048, 2048, 2048))
    assert small.valid_texture_layouts == set() and small.valid_buffer_layouts == \
        utils.all_memory_layouts
    assert utils.required_image_extents([2, 5, 7, 9], VkMemoryLayout.TENSOR_CHANNELS_PACKED) \
        == (9, 7, 4)


class _Mix(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x) * 2
        return torch.cumsum(y, 1)  # no Vulkan implementation


def _delegated_ops(pte_ep) -> list[str]:
    return [n.target.__name__ for n in pte_ep.graph.nodes if n.op == "call_function"
            and hasattr(n.target, "__name__") and n.target.__name__.startswith("aten")]


def test_unsupported_operators_stay_in_the_program():
    ep = torch.export.export(_Mix(), (torch.randn(2, 3),))
    lowered = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()])
    left = _delegated_ops(lowered.exported_program())
    assert left == ["aten.cumsum.default"]


def test_operator_blocklist_keeps_an_operator_out():
    ep = torch.export.export(_Mix(), (torch.randn(2, 3),))
    lowered = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner(
        operator_blocklist=[exir_ops.edge.aten.mul.Tensor])])
    assert "aten.mul.Tensor" in _delegated_ops(lowered.exported_program())


def test_a_mutable_buffer_computed_in_the_delegate_is_taken_over():
    """ExecuTorch's ``take_over_mutable_buffer``: the buffer and its write-back move into the
    delegate; the program keeps neither, and the call returns only the user output."""
    from torch.export.graph_signature import OutputKind
    from vk_models import build

    from edgetorch.exir.delegate import executorch_call_delegate

    model, inputs = build("accumulator")
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[VulkanPartitioner()])
    ep = edge.exported_program()
    assert [s.kind for s in ep.graph_signature.output_specs] == [OutputKind.USER_OUTPUT]
    assert "acc" not in ep.state_dict and not ep.graph_signature.buffers_to_mutate
    (call,) = [n for n in ep.graph.nodes if n.target is executorch_call_delegate]
    assert len(call.meta["val"]) == 1
    lowered = getattr(ep.graph_module, call.args[0].target)
    sig = lowered.original_module.graph_signature
    assert list(sig.buffers_to_mutate.values()) == ["acc"]


def test_cli_export_lowers_to_vulkan(tmp_path, capsys):
    from edgetorch.cli import main
    from edgetorch.schema.pte import PteFile

    out = tmp_path / "mlp_vk.pte"
    assert main(["export", "mlp", "--delegate", "vulkan", "-o", str(out)]) == 0
    (delegate,) = PteFile.parse(out.read_bytes()).program.execution_plan[0].delegates
    assert delegate.id == "VulkanBackend"
    assert main(["run", str(out)]) == 0
    assert "VulkanBackend (NumPy interpreter" in capsys.readouterr().out
