"""``ArmCompileSpec``: the base of ``TosaCompileSpec`` and ``EthosUCompileSpec``.

It turns itself into the list of ``CompileSpec(key, bytes)`` a delegate stores in the ``.pte``,
with ExecuTorch 1.5.1's keys in ExecuTorch's order (``tosa_spec``, ``compile_flags``,
``output_format``, ``debug_artifact_path``, ``dump_debug_info``, ``transform_pipeline_config``,
``preserve_io_quantization``, ``tosa_sw_dev_mode``; subclasses append theirs), and back
(``_from_list``), so the runtime and ExecuTorch read the same bytes.
"""

from __future__ import annotations

import json
import warnings
from abc import ABC, abstractmethod
from enum import Enum

from ....schema.program import CompileSpec
from ..tosa.specification import TosaSpecification
from .pipeline_config import ArmPassPipelineConfig, SoftmaxDecompositionConfig


def _truthy(text: str) -> bool:
    return str(text).lower() in ("1", "true", "yes")


class ArmCompileSpec(ABC):
    """Common fields of the Arm compile specs; ``==`` compares all of them."""

    class DebugMode(Enum):
        JSON = 1
        TOSA = 2

    _TOSA_SPEC_KEY = "tosa_spec"
    _COMPILE_FLAGS_KEY = "compile_flags"
    _OUTPUT_FORMAT_KEY = "output_format"
    _DEBUG_ARTIFACT_KEY = "debug_artifact_path"
    _DEBUG_MODE_KEY = "dump_debug_info"
    _TRANSFORM_PIPELINE_CONFIG_KEY = "transform_pipeline_config"
    _PRESERVE_IO_QUANT_KEY = "preserve_io_quantization"
    _TOSA_DEV_MODE = "tosa_sw_dev_mode"

    tosa_spec: TosaSpecification
    compiler_flags: list[str]
    path_for_intermediates: str | None
    tosa_debug_mode: DebugMode | None
    preserve_io_quantization: bool
    tosa_dev_mode: bool | None
    _pipeline_config: ArmPassPipelineConfig | None

    def _set_compile_specs(self, tosa_spec: TosaSpecification, compiler_flags: list[str],
                           path_for_intermediates: str | None = None,
                           tosa_debug_mode: DebugMode | None = None,
                           pipeline_config: ArmPassPipelineConfig | None = None,
                           preserve_io_quantization: bool = False,
                           tosa_dev_mode: bool | None = None) -> None:
        self.tosa_spec = tosa_spec
        self.compiler_flags = compiler_flags
        self.path_for_intermediates = path_for_intermediates
        self.tosa_debug_mode = tosa_debug_mode
        self._pipeline_config = pipeline_config
        self.preserve_io_quantization = preserve_io_quantization
        self._warn_if_redundant_preserve_io_quantization()
        self.tosa_dev_mode = tosa_dev_mode

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._to_list() == other._to_list()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, like ExecuTorch's dataclass

    def __repr__(self) -> str:
        specs = ", ".join(f"{s.key}={s.value.decode(errors='replace')!r}" for s in self._to_list())
        return f"{type(self).__name__}({specs})"

    @classmethod
    def _from_list(cls, compile_specs: list[CompileSpec]) -> ArmCompileSpec:
        """Rebuild a compile spec from what a ``.pte`` delegate stores."""
        seen: dict[str, str] = {}
        unknown: dict[str, str] = {}
        known = {cls._TOSA_SPEC_KEY, cls._COMPILE_FLAGS_KEY, cls._OUTPUT_FORMAT_KEY,
                 cls._DEBUG_ARTIFACT_KEY, cls._DEBUG_MODE_KEY, cls._TRANSFORM_PIPELINE_CONFIG_KEY,
                 cls._PRESERVE_IO_QUANT_KEY, cls._TOSA_DEV_MODE}
        for spec in compile_specs:
            value = spec.value.decode() if isinstance(spec.value, (bytes, bytearray)) else spec.value
            if spec.key not in known:
                unknown[spec.key] = value
                continue
            if spec.key in seen and spec.key != cls._PRESERVE_IO_QUANT_KEY:
                raise ValueError(f"More than one {spec.key} entry in compile spec.")
            seen[spec.key] = value
        if cls._TOSA_SPEC_KEY not in seen:
            raise ValueError("No tosa_spec in compile spec.")
        output_format = seen.get(cls._OUTPUT_FORMAT_KEY)
        if output_format is None:
            raise ValueError("No output_format in compile spec.")
        if output_format != cls._get_output_format():
            raise ValueError(f"Incorrect output format '{output_format}' for {cls.__name__}, "
                             f"expected '{cls._get_output_format()}'")
        flags = seen.get(cls._COMPILE_FLAGS_KEY)
        pipeline = seen.get(cls._TRANSFORM_PIPELINE_CONFIG_KEY)
        mode = seen.get(cls._DEBUG_MODE_KEY)
        dev = seen.get(cls._TOSA_DEV_MODE)
        spec_obj = cls.__new__(cls)
        spec_obj._set_compile_specs(
            tosa_spec=TosaSpecification.create_from_string(seen[cls._TOSA_SPEC_KEY]),
            compiler_flags=flags.split(" ") if flags is not None else [],
            path_for_intermediates=seen.get(cls._DEBUG_ARTIFACT_KEY),
            tosa_debug_mode=ArmCompileSpec.DebugMode[mode] if mode is not None else None,
            pipeline_config=(ArmPassPipelineConfig.from_dict(json.loads(pipeline))
                             if pipeline is not None else None),
            preserve_io_quantization=_truthy(seen.get(cls._PRESERVE_IO_QUANT_KEY, "False")),
            tosa_dev_mode=_truthy(dev) if dev is not None else None)
        cls._from_list_hook(spec_obj, unknown)
        spec_obj._validate()
        return spec_obj

    @classmethod
    def _from_list_hook(cls, compile_spec: ArmCompileSpec, specs: dict[str, str]) -> None:  # noqa: B027
        """Subclasses read their own keys here."""
        return None

    @abstractmethod
    def _validate(self) -> None:
        """Raise ``ValueError`` if the spec is not valid."""

    @classmethod
    @abstractmethod
    def _get_output_format(cls) -> str:
        """``tosa``, ``vela`` or ``vgf``: what the delegate blob is."""

    def _to_list(self) -> list[CompileSpec]:
        """The compile specs, in ExecuTorch's order, as the delegate stores them."""
        specs = [CompileSpec(self._TOSA_SPEC_KEY, str(self.tosa_spec).encode())]
        if self.compiler_flags:
            specs.append(CompileSpec(self._COMPILE_FLAGS_KEY, " ".join(self.compiler_flags).encode()))
        specs.append(CompileSpec(self._OUTPUT_FORMAT_KEY, self._get_output_format().encode()))
        if self.path_for_intermediates is not None:
            specs.append(CompileSpec(self._DEBUG_ARTIFACT_KEY, self.path_for_intermediates.encode()))
        if self.tosa_debug_mode is not None:
            if not self.path_for_intermediates:
                raise ValueError("dump_debug_info() must be used in conjunction with "
                                 "dump_intermediate_artifacts_to()")
            specs.append(CompileSpec(self._DEBUG_MODE_KEY, self.tosa_debug_mode.name.encode()))
        if self._pipeline_config is not None and not self._pipeline_config.is_default():
            specs.append(CompileSpec(self._TRANSFORM_PIPELINE_CONFIG_KEY,
                                     self._pipeline_config.serialize()))
        specs.append(CompileSpec(self._PRESERVE_IO_QUANT_KEY,
                                 str(bool(self.preserve_io_quantization)).encode()))
        if self.tosa_dev_mode is not None:
            specs.append(CompileSpec(self._TOSA_DEV_MODE, str(bool(self.tosa_dev_mode)).encode()))
        return specs

    def _warn_if_redundant_preserve_io_quantization(self) -> None:
        if (self.preserve_io_quantization and self.tosa_spec.support_integer()
                and not self.tosa_spec.support_float()):
            warnings.warn("preserve_io_quantization=True is redundant for INT-only TOSA "
                          "specifications because boundary Q/DQ are already de-tagged.",
                          stacklevel=3)

    def _set_preserve_io_quantization(self, enabled: bool) -> ArmCompileSpec:
        self.preserve_io_quantization = enabled
        self._warn_if_redundant_preserve_io_quantization()
        return self

    def _get_pass_pipeline_config(self) -> ArmPassPipelineConfig:
        """The pipeline config, created on first use -- as in ExecuTorch, the quantizer is what
        first asks, so ``transform_pipeline_config`` appears in ``_to_list()`` only after
        quantizing with this spec."""
        if self._pipeline_config is None:
            self._pipeline_config = self._create_default_pipeline_config()
        return self._pipeline_config

    def set_pass_pipeline_config(self, config: ArmPassPipelineConfig) -> None:
        self._pipeline_config = config

    def _create_default_pipeline_config(self) -> ArmPassPipelineConfig:
        config = ArmPassPipelineConfig()
        if self.tosa_spec.is_U55_subset:
            # U55 cannot run the where/full_like the MASKED softmax decomposes into.
            config.softmax = SoftmaxDecompositionConfig.STABLE
        return config

    def _get_intermediate_path(self) -> str | None:
        return self.path_for_intermediates

    def dump_intermediate_artifacts_to(self, output_path: str | None) -> ArmCompileSpec:
        """Write the ``.tosa`` (and Vela's files) to ``output_path``; the path is stored in the
        ``.pte`` as ``debug_artifact_path`` (our runtime finds the TOSA there)."""
        self.path_for_intermediates = output_path
        return self

    def dump_debug_info(self, debug_mode: DebugMode | None) -> ArmCompileSpec:
        self.tosa_debug_mode = debug_mode
        return self

    def _set_tosa_dev_mode(self, tosa_dev_mode: bool) -> ArmCompileSpec:
        self.tosa_dev_mode = tosa_dev_mode
        return self
