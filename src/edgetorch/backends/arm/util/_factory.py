"""From an Arm compile spec to its partitioner or quantizer, and from the compile specs a
delegate stores back to the compile spec (ExecuTorch's ``_factory`` names)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....errors import InvalidArgumentError
from ....exir.backend.compile_spec_schema import CompileSpec
from ..common.arm_compile_spec import ArmCompileSpec


def _targets() -> list[tuple[type[ArmCompileSpec], type, type]]:
    """(compile spec, partitioner, quantizer) per Arm target; imported on use, as the
    Ethos-U half needs ethos-u-vela."""
    from ..ethosu import EthosUCompileSpec, EthosUPartitioner
    from ..quantizer import EthosUQuantizer, TOSAQuantizer, VgfQuantizer
    from ..tosa.compile_spec import TosaCompileSpec
    from ..tosa.partitioner import TOSAPartitioner
    from ..vgf import VgfCompileSpec, VgfPartitioner

    return [(TosaCompileSpec, TOSAPartitioner, TOSAQuantizer),
            (EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer),
            (VgfCompileSpec, VgfPartitioner, VgfQuantizer)]


def _entry(compile_spec: ArmCompileSpec) -> tuple[type[ArmCompileSpec], type, type]:
    for entry in _targets():
        if isinstance(compile_spec, entry[0]):
            return entry
    raise InvalidArgumentError(f"{type(compile_spec).__name__} targets no Arm backend; use a "
                               "TosaCompileSpec, EthosUCompileSpec or VgfCompileSpec")


def parse_compile_spec(compile_specs: list[CompileSpec]) -> ArmCompileSpec:
    """The compile spec whose ``output_format`` (``tosa``, ``vela``, ``vgf``) the list holds."""
    found = [s.value for s in compile_specs if s.key == "output_format"]
    if not found:
        raise InvalidArgumentError("the compile specs hold no output_format; expected one of "
                                   "tosa, vela, vgf")
    fmt = bytes(found[0]).decode()
    for spec_cls, _, _ in _targets():
        if spec_cls._get_output_format() == fmt:
            return spec_cls._from_list(compile_specs)
    raise InvalidArgumentError(f"unknown Arm output_format {fmt!r}; expected tosa, vela or vgf")


def create_partitioner(compile_spec: ArmCompileSpec,
                       additional_checks: Sequence[Any] | None = None) -> Any:
    return _entry(compile_spec)[1](compile_spec, additional_checks)


def create_quantizer(compile_spec: ArmCompileSpec) -> Any:
    return _entry(compile_spec)[2](compile_spec)
