"""``LlmConfig``: the subset of ExecuTorch 1.5.1's ``LlmConfig`` sections that edgetorch's
``export_llm`` honours, with ExecuTorch's field names and defaults.

Settings are given as ExecuTorch's dotted overrides (``model.use_kv_cache=True``) or a YAML
file of the same sections; an unknown section or field is an error that lists the known ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .....errors import ExportError


@dataclass
class BaseConfig:
    model_class: str = "llama3"  # every llama-family class builds the same decoder
    params: str | None = None  # Meta params.json (with a .pth checkpoint)
    checkpoint: str | None = None  # .pth / .pt state dict, or a .gguf file
    tokenizer_path: str | None = None
    metadata: str | None = None  # JSON, e.g. '{"get_bos_id": 1, "get_eos_ids": [2]}'


@dataclass
class ModelConfig:
    dtype_override: str = "fp32"
    enable_dynamic_shape: bool = True
    use_sdpa_with_kv_cache: bool = False
    use_kv_cache: bool = False


@dataclass
class ExportConfig:
    max_seq_length: int = 128
    max_context_length: int = 128
    output_dir: str = "."
    output_name: str | None = None


@dataclass
class DebugConfig:
    verbose: bool = False


@dataclass
class QuantizationConfig:
    qmode: str | None = None  # "8da4w" or "int8"
    embedding_quantize: str | None = None  # "<bits>,<group size>", e.g. "4,32" or "8,0"
    group_size: int | None = None
    use_hqq: bool = True


@dataclass
class XNNPackConfig:
    enabled: bool = False
    extended_ops: bool = False


@dataclass
class BackendConfig:
    xnnpack: XNNPackConfig = field(default_factory=XNNPackConfig)


@dataclass
class LlmConfig:
    base: BaseConfig = field(default_factory=BaseConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
    quantization: QuantizationConfig = field(default_factory=QuantizationConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)

    def set(self, dotted: str, value: Any) -> None:
        """Set ``section.field`` (``backend.xnnpack.enabled``) from a string or a value."""
        *path, name = dotted.split(".")
        target: Any = self
        for part in path:
            target = _child(target, part, dotted)
        fields = {f.name: f for f in dataclasses.fields(target)}
        if name not in fields:
            raise ExportError(f"LlmConfig has no field {dotted!r}; "
                              f"{'.'.join(path) or 'LlmConfig'} has: {', '.join(fields)}")
        setattr(target, name, _coerce(value, getattr(target, name), fields[name].type, dotted))

    def update(self, values: dict[str, Any], prefix: str = "") -> None:
        """Apply a nested dict (a parsed YAML file)."""
        for key, value in values.items():
            if isinstance(value, dict):
                self.update(value, f"{prefix}{key}.")
            else:
                self.set(prefix + key, value)

    @classmethod
    def from_args(cls, overrides: list[str], yaml_path: str | None = None) -> LlmConfig:
        cfg = cls()
        if yaml_path is not None:
            import yaml

            with open(yaml_path) as f:
                cfg.update(yaml.safe_load(f) or {})
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ExportError(f"expected section.field=value, got {item!r}")
            cfg.set(key.lstrip("+"), value)
        return cfg


def _child(obj: Any, part: str, dotted: str) -> Any:
    names = [f.name for f in dataclasses.fields(obj)]
    if part not in names or not dataclasses.is_dataclass(getattr(obj, part)):
        raise ExportError(f"LlmConfig has no section {dotted!r}; known: {', '.join(names)}")
    return getattr(obj, part)


def _coerce(value: Any, current: Any, annotation: Any, dotted: str) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip().strip("'\"")
    if text.lower() in ("none", "null"):
        return None
    kind = type(current) if current is not None else (int if "int" in str(annotation) else str)
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ExportError(f"{dotted} must be True or False, got {value!r}")
        return text.lower() in ("true", "1")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ExportError(f"{dotted} must be an integer, got {value!r}") from None
    return text
