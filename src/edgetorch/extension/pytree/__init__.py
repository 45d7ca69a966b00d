"""``executorch.extension.pytree`` as ExecuTorch's pip wheels ship it: torch's pytree (the C++
pybindings variant is built only inside Meta). ``TreeSpec.to_str`` is not patched onto torch's
class here; use ``to_str(spec)``."""

from torch.utils._pytree import (
    TreeSpec,
    _broadcast_to_and_flatten,
    _register_pytree_node,
    tree_flatten,
    tree_map,
    tree_unflatten,
    treespec_dumps,
    treespec_loads,
)

broadcast_to_and_flatten = _broadcast_to_and_flatten
from_str = treespec_loads
register_custom = _register_pytree_node
to_str = treespec_dumps

__all__ = ["TreeSpec", "broadcast_to_and_flatten", "from_str", "register_custom", "to_str",
           "tree_flatten", "tree_map", "tree_unflatten"]
