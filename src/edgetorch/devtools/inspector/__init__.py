"""The Inspector (``executorch.devtools.inspector``)."""

from ._inspector import Event, EventBlock, Inspector, InspectorError, PerfData, TimeScale

__all__ = ["Event", "EventBlock", "Inspector", "InspectorError", "PerfData", "TimeScale"]
