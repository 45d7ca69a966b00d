"""ExecuTorch's ``ReplaceQuantNodesPass`` for the CPU-side Q/DQ around Ethos-U delegates.

ExecuTorch's ``aot_arm_compiler`` turns the int8/int16 ``quantize_per_tensor`` /
``dequantize_per_tensor`` left on the CPU into ``cortex_m::`` ops, which its bare-metal runner
implements with CMSIS-NN. The operators and the pass live in ``edgetorch.backends.cortex_m``.
"""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassResult


def replace_quant_nodes(gm: torch.fx.GraphModule) -> PassResult:
    """Retarget the top-level graph's int8/int16 per-tensor Q/DQ to ``cortex_m::``."""
    from ...cortex_m.passes.replace_quant_nodes import SWAP, qualified

    modified = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in SWAP and qualified(node.args):
            node.target = SWAP[node.target]
            modified = True
    if modified:
        gm.recompile()
    return PassResult(gm, modified)
