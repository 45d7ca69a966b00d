"""``TosaCompileSpec``: lower to a plain TOSA flatbuffer (delegate id ``TOSABackend``)."""

from __future__ import annotations

from ..common.arm_compile_spec import ArmCompileSpec
from .specification import TosaSpecification

__all__ = ["ArmCompileSpec", "TosaCompileSpec"]


class TosaCompileSpec(ArmCompileSpec):
    """``TosaCompileSpec("TOSA-1.0+INT")``; the delegate blob is the ``.tosa`` file itself."""

    def __init__(self, tosa_spec: TosaSpecification | str):
        if isinstance(tosa_spec, str):
            tosa_spec = TosaSpecification.create_from_string(tosa_spec)
        self._set_compile_specs(tosa_spec, [])
        self._validate()

    def _validate(self) -> None:
        if self.compiler_flags:
            raise ValueError(f"TosaCompileSpec can't have compiler flags, got {self.compiler_flags}; "
                             "compiler flags are for EthosUCompileSpec (Vela)")

    @classmethod
    def _get_output_format(cls) -> str:
        return "tosa"
