"""ExecuTorch 1.5.1's ``exir.debug_handle_utils`` names for the debug-handle keys and the
greatest-ancestor identity that ``exir/debug_handles.py`` numbers nodes by."""

from .debug_handles import DEBUG_HANDLE_KEY, FROM_NODE_KEY, UNSET_DEBUG_HANDLE
from .debug_handles import ancestor_id as get_greatest_ancestor_node_identifier

__all__ = ["DEBUG_HANDLE_KEY", "FROM_NODE_KEY", "UNSET_DEBUG_HANDLE",
           "get_greatest_ancestor_node_identifier"]
