"""Reference side of the Vulkan compat tests; runs ONLY in the reference venv (executorch 1.5.1).

    python vk_ref.py export MODEL OUT.pte [--options JSON] [--quant MODE]

lowers a built-in example (``edgetorch.examples``, the only edgetorch import, or one of
``vk_models.MODELS``) with
ExecuTorch's ``VulkanPartitioner(options)`` and writes OUT.pte. ``--options`` is the
partitioner's compile options as JSON (``storage_type_override`` / ``memory_layout_override``
as ints, ``texture_limits`` as a list); ``--quant`` quantizes the linears first with
``VulkanQuantizer`` (``w8``/``w4``: weight-only 8/4-bit, ``dyn8``/``dyn4``: with dynamic
8-bit activations), calibrated on the example's inputs; ``q4gsw``/``8da4w`` with torchao's
``quantize_`` instead (``vk_models.torchao_quantize``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from vk_models import MODELS, TORCHAO_QUANT, build, torchao_quantize  # noqa: E402

from edgetorch.examples import EXAMPLES  # noqa: E402

QUANT = {"w8": (False, 8), "w4": (False, 4), "dyn8": (True, 8), "dyn4": (True, 4)}


def _options(text: str) -> dict:
    from executorch.backends.vulkan.serialization.vulkan_graph_schema import (
        VkMemoryLayout,
        VkStorageType,
    )

    options = json.loads(text)
    if "storage_type_override" in options:
        options["storage_type_override"] = VkStorageType(options["storage_type_override"])
    if "memory_layout_override" in options:
        options["memory_layout_override"] = VkMemoryLayout(options["memory_layout_override"])
    if "texture_limits" in options:
        options["texture_limits"] = tuple(options["texture_limits"])
    return options


def export(args: argparse.Namespace) -> None:
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model, inputs = build(args.model)
    if args.quant in TORCHAO_QUANT:
        model = torchao_quantize(model, args.quant)
    exported = torch.export.export(model, inputs)
    if args.quant and args.quant not in TORCHAO_QUANT:
        from executorch.backends.vulkan.quantizer.vulkan_quantizer import (
            VulkanQuantizer,
            get_symmetric_quantization_config,
        )
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        dynamic, bits = QUANT[args.quant]
        quantizer = VulkanQuantizer().set_global(
            get_symmetric_quantization_config(is_dynamic=dynamic, weight_bits=bits))
        prepared = prepare_pt2e(exported.module(), quantizer)
        prepared(*inputs)
        exported = torch.export.export(convert_pt2e(prepared), inputs)
    lowered = to_edge_transform_and_lower(
        exported, partitioner=[VulkanPartitioner(_options(args.options))])
    Path(args.out).write_bytes(lowered.to_executorch().buffer)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("model", choices=sorted(EXAMPLES) + sorted(MODELS))
    p.add_argument("out")
    p.add_argument("--options", default="{}")
    p.add_argument("--quant", choices=sorted(QUANT) + list(TORCHAO_QUANT))
    p.set_defaults(func=export)
    args = parser.parse_args()
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
