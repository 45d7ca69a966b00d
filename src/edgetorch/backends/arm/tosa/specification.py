"""``TosaSpecification``: a TOSA version, its profiles and extensions, parsed from strings.

The string form is ExecuTorch's and is what the ``.pte`` stores in the ``tosa_spec`` compile
spec: ``TOSA-<major>.<minor>[.<patch>]+<PROFILE>[+<PROFILE>][+8k][+<ext>...][+u55]``, e.g.
``TOSA-1.0+INT+int16+int4+u55`` (Ethos-U55/U65) or ``TOSA-1.0+INT+int16+int4+cf`` (U85).
``str()`` gives the same string back (extensions, then ``8k``, then ``u55``). Torch-free: the
runtime reads specs too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Version:
    """A dotted release number; ``str`` drops leading zeros as ``packaging.version`` does."""

    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Version:
        if not re.fullmatch(r"\d+(\.\d+)*", text):
            raise ValueError(f"Malformed TOSA version {text!r}; expected e.g. '1.0'")
        return cls(tuple(int(p) for p in text.split(".")))

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    def __str__(self) -> str:
        return ".".join(map(str, self.parts))


class TosaSpecification:
    """A TOSA target: version, profiles (``INT``, ``FP``), level ``8k`` and extensions.

    Build one with ``TosaSpecification.create_from_string("TOSA-1.0+INT")``. Equality and
    hashing look only at version and profiles, as in ExecuTorch.
    """

    available_profiles = ("INT", "FP")
    valid_extensions: dict[str, tuple[str, ...]] = {}
    _SUPPORTED_VERSIONS = ((1, 0), (1, 1))

    def __init__(self, version: Version, extras: list[str]):
        extras = list(extras)
        self.version = version
        self.is_U55_subset = "u55" in extras
        if self.is_U55_subset:
            extras.remove("u55")
        profiles = [e for e in extras if e in self.available_profiles]
        if not profiles:
            raise ValueError(f"No profile ({list(self.available_profiles)}) found in: {extras}. "
                             "Add '+INT' or '+FP' to the TOSA specification string.")
        if len(profiles) > len(self.available_profiles):
            raise ValueError(f"Too many profiles ({list(self.available_profiles)}) found in: {extras}.")
        self.profiles = profiles
        rest = [e for e in extras if e not in profiles]
        self.level_8k = "8k" in rest
        if self.level_8k:
            rest.remove("8k")
        allowed = {e for p in profiles for e in self.valid_extensions[p]}
        bad = [e for e in rest if e not in allowed]
        if bad:
            raise ValueError(f"Bad extensions for TOSA-{version}{self._profiles_string()}: {rest}; "
                             f"valid extensions for these profiles: {sorted(allowed)}")
        self.extensions = rest

    @staticmethod
    def create_from_string(text: str) -> TosaSpecification:
        """Parse ``TOSA-1.0+INT+int16`` and friends; a malformed string raises ``ValueError``."""
        match = re.fullmatch(r"(TOSA)-([\d.]+)\+(.+)", text)
        if match is None:
            raise ValueError(f"Failed to parse TOSA specification representation: {text}; "
                             "expected e.g. 'TOSA-1.0+INT' or 'TOSA-1.0+INT+int16+int4+u55'")
        version = Version.parse(match.group(2))
        extras = match.group(3).split("+")
        if (version.major, version.minor) == (1, 0):
            return Tosa_1_00(version, extras)
        if (version.major, version.minor) == (1, 1):
            return Tosa_1_1(version, extras)
        raise ValueError(f"Wrong TOSA version: {version} from {text}; supported: 1.0, 1.1")

    def _profiles_string(self) -> str:
        return "".join("+" + p for p in self.profiles)

    def support_integer(self) -> bool:
        return "INT" in self.profiles

    def support_float(self) -> bool:
        return "FP" in self.profiles

    def support_extension(self, extension: str) -> bool:
        return extension in self.extensions and any(
            extension in self.valid_extensions[p] for p in self.profiles)

    def __repr__(self) -> str:
        tail = "".join("+" + e for e in self.extensions)
        if self.level_8k:
            tail += "+8k"
        if self.is_U55_subset:
            tail += "+u55"
        return f"TOSA-{self.version}{self._profiles_string()}{tail}"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TosaSpecification) and self.version == other.version
                and self._profiles_string() == other._profiles_string())

    def __hash__(self) -> int:
        return hash(str(self.version) + self._profiles_string())


class Tosa_1_00(TosaSpecification):  # noqa: N801 - ExecuTorch's class name
    valid_extensions = {
        "INT": ("int16", "int4", "var", "cf", "u55"),
        "FP": ("bf16", "fp8e4m3", "fp8e5m2", "fft", "var", "cf"),
    }


class Tosa_1_1(TosaSpecification):  # noqa: N801 - ExecuTorch's class name
    valid_extensions = {
        "INT": ("shape", "int64", "int16", "int4", "var", "cf", "u55"),
        "FP": ("shape", "int64", "bf16", "fp8e4m3", "fp8e5m2", "fft", "var", "cf", "random",
               "mxfp", "blockscale_ue5m3"),
    }


# ExecuTorch's path for the lowering context (``tosa.specification.TosaLoweringContext``)
from .lowering_context import (  # noqa: E402
    TosaLoweringContext,
    get_context_shape_env,
    get_context_spec,
)

__all__ = ["TosaLoweringContext", "TosaSpecification", "Tosa_1_00", "Tosa_1_1", "Version",
           "get_context_shape_env", "get_context_spec"]
