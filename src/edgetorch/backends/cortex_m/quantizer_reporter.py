"""What the Cortex-M quantizers decided, as a log report (ExecuTorch's ``quantizer_reporter``).

Each quantizer that is a ``QuantizerReporterUser`` records the node patterns it accepted and
rejected (with the reason); ``QuantizerReporter.log_quantizer_report`` logs them after
annotation: at INFO the number of nodes nothing annotated, at DEBUG every quantizer's patterns
with their input and output specs, and the unannotated nodes by name. Nothing is built when
neither level is enabled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    QuantizationSpec,
    SharedQuantizationSpec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

logger = logging.getLogger(__name__)

WIDTH = 100
RULE = "-" * WIDTH
INDENT = "   "
# first, middle and last row of a pattern of several nodes
PATTERN_MARKS = ("╒", "|", "╘")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1].upper()


def qspec_repr(qspec: object) -> str:
    """A short description of a quantization spec for the report."""
    if isinstance(qspec, QuantizationSpec):
        text = f"dtype={_dtype_name(qspec.dtype)}"
        if qspec.quant_min is not None or qspec.quant_max is not None:
            text += f", range=({qspec.quant_min},{qspec.quant_max})"
        return f"QuantizationSpec({text})"
    if isinstance(qspec, SharedQuantizationSpec):
        return f"SharedQuantizationSpec(edge_or_node={qspec.edge_or_node})"
    if isinstance(qspec, DerivedQuantizationSpec):
        return f"DerivedQuantizationSpec(derived_from={qspec.derived_from}, dtype={qspec.dtype})"
    return repr(qspec) if qspec is not None else "None"


@dataclass(frozen=True)
class QuantizerInfo:
    name: str
    targeted_nodes_description: str
    qconfig_label: str
    support_config_path: str


@dataclass
class QuantizerReport:
    """The patterns one quantizer accepted and rejected, in the order it decided them."""

    _PREVIOUS_ANNOTATION_REJECT_REASON = "Tried annotating already quantized node."

    entries: list[tuple[list[Node], bool, str | None]] = field(default_factory=list)

    def accepted_nodes(self) -> int:
        return sum(len(p) for p, ok, _ in self.entries if ok)

    def rejected_nodes(self, previously_annotated: bool) -> int:
        return sum(len(p) for p, ok, why in self.entries if not ok
                   and (why == self._PREVIOUS_ANNOTATION_REJECT_REASON) == previously_annotated)


class QuantizerReporterUser:
    """A quantizer whose decisions go into the report."""

    def __init__(self) -> None:
        self.quantizer_report = QuantizerReport()

    def get_quantizer_info(self) -> QuantizerInfo:
        raise NotImplementedError(f"{type(self).__name__} must describe itself for the report")

    def report_accept(self, pattern: list[Node]) -> None:
        self.quantizer_report.entries.append((list(pattern), True, None))

    def report_reject(self, pattern: list[Node], reason: str) -> None:
        self.quantizer_report.entries.append((list(pattern), False, reason))


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, a dashed rule under the headers."""
    widths = [max([len(h) + 2, *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _annotation_cells(node: Node) -> tuple[list[str], str]:
    ann = node.meta.get(Q_ANNOTATION_KEY)
    if ann is None:
        return [], "None"
    inputs = [f"{n.name}: {qspec_repr(q)}" for n, q in ann.input_qspec_map.items()]
    output = qspec_repr(ann.output_qspec) if ann.output_qspec is not None else ""
    return inputs, output if inputs or ann.output_qspec is not None else ""


def _pattern_rows(pattern: list[Node], accepted: bool, reason: str | None) -> list[list[str]]:
    rows = []
    for i, node in enumerate(pattern):
        if accepted:
            inputs, output = _annotation_cells(node)
            if inputs and output == "":
                output = "None"
        else:
            inputs, output = [f"Rejected: {reason}"], ""
        mark = "" if len(pattern) == 1 else \
            PATTERN_MARKS[0] if i == 0 else PATTERN_MARKS[2] if i == len(pattern) - 1 \
            else PATTERN_MARKS[1]
        rows.append([mark, node.name, inputs[0] if inputs else "", output])
        rows += [[PATTERN_MARKS[1], "", more, ""] for more in inputs[1:]]
    return rows


def _section(user: QuantizerReporterUser) -> list[str]:
    info, report = user.get_quantizer_info(), user.quantizer_report
    lines = [f"{info.name} using {info.targeted_nodes_description}",
             f"Annotating with {info.qconfig_label}",
             f"Supported operators and patterns defined by {info.support_config_path}"]
    if not report.entries:
        return [*lines, f"{INDENT}No patterns accepted or rejected.", ""]
    lines += [f"{INDENT}Accepted nodes: {report.accepted_nodes()}",
              f"{INDENT}Rejected due to previous annotation: {report.rejected_nodes(True)}",
              f"{INDENT}Rejected nodes: {report.rejected_nodes(False)}", ""]
    listed = [(p, ok, why) for p, ok, why in report.entries
              if ok or why != report._PREVIOUS_ANNOTATION_REJECT_REASON]
    rows = [r for p, ok, why in listed for r in _pattern_rows(p, ok, why)]
    headers = ["", "NODE NAME", "INPUT QSPEC MAP", "OUTPUT QSPEC MAP"]
    if not any(len(p) > 1 for p, _, _ in listed):
        headers, rows = headers[1:], [r[1:] for r in rows]
    return lines + [INDENT + t for t in _table(headers, rows)]


def _unannotated(model: GraphModule) -> list[Node]:
    return [n for n in model.graph.nodes
            if not getattr(n.meta.get(Q_ANNOTATION_KEY), "_annotated", False)]


class QuantizerReporter:
    def __init__(self, quantizers: list) -> None:
        self.quantizers = [q for q in quantizers if isinstance(q, QuantizerReporterUser)]

    def log_quantizer_report(self, model: GraphModule) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            body: list[str] = []
            for q in self.quantizers:
                body += [*_section(q), RULE]
            missing = _unannotated(model)
            body += ["Non annotated nodes:", *(f"    {n.name}" for n in missing), RULE]
            logger.debug("\n".join(self._header() + body))
        elif logger.isEnabledFor(logging.INFO):
            count = len(_unannotated(model))
            logger.info("\n".join([*self._header(), f"Non annotated nodes: {count}", RULE]))

    @staticmethod
    def _header() -> list[str]:
        return [RULE, "QUANTIZATION REPORT".center(WIDTH), RULE]
