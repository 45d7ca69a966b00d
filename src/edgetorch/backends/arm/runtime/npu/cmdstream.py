"""Vela's register command stream: the ``COP1`` driver payload and its cmd0/cmd1 words.

``cmd_data`` (the delegate blob's block) is a driver payload (Vela's ``driver_actions.py``):
the fourcc ``COP1``, then driver actions -- each a u32 tag (id in bits 0-7, a reserved byte, a
16-bit parameter): ``Config`` (followed by the NPU CONFIG and ID register words), ``NOP``
(padding so the stream starts 16-byte aligned) and ``CmdStream`` (its length in words in the
parameter, high byte in the reserved byte) followed by the register command stream itself.

A register command is a little-endian u32: opcode in bits 0-9, bits 14-15 say whether one
32-bit payload word follows (cmd1) or not (cmd0), the 16-bit parameter in bits 16-31. Opcode
names come from Vela's register definitions (``ethosu.vela.ethos_u55_regs``), so this module
needs the ``ethos-u-vela`` package of the ``edgetorch[arm]`` extra for names only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache

from .....errors import InvalidProgramError, OperatorMissingError

FOURCCS = ("COP1", "COP2")
DA_RESERVED, DA_CONFIG, DA_CMDSTREAM, DA_READ_APB, DA_DUMP_SHRAM, DA_NOP = range(6)
CMD1_FLAG = 0x4000  # bit 14: one payload word follows


@lru_cache(maxsize=1)
def register_names() -> tuple[dict[int, str], dict[int, str]]:
    """``(cmd0 opcode -> name, cmd1 opcode -> name)`` from Vela's Ethos-U55/U65 definitions."""
    try:
        from ethosu.vela.ethos_u55_regs import ethos_u55_regs as regs
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise OperatorMissingError(
            "Ethos-U command stream: the register definitions come from the ethos-u-vela "
            f"package, which is not importable ({exc}); install it with "
            "`pip install 'edgetorch[arm]'`") from exc
    return ({m.value: m.name for m in regs.cmd0}, {m.value: m.name for m in regs.cmd1})


@dataclass(frozen=True)
class Command:
    """One register command: ``offset`` is its byte offset in the register command stream."""

    offset: int
    code: int
    param: int
    data: int | None  # the payload word of a cmd1 command
    name: str

    @property
    def word(self) -> int:
        return self.code | (CMD1_FLAG if self.data is not None else 0) | (self.param << 16)


@dataclass
class DriverPayload:
    """The ``cmd_data`` block: the driver actions and the register commands they carry."""

    fourcc: str
    config: int | None = None  # the NPU CONFIG register value Vela compiled for
    npu_id: int | None = None
    commands: list[Command] = field(default_factory=list)
    stream_words: int = 0

    @property
    def macs_per_cc(self) -> int | None:
        return None if self.config is None else 1 << (self.config & 0xF)

    @property
    def product(self) -> str:
        if self.config is None:
            return "?"
        return {0: "Ethos-U55", 1: "Ethos-U65"}.get(self.config >> 28, f"product {self.config >> 28}")

    @property
    def shram_kb(self) -> int | None:
        return None if self.config is None else (self.config >> 8) & 0xFF


def decode_commands(words: list[int] | tuple[int, ...]) -> list[Command]:
    """Decode a register command stream (u32 words) into commands."""
    names0, names1 = register_names()
    out, k = [], 0
    while k < len(words):
        w = words[k]
        code, param = w & 0x3FF, w >> 16
        if w & CMD1_FLAG:
            if k + 1 >= len(words):
                raise InvalidProgramError(
                    f"Ethos-U command stream: cmd1 word 0x{w:08x} at byte {4 * k} has no payload "
                    "word (the stream is truncated); re-export the model")
            name = names1.get(code, f"UNKNOWN_CMD1_0x{code:03x}")
            out.append(Command(4 * k, code, param, words[k + 1], name))
            k += 2
        else:
            out.append(Command(4 * k, code, param, None, names0.get(code, f"UNKNOWN_CMD0_0x{code:03x}")))
            k += 1
    return out


def parse_driver_payload(cmd_data: bytes) -> DriverPayload:
    """Parse the ``cmd_data`` block (``COP1``) into its config words and register commands."""
    if len(cmd_data) < 4 or len(cmd_data) % 4:
        raise InvalidProgramError(
            f"Ethos-U command stream: cmd_data of {len(cmd_data)} bytes is not a sequence of "
            "32-bit words; the blob is corrupt, re-export the model")
    words = struct.unpack(f"<{len(cmd_data) // 4}I", cmd_data)
    fourcc = cmd_data[:4].decode("ascii", "replace")
    if fourcc not in FOURCCS:
        raise InvalidProgramError(
            f"Ethos-U command stream: cmd_data starts with {cmd_data[:4]!r}, expected one of "
            f"{FOURCCS}; this is not Vela's driver payload")
    payload = DriverPayload(fourcc)
    k = 1
    while k < len(words):
        tag = words[k]
        action, reserved, param = tag & 0xFF, (tag >> 8) & 0xFF, tag >> 16
        k += 1
        if action == DA_CONFIG:
            payload.config, payload.npu_id = words[k], words[k + 1]
            k += 2
        elif action == DA_CMDSTREAM:
            length = (reserved << 16) | param
            if k + length > len(words):
                raise InvalidProgramError(
                    f"Ethos-U command stream: the stream claims {length} words, only "
                    f"{len(words) - k} follow; the blob is corrupt, re-export the model")
            payload.commands.extend(decode_commands(words[k:k + length]))
            payload.stream_words += length
            k += length
        elif action in (DA_NOP, DA_RESERVED, DA_DUMP_SHRAM, DA_READ_APB):
            continue
        else:
            raise InvalidProgramError(
                f"Ethos-U command stream: unknown driver action {action} (tag 0x{tag:08x}) at "
                f"word {k - 1}; is this a newer Vela's output?")
    return payload
