"""``ArmPassPipelineConfig``: knobs of ExecuTorch's Arm pass pipeline, stored in the ``.pte``.

Only its serialised form matters to edgetorch: a non-default config (U55/U65 use the STABLE
softmax) is written as the ``transform_pipeline_config`` compile spec, JSON with ExecuTorch's
field order, so our compile specs are byte-equal to ExecuTorch's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class SoftmaxDecompositionConfig(Enum):
    MASKED = 1
    STABLE = 2


class LeakyReLULoweringConfig(Enum):
    TABLE = 1
    DECOMPOSE = 2


class SDPASafeSoftmaxGuardPolicy(Enum):
    PRESERVE = 1
    REMOVE = 2
    REMOVE_WHEN_PROVEN = 3


@dataclass
class QuantizeInfConfig:
    """Finite stand-ins for +-inf before quantization."""

    neg_inf: float = -256.0
    pos_inf: float = 255.0


@dataclass
class ArmPassPipelineConfig:
    softmax: SoftmaxDecompositionConfig = SoftmaxDecompositionConfig.MASKED
    leaky_relu: LeakyReLULoweringConfig = LeakyReLULoweringConfig.DECOMPOSE
    quantize_inf: QuantizeInfConfig = field(default_factory=QuantizeInfConfig)
    sdpa_safe_softmax_guard: SDPASafeSoftmaxGuardPolicy = SDPASafeSoftmaxGuardPolicy.PRESERVE

    def is_default(self) -> bool:
        return self == ArmPassPipelineConfig()

    def to_dict(self) -> dict[str, Any]:
        return {"softmax": self.softmax.name, "leaky_relu": self.leaky_relu.name,
                "quantize_inf": asdict(self.quantize_inf),
                "sdpa_safe_softmax_guard": self.sdpa_safe_softmax_guard.name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArmPassPipelineConfig:
        config = cls()
        if "softmax" in data:
            config.softmax = SoftmaxDecompositionConfig[data["softmax"]]
        if "leaky_relu" in data:
            config.leaky_relu = LeakyReLULoweringConfig[data["leaky_relu"]]
        if "quantize_inf" in data:
            config.quantize_inf = QuantizeInfConfig(**data["quantize_inf"])
        if "sdpa_safe_softmax_guard" in data:
            config.sdpa_safe_softmax_guard = SDPASafeSoftmaxGuardPolicy[data["sdpa_safe_softmax_guard"]]
        return config

    def serialize(self) -> bytes:
        return json.dumps(self.to_dict()).encode()
