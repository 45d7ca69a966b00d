"""The Inspector (``executorch.devtools.inspector``)."""

from ._compare import compare_results
from ._event import Event, EventBlock, PerfData, TimeScale
from ._inspector import Inspector, InspectorError
from .vgf_neural_statistics import (
    parse_vgf_neural_statistics_delegate_metadata,
    parse_vgf_neural_statistics_metadata,
)

__all__ = ["Event", "EventBlock", "Inspector", "InspectorError", "PerfData", "TimeScale",
           "compare_results", "parse_vgf_neural_statistics_delegate_metadata",
           "parse_vgf_neural_statistics_metadata"]
