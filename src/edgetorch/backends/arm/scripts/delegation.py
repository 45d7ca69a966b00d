"""The delegation report of ``aot_arm_compiler``: ``delegation_info.txt`` and a summary."""

from __future__ import annotations

import logging
import os
from typing import Any

from ....devtools.backend_debug import get_delegation_info

logger = logging.getLogger(__name__)


def delegation_summary(info: Any, intermediates: str | None = None) -> str:
    non_delegated = sorted(((b.op_type, b.non_delegated)
                            for b in info.delegation_by_operator.values() if b.non_delegated > 0),
                           key=lambda item: (-item[1], item[0]))
    lines = ["Delegation summary:"]
    if info.num_delegated_nodes == 0:
        lines.append("  Model was not delegated.")
    elif info.num_non_delegated_nodes == 0:
        lines.append("  Model was fully delegated.")
    else:
        lines.append("  Model was partially delegated.")
    lines.append(f"  Delegated partitions for silicon acceleration: {info.num_delegated_subgraphs}")
    lines.append(f"  Non-delegated ops: {info.num_non_delegated_nodes}")
    if non_delegated:
        lines.append("  Non-delegated operators:")
        lines += [f"    - {op}: {n}" for op, n in non_delegated]
    if intermediates is not None:
        lines += ["", "Full delegation report:",
                  f"  {os.path.join(intermediates, 'delegation_info.txt')}"]
    return "\n".join(lines)


def dump_delegation_info(edge: Any, intermediates: str | None = None) -> Any:
    """Log the delegation table, write it to ``delegation_info.txt``, print the summary."""
    info = get_delegation_info(edge.exported_program().graph_module)
    table = info.get_operator_delegation_dataframe()
    table = table.to_string() if hasattr(table, "to_string") else str(table)  # pandas or not
    text = f"Delegation info:\n{info.get_summary()}\nDelegation table:\n{table}\n"
    logger.info(text)
    if intermediates is not None:
        with open(os.path.join(intermediates, "delegation_info.txt"), "w") as f:
            f.write(text)
    print(delegation_summary(info, intermediates))
    return info
