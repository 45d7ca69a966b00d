"""``EthosUCompileSpec``: target, Vela flags and TOSA spec of an Ethos-U delegate.

ExecuTorch 1.5.1's class and defaults: the system config and memory mode default per NPU family,
the Vela flags are ``extra_flags`` then ``--accelerator-config``, ``--config``,
``--output-format=raw``, ``--system-config``, ``--memory-mode``; U55/U65 compile to
``TOSA-1.0+INT+int16+int4+u55``, U85 to ``TOSA-1.0+INT+int16+int4+cf``. The delegate stores the
base specs, then ``target``, then ``external_block_placements`` (compact sorted JSON) when set.
Torch-free: the runtime reads it back from a ``.pte``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ....schema.program import CompileSpec
from ..common.arm_compile_spec import ArmCompileSpec
from ..tosa.specification import TosaSpecification
from .vela_bin import EXTERNABLE_BLOCKS

# target -> (default system config, default memory mode)
TARGETS: dict[str, tuple[str, str]] = {
    **{f"ethos-u55-{n}": ("Ethos_U55_High_End_Embedded", "Shared_Sram") for n in (32, 64, 128, 256)},
    **{f"ethos-u65-{n}": ("Ethos_U65_High_End", "Dedicated_Sram_384KB") for n in (256, 512)},
    **{f"ethos-u85-{n}": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only")
       for n in (128, 256, 512, 1024, 2048)},
}


@dataclass(frozen=True)
class VelaExternalBlockPlacements:
    """Tags of the Vela blocks (command stream, weights) to store outside the blob as named
    data; ``ExecutorchProgramManager.write_tensor_data_to_file`` writes them to ``<tag>.ptd``."""

    cmd_data: str | None = None
    weight_data: str | None = None

    def __post_init__(self) -> None:
        for tag in (self.cmd_data, self.weight_data):
            if tag is not None and (not isinstance(tag, str) or not tag or not tag.isascii()):
                raise ValueError(f"Invalid external Vela placement: {tag!r}; use a non-empty "
                                 "ASCII tag such as 'npu_weights'")

    def to_block_placements(self) -> dict[str, str]:
        return {name: tag for name, tag in (("cmd_data", self.cmd_data),
                                            ("weight_data", self.weight_data)) if tag is not None}


def _defaults(target_lower: str) -> tuple[str, str]:
    # ExecuTorch only checks the family; an unknown size would fail later inside Vela.
    if target_lower in TARGETS:
        return TARGETS[target_lower]
    raise RuntimeError(f"Unknown ethos target: {target_lower}; known targets: "
                       f"{', '.join(TARGETS)}")


def tosa_spec_for_target(target: str) -> TosaSpecification:
    """The TOSA specification ExecuTorch lowers to for an Ethos-U target."""
    lower = target.lower()
    spec = "TOSA-1.0+INT+int16+int4"
    if "u55" in lower or "u65" in lower:
        spec += "+u55"
    if "u85" in lower:
        spec += "+cf"
    return TosaSpecification.create_from_string(spec)


class EthosUCompileSpec(ArmCompileSpec):
    """Compile spec for an Ethos-U NPU (``ethos-u55-128``, ``ethos-u85-256``, ...)."""

    _TARGET_KEY = "target"
    _EXTERNAL_BLOCK_PLACEMENTS_KEY = "external_block_placements"

    def __init__(self, target: str, system_config: str | None = None,
                 memory_mode: str | None = None, extra_flags: list[str] | None = None,
                 config_ini: str | None = "Arm/vela.ini",
                 external_block_placements: VelaExternalBlockPlacements | None = None) -> None:
        self.target = target
        self.external_block_placements = external_block_placements or VelaExternalBlockPlacements()
        default_config, default_mode = _defaults(target.lower())
        flags = list(extra_flags or []) + [
            f"--accelerator-config={target}",
            f"--config={config_ini or 'Arm/vela.ini'}",
            "--output-format=raw",
            f"--system-config={system_config or default_config}",
            f"--memory-mode={memory_mode or default_mode}",
        ]
        self._set_compile_specs(tosa_spec_for_target(target), flags)
        self._validate()

    def _to_list(self) -> list[CompileSpec]:
        specs = super()._to_list()
        specs.append(CompileSpec(self._TARGET_KEY, self.target.encode()))
        placements = self.external_block_placements.to_block_placements()
        if placements:
            specs.append(CompileSpec(self._EXTERNAL_BLOCK_PLACEMENTS_KEY,
                                     json.dumps(placements, sort_keys=True,
                                                separators=(",", ":")).encode()))
        return specs

    @classmethod
    def _from_list_hook(cls, compile_spec: ArmCompileSpec, specs: dict[str, str]) -> None:
        assert isinstance(compile_spec, EthosUCompileSpec)
        compile_spec.target = specs.get(cls._TARGET_KEY)  # type: ignore[assignment]
        raw = specs.get(cls._EXTERNAL_BLOCK_PLACEMENTS_KEY)
        placements = json.loads(raw) if raw is not None else {}
        if not isinstance(placements, dict):
            raise ValueError("External Vela block placements must be a mapping.")
        unknown = sorted(set(placements) - set(EXTERNABLE_BLOCKS))
        if unknown:
            raise ValueError(f"Unsupported external Vela blocks: {unknown}")
        compile_spec.external_block_placements = VelaExternalBlockPlacements(**placements)

    def _validate(self) -> None:
        if not self.compiler_flags:
            raise ValueError("compile_flags are required in the CompileSpec list for EthosUBackend")
        if self.target is not None and "u55" in self.target.lower() \
                and not self.tosa_spec.is_U55_subset:
            raise ValueError(f"Target was {self.target} but tosa spec was not u55 subset.")

    @classmethod
    def _get_output_format(cls) -> str:
        return "vela"

    @property
    def system_config(self) -> str | None:
        return self._flag("--system-config=")

    @property
    def memory_mode(self) -> str | None:
        return self._flag("--memory-mode=")

    def _flag(self, prefix: str) -> str | None:
        values = [f[len(prefix):] for f in self.compiler_flags if f.startswith(prefix)]
        return values[-1] if values else None
