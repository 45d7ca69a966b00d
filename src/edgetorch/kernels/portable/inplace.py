"""In-place operators a program uses to write state back (mutable buffers, mutated inputs)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel


@kernel("aten::copy_")
def copy_(self: np.ndarray, src: np.ndarray, non_blocking: bool) -> np.ndarray:
    """Write ``src`` (broadcast, cast) into ``self`` and return ``self``: the runtime then sees
    the result is already in place."""
    np.copyto(self, np.broadcast_to(src, self.shape), casting="unsafe")
    return self
