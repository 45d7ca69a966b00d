"""Which Cortex-M the code is compiled for, and so which CMSIS-NN kernels (ISA) it uses."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...errors import CompileSpecError
from .library import cmsis_nn

CortexM = Enum("CortexM", [m.name for m in cmsis_nn.CortexM])  # M0 ... M85, ExecuTorch's names

_ISAS = {
    "M0": {"SCALAR"}, "M0PLUS": {"SCALAR"}, "M3": {"SCALAR"}, "M23": {"SCALAR"},
    "M4": {"SCALAR", "DSP"}, "M7": {"SCALAR", "DSP"}, "M33": {"SCALAR", "DSP"},
    "M35P": {"SCALAR", "DSP"}, "M55": {"SCALAR", "DSP", "MVE"}, "M85": {"SCALAR", "DSP", "MVE"},
}
TARGETS = ["cortex-m" + m.name[1:].lower() for m in CortexM]


@dataclass(frozen=True)
class CortexMTargetConfig:
    """``cpu`` and optionally an ``isa`` override (an M55 without MVE uses DSP kernels)."""

    cpu: CortexM
    isa: cmsis_nn.Backend | None = None

    def __post_init__(self) -> None:
        if self.isa is not None and self.isa.name not in _ISAS[self.cpu.name]:
            raise CompileSpecError(
                f"Backend {self.isa.name} is not supported on {self.cpu.name}; supported: "
                f"{sorted(_ISAS[self.cpu.name])}")

    @property
    def target_string(self) -> str:
        return "cortex-m" + self.cpu.name[1:].lower()

    @property
    def backend(self) -> cmsis_nn.Backend:
        return self.isa or cmsis_nn.resolve_backend(cmsis_nn.CortexM[self.cpu.name])

    @classmethod
    def from_target_string(cls, target: str) -> CortexMTargetConfig:
        if not target.startswith("cortex-m"):
            raise CompileSpecError(
                f"Cortex-M target string must start with 'cortex-m', got: {target!r}")
        name = "M" + target[len("cortex-m"):].upper()
        if name not in CortexM.__members__:
            raise CompileSpecError(
                f"Unsupported Cortex-M target string: {target!r}. Supported: {sorted(TARGETS)}")
        return cls(cpu=CortexM[name])
