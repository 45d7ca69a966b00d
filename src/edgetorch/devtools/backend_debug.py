"""How much of a program went to backends: ``get_delegation_info(graph_module)``.

Same names as ExecuTorch's ``executorch.devtools.backend_debug``. Works on the graph module of
an edge or lowered program (``edge.exported_program().graph_module``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

_DELEGATED = "occurrences_in_delegated_graphs"
_NON_DELEGATED = "occurrences_in_non_delegated_graphs"
_COLUMNS = ["op_type", _DELEGATED, _NON_DELEGATED]


@dataclass
class DelegationBreakdown:
    """How many nodes of ``op_type`` were delegated and how many were not."""

    op_type: str = ""
    delegated: int = 0
    non_delegated: int = 0


class Table(list):
    """Rows (dicts) with a readable ``str`` (how a ``DelegationInfo`` prints)."""

    def __init__(self, rows: list[dict[str, Any]], columns: list[str]) -> None:
        super().__init__(rows)
        self.columns = columns

    def __str__(self) -> str:
        cells = [self.columns] + [[str(r[c]) for c in self.columns] for r in self]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


@dataclass
class DelegationInfo:
    """Delegation statistics of one graph module."""

    num_delegated_subgraphs: int
    num_delegated_nodes: int
    num_non_delegated_nodes: int
    delegation_by_operator: dict[str, DelegationBreakdown]

    # ExecuTorch's attribute names are the num_* ones; these read more naturally.
    @property
    def delegated_nodes(self) -> int:
        return self.num_delegated_nodes

    @property
    def non_delegated_nodes(self) -> int:
        return self.num_non_delegated_nodes

    def get_summary(self) -> str:
        return (f"Total delegated subgraphs: {self.num_delegated_subgraphs}\n"
                f"Number of delegated nodes: {self.num_delegated_nodes}\n"
                f"Number of non-delegated nodes: {self.num_non_delegated_nodes}\n")

    def get_operator_delegation_dataframe(self) -> Any:
        """Per-operator counts, sorted by operator, with a final "Total" row.

        Columns: ``op_type``, ``occurrences_in_delegated_graphs``,
        ``occurrences_in_non_delegated_graphs``, as a ``pandas.DataFrame`` (pandas comes with
        the ``compiler`` extra).
        """
        rows = [{"op_type": b.op_type, _DELEGATED: b.delegated, _NON_DELEGATED: b.non_delegated}
                for b in sorted(self.delegation_by_operator.values(), key=lambda b: b.op_type)]
        rows.append({"op_type": "Total", _DELEGATED: self.num_delegated_nodes,
                     _NON_DELEGATED: self.num_non_delegated_nodes})
        import pandas as pd

        return pd.DataFrame(rows, columns=_COLUMNS)

    def __str__(self) -> str:
        return self.get_summary() + str(Table(
            [{"op_type": k, **{c: v for c, v in asdict(b).items() if c != "op_type"}}
             for k, b in sorted(self.delegation_by_operator.items())],
            ["op_type", "delegated", "non_delegated"]))


def _op_type(node_name: str) -> str:
    """``aten_add_tensor_2`` / ``add_2`` -> without the numeric suffix fx adds."""
    return re.sub(r"_\d+$", "", node_name)


def _is_lowered(module: Any) -> bool:
    return type(module).__name__ == "LoweredBackendModule"


def get_delegation_info(graph_module: Any) -> DelegationInfo:
    """Count delegated subgraphs and, per operator, delegated and non-delegated nodes.

    Operators are named like the graph's nodes (``aten_cumsum_default``, ...), as in
    ExecuTorch; every call but the delegate calls themselves is counted (``getitem``s that
    read a delegate's outputs among the non-delegated nodes, as ExecuTorch counts them).
    """
    counts: dict[str, DelegationBreakdown] = defaultdict(DelegationBreakdown)

    def count(name: str, delegated: bool) -> None:
        b = counts[_op_type(name)]
        b.op_type = _op_type(name)
        if delegated:
            b.delegated += 1
        else:
            b.non_delegated += 1

    subgraphs = 0
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            module = getattr(graph_module, str(node.target), None)
            if _is_lowered(module):
                subgraphs += 1
                for inner in module.original_module.graph.nodes:
                    if inner.op == "call_function":
                        count(inner.name, True)
        elif node.op == "call_function" and _op_type(node.name) != "executorch_call_delegate":
            count(node.name, False)
    return DelegationInfo(
        num_delegated_subgraphs=subgraphs,
        num_delegated_nodes=sum(b.delegated for b in counts.values()),
        num_non_delegated_nodes=sum(b.non_delegated for b in counts.values()),
        delegation_by_operator=dict(counts),
    )


def print_delegation_info(graph_module: Any) -> None:
    info = get_delegation_info(graph_module)
    print(info.get_summary())
    print(info.get_operator_delegation_dataframe())
