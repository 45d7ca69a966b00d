"""``PropagateDeviceConfig`` (ExecuTorch's name and fields): whether method inputs and outputs
that feed or leave a device delegate directly skip their host/device copy."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PropagateDeviceConfig:
    """``skip_h2d_for_method_inputs``: a method input used only by a device delegate is placed
    on the device (the caller passes device memory) instead of being copied there.
    ``skip_d2h_for_method_outputs``: a device delegate's result that is a method output stays
    on the device. Either may be a ``{method: bool}`` dict. Both need
    ``enable_non_cpu_memory_planning=True`` and are meant to go with
    ``MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False)``."""

    skip_h2d_for_method_inputs: bool | dict[str, bool] = False
    skip_d2h_for_method_outputs: bool | dict[str, bool] = False

    def __hash__(self) -> int:  # the fields may be dicts
        return hash((str(self.skip_h2d_for_method_inputs), str(self.skip_d2h_for_method_outputs)))

    def for_method(self, name: str) -> tuple[bool, bool]:
        """The two flags for method ``name`` (a dict field defaults to False)."""
        def pick(flag: bool | dict[str, bool]) -> bool:
            return bool(flag.get(name, False)) if isinstance(flag, dict) else bool(flag)
        return pick(self.skip_h2d_for_method_inputs), pick(self.skip_d2h_for_method_outputs)
