"""The OpenVINO delegate's compile specs, read the same way at export and at run time.

ExecuTorch 1.5.1 stores ``CompileSpec("device", b"CPU")`` and reads only ``device`` (its
preprocess also passes ``cache_dir`` to OpenVINO's compile helper, where it has no effect).
edgetorch adds ``inference_precision`` (``b"f32"``, ``b"bf16"`` or ``b"f16"``): OpenVINO's CPU
plugin computes in bfloat16 by default on CPUs with AVX512-BF16, which moves MobileNetV2's
outputs by ~4e-2; ``b"f32"`` keeps them within 1e-6 of eager PyTorch. The blob does not
carry the precision (OpenVINO picks it again when it imports the blob), so edgetorch's runtime
applies the spec at import as well. ExecuTorch's runtime ignores keys it does not know: a
``.pte`` carrying it runs there, in the device's default precision.

Torch-free: the runtime half imports this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...errors import InvalidArgumentError

DEVICE = "device"
CACHE_DIR = "cache_dir"
INFERENCE_PRECISION = "inference_precision"
KNOWN_KEYS = (DEVICE, CACHE_DIR, INFERENCE_PRECISION)
PRECISIONS = ("f32", "bf16", "f16")


@dataclass(frozen=True)
class OpenvinoOptions:
    """What the compile specs ask of OpenVINO."""

    device: str = "CPU"
    cache_dir: str | None = None
    inference_precision: str | None = None  # None: the device's default

    def ov_config(self) -> dict[str, str]:
        """OpenVINO properties for ``compile_model`` / ``import_model``."""
        config = {}
        if self.inference_precision is not None:
            config["INFERENCE_PRECISION_HINT"] = self.inference_precision
        if self.cache_dir is not None:
            config["CACHE_DIR"] = self.cache_dir
        return config


def _text(key: str, value: bytes) -> str:
    try:
        # ExecuTorch's runtime strips trailing NULs that some writers include.
        return bytes(value).rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgumentError(
            f"OpenvinoBackend: compile spec {key!r} = {bytes(value)!r} is not UTF-8 text; "
            f"write it as CompileSpec({key!r}, b\"...\")") from None


def parse_options(specs: Mapping[str, bytes] | Iterable, *, strict: bool = False
                  ) -> OpenvinoOptions:
    """Compile specs (a ``{key: bytes}`` dict or ``CompileSpec`` list) -> ``OpenvinoOptions``.

    ``strict`` (export time) refuses keys this backend does not read; at run time unknown
    keys are ignored, as ExecuTorch's runtime does, so programs from newer writers still load.
    """
    items = specs.items() if isinstance(specs, Mapping) else [(s.key, s.value) for s in specs]
    values: dict[str, str] = {}
    for key, raw in items:
        if key not in KNOWN_KEYS:
            if strict:
                raise InvalidArgumentError(
                    f"OpenvinoBackend: unknown compile spec {key!r}; it reads "
                    f"{', '.join(KNOWN_KEYS)}")
            continue
        values[key] = _text(key, raw)
    precision = values.get(INFERENCE_PRECISION)
    if precision is not None and precision not in PRECISIONS:
        raise InvalidArgumentError(
            f"OpenvinoBackend: inference_precision {precision!r} is not one of "
            f"{', '.join(PRECISIONS)}; try CompileSpec('inference_precision', b'f32')")
    device = values.get(DEVICE) or "CPU"
    return OpenvinoOptions(device, values.get(CACHE_DIR) or None, precision)
