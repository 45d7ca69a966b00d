"""``VgfCompileSpec``: a TOSA 1.0 spec (FP and/or INT) plus model-converter flags; the delegate
blob is a VGF file (``output_format`` ``vgf``)."""

from __future__ import annotations

from ..common.arm_compile_spec import ArmCompileSpec
from ..tosa.specification import TosaSpecification

DEFAULT_TOSA_SPEC = "TOSA-1.0+FP+INT+int4+int16"


class VgfCompileSpec(ArmCompileSpec):
    """``VgfCompileSpec("TOSA-1.0+INT")``; ``compiler_flags`` go to ``model-converter``. As in
    ExecuTorch, ``tosa_sw_dev_mode`` is set (until tosa-tools 2027.02)."""

    def __init__(self, tosa_spec: TosaSpecification | str | None = None,
                 compiler_flags: list[str] | None = None) -> None:
        if tosa_spec is None:
            tosa_spec = DEFAULT_TOSA_SPEC
        if isinstance(tosa_spec, str):
            tosa_spec = TosaSpecification.create_from_string(tosa_spec)
        self._set_compile_specs(tosa_spec, list(compiler_flags or []))
        self._set_tosa_dev_mode(True)
        self._validate()

    def _validate(self) -> None:
        version = self.tosa_spec.version
        if version.major != 1:
            raise ValueError("Arm backend only supports converter-backend for TOSA version 1. "
                             f"Invalid TOSA version: {version}")
        if "FP" not in self.tosa_spec.profiles and "INT" not in self.tosa_spec.profiles:
            raise ValueError("Arm backend only supports converter-backend for FP and/or INT. "
                             f"Invalid TOSA profile: {self.tosa_spec.profiles}")

    @classmethod
    def _get_output_format(cls) -> str:
        return "vgf"
