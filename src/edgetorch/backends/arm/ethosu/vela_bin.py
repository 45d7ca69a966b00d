"""The Ethos-U delegate blob ("vela_bin_stream"): what ExecuTorch's Ethos-U backend stores in a
``.pte`` and its runtime (``VelaBinStream.cpp``) reads. Standard library only: both halves use it.

A blob is a sequence of blocks, in this order: ``vela_bin_stream`` (empty), ``cmd_data`` (Vela's
register command stream), ``weight_data``, ``scratch_size`` (``<I``), ``inputs``, ``outputs``,
``vela_end_stream`` (empty). Each block is a 32-byte header ``<16sIB11s`` (name cut to 15 bytes
and NUL-padded, the UNPADDED payload size, an external flag, 11 reserved zero bytes) followed by
the payload zero-padded to a multiple of 16. An external block's payload is the 64 ASCII hex
characters of ``sha256(tag + b"\\0" + payload)``; the payload itself is named data under that key.
``inputs``/``outputs`` are ``<i`` count, then per tensor ``<9i``: Vela's 6-D shape, element size,
byte offset in its region, region index.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from ....errors import InvalidProgramError

BLOCK_HEADER = struct.Struct("<16sIB11s")
IO_ENTRY = struct.Struct("<9i")
ALIGNMENT = 16
STREAM_HEADER = "vela_bin_stream"
STREAM_FOOTER = "vela_end_stream"
BLOCK_ORDER = (STREAM_HEADER, "cmd_data", "weight_data", "scratch_size", "inputs", "outputs",
               STREAM_FOOTER)
EXTERNABLE_BLOCKS = ("cmd_data", "weight_data")  # what ExecuTorch lets a user place outside
EXTERNAL_KEY_LENGTH = 64  # a sha256 hex digest; the runtime refuses any other external size
IO_DIMS = 6


@dataclass(frozen=True)
class VelaIO:
    """One delegate input or output as the NPU sees it: a raw tensor in a memory region."""

    shape: tuple[int, ...]  # 6-D, leading ones
    elem_size: int
    offset: int  # bytes from the start of the region
    region: int  # Vela's region index (1 = the scratch/arena here)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.elem_size


@dataclass(frozen=True)
class ExternalBlock:
    """A block's payload kept outside the blob as named data (``external_block_placements``)."""

    key: str  # sha256 hex digest, the named-data key
    payload: bytes
    placement: str  # the external tag: the ``.ptd`` file's name stem
    alignment: int = ALIGNMENT


@dataclass
class VelaBin:
    """A parsed (or to-be-written) blob. ``external`` names the blocks stored as named data."""

    cmd_data: bytes
    weight_data: bytes
    scratch_size: int
    inputs: list[VelaIO]
    outputs: list[VelaIO]
    external: dict[str, str] = field(default_factory=dict)  # block name -> named-data key

    def __str__(self) -> str:
        def io(items: list[VelaIO]) -> str:
            return ", ".join(f"{list(t.shape)}x{t.elem_size}B@{t.offset}/r{t.region}" for t in items)

        ext = f", external {self.external}" if self.external else ""
        return (f"VelaBin(cmd {len(self.cmd_data)} B, weights {len(self.weight_data)} B, "
                f"scratch {self.scratch_size} B, inputs [{io(self.inputs)}], "
                f"outputs [{io(self.outputs)}]{ext})")


def pack_io(items: list[VelaIO]) -> bytes:
    out = [struct.pack("<i", len(items))]
    for t in items:
        if len(t.shape) != IO_DIMS:
            raise ValueError(f"Vela I/O shapes are {IO_DIMS}-D, got {list(t.shape)}")
        out.append(IO_ENTRY.pack(*t.shape, t.elem_size, t.offset, t.region))
    return b"".join(out)


def _block(name: str, payload: bytes, external: bool) -> bytes:
    header = BLOCK_HEADER.pack(name.encode("utf-8")[:15], len(payload), int(external), bytes(11))
    return header + payload + bytes(-len(payload) % ALIGNMENT)


def external_key(placement: str, payload: bytes) -> str:
    return hashlib.sha256(placement.encode("ascii") + b"\0" + payload).hexdigest()


def write_vela_bin(cmd_data: bytes, weight_data: bytes, scratch_size: int,
                   inputs: list[VelaIO], outputs: list[VelaIO],
                   placements: Mapping[str, str] | None = None
                   ) -> tuple[bytes, list[ExternalBlock]]:
    """The blob ExecuTorch writes, and the external blocks to store as named data."""
    payloads = {STREAM_HEADER: b"", "cmd_data": bytes(cmd_data), "weight_data": bytes(weight_data),
                "scratch_size": struct.pack("<I", scratch_size), "inputs": pack_io(inputs),
                "outputs": pack_io(outputs), STREAM_FOOTER: b""}
    placements = dict(placements or {})
    unknown = sorted(set(placements) - set(EXTERNABLE_BLOCKS))
    if unknown:
        raise ValueError(f"external block placements name unknown blocks {unknown}; "
                         f"only {list(EXTERNABLE_BLOCKS)} can be placed outside the blob")
    blocks, externals = [], []
    for name in BLOCK_ORDER:
        payload = payloads[name]
        tag = placements.get(name)
        if tag is not None:
            key = external_key(tag, payload)
            externals.append(ExternalBlock(key, payload, tag))
            payload = key.encode("ascii")
        blocks.append(_block(name, payload, tag is not None))
    return b"".join(blocks), externals


def _parse_io(data: bytes, what: str) -> list[VelaIO]:
    if len(data) < 4:
        raise InvalidProgramError(f"Ethos-U blob: {what} block of {len(data)} bytes has no count; "
                                  "re-export the model")
    (count,) = struct.unpack_from("<i", data)
    if count < 0 or 4 + count * IO_ENTRY.size != len(data):
        raise InvalidProgramError(
            f"Ethos-U blob: {what} block says {count} tensors but holds {len(data)} bytes "
            f"(expected {4 + max(count, 0) * IO_ENTRY.size}); the blob is corrupt, re-export it")
    items = []
    for k in range(count):
        *shape, elem, offset, region = IO_ENTRY.unpack_from(data, 4 + k * IO_ENTRY.size)
        if min(shape) < 0 or elem <= 0 or offset < 0 or region < 0:
            raise InvalidProgramError(
                f"Ethos-U blob: {what}[{k}] has shape {shape}, element size {elem}, offset "
                f"{offset}, region {region}; negative or zero values are invalid")
        items.append(VelaIO(tuple(shape), elem, offset, region))
    return items


def parse_vela_bin(blob: bytes | memoryview, named_data=None) -> VelaBin:
    """Parse a blob; external blocks are fetched with ``named_data(key)`` when it is given
    (otherwise their payload is left empty and only the key is recorded)."""
    data = bytes(blob)
    pos, seen = 0, {}
    external: dict[str, str] = {}
    while pos < len(data):
        if pos + BLOCK_HEADER.size > len(data):
            raise InvalidProgramError(f"Ethos-U blob: truncated block header at byte {pos} of "
                                      f"{len(data)}; the blob is corrupt, re-export it")
        raw_name, size, flag, _ = BLOCK_HEADER.unpack_from(data, pos)
        name = raw_name.split(b"\0", 1)[0].decode("utf-8", "replace")
        start = pos + BLOCK_HEADER.size
        end = start + size
        if end > len(data):
            raise InvalidProgramError(f"Ethos-U blob: block {name!r} claims {size} bytes but only "
                                      f"{len(data) - start} remain; the blob is corrupt")
        payload = data[start:end]
        if flag:
            if size != EXTERNAL_KEY_LENGTH:
                raise InvalidProgramError(
                    f"Ethos-U blob: external block {name!r} holds {size} bytes, expected a "
                    f"{EXTERNAL_KEY_LENGTH}-character sha256 key")
            key = payload.decode("ascii")
            external[name] = key
            payload = bytes(named_data(key)) if named_data is not None else b""
        seen[name] = payload
        pos = end + (-size % ALIGNMENT)
        if name == STREAM_FOOTER:
            break
    names = list(seen)
    if not names or names[0] != STREAM_HEADER or names[-1] != STREAM_FOOTER:
        raise InvalidProgramError(
            f"Ethos-U blob: blocks {names} do not start with {STREAM_HEADER!r} and end with "
            f"{STREAM_FOOTER!r}; this is not a vela_bin_stream (was it built for EthosUBackend?)")
    missing = [b for b in BLOCK_ORDER if b not in seen]
    if missing:
        raise InvalidProgramError(f"Ethos-U blob: missing blocks {missing} (found {names})")
    if len(seen["scratch_size"]) != 4:
        raise InvalidProgramError("Ethos-U blob: scratch_size block is not 4 bytes")
    return VelaBin(seen["cmd_data"], seen["weight_data"],
                   struct.unpack("<I", seen["scratch_size"])[0],
                   _parse_io(seen["inputs"], "inputs"), _parse_io(seen["outputs"], "outputs"),
                   external)
