"""The Vulkan preprocess's graph passes (ExecuTorch's ``backends/vulkan/_passes``)."""

from .fold_qdq import FoldQDQPass
from .fuse_patterns import FusePatternsPass
from .fuse_quantized_ops import FuseQuantizedOpsTransform
from .insert_dtype_promotion import InsertDtypePromotionPass
from .insert_prepack_nodes import insert_prepack_nodes
from .remove_asserts import RemoveAssertsTransform
from .remove_redundant_ops import RemoveRedundantOpsTransform
from .squeeze_unsqueeze_inputs import SqueezeUnsqueezeInputs
from .tag_memory_meta_pass import TagMemoryMetaPass

__all__ = ["FoldQDQPass", "FusePatternsPass", "FuseQuantizedOpsTransform",
           "InsertDtypePromotionPass", "RemoveAssertsTransform", "RemoveRedundantOpsTransform",
           "SqueezeUnsqueezeInputs", "TagMemoryMetaPass", "insert_prepack_nodes"]
