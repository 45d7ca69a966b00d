"""Decode the weight and scale streams Vela 5.1.0 writes for one Ethos-U55/U65 NPU operation.

The command stream points each NPU_OP_CONV / NPU_OP_DEPTHWISE at its weights
(``WEIGHT_BASE``/``WEIGHT_LENGTH``, plus ``WEIGHT1_*`` for the second core of a dual-core
config) and its per-channel scales (``SCALE_BASE``/``SCALE_LENGTH``, ``SCALE1_*``).

Weights: Vela subtracts the weight zero point, splits the OFM channels between the cores
(core ``c`` gets channels ``c, c + cores, ...``), puts each core's share in the order the MAC
array consumes it (OFM block -> IFM block -> 8x8 sub-kernel -> micro-blocks; the loop nest is in
``layout.py``) and compresses it with the MLW codec. We decompress with ``ethosu.mlw_codec``
(from the ``edgetorch[arm]`` extra) and scatter the values back through the same loop nest.

Scales: per output channel a 10-byte entry: int40 bias, u32 scale, 6-bit shift (little endian).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .....errors import BackendNotFoundError, InvalidArgumentError, InvalidProgramError
from .layout import NpuConfig, npu_config, stream_order
from .layout_u85 import (
    U85Config,
    fast_block_size,
    interleave_fast,
    stream_order_u85,
    u85_config,
    ublock_depth,
)

__all__ = ["KernelInfo", "NpuConfig", "ScaleBias", "acc_format_u85", "decode_operation", "decode_scales",
           "decode_weights", "kernel_from_registers", "npu_config", "weight_format_u85"]

SCALE_ENTRY_BYTES = 10
_INSTALL_HINT = ("install the Arm extra: pip install 'edgetorch[arm]' (ethos-u-vela==5.1.0, "
                 "which needs numpy<2.2), or run from a venv that has it (make test-arm)")


def _mlw_codec():
    try:
        return importlib.import_module("ethosu.mlw_codec")
    except ImportError as exc:
        raise BackendNotFoundError(
            f"decoding Ethos-U weights needs ethos-u-vela's 'ethosu.mlw_codec', which cannot be "
            f"imported ({exc}); {_INSTALL_HINT}") from exc


@dataclass(frozen=True)
class KernelInfo:
    """The kernel of an NPU operation as the U55/U65 kernel registers describe it."""

    height: int  # undilated, as Vela encodes the weights
    width: int
    stride: tuple[int, int]  # (y, x)
    dilation: tuple[int, int]  # (y, x)
    part_kernel_first: bool  # weight traversal order


def kernel_from_registers(height_m1: int, width_m1: int, kernel_stride: int) -> KernelInfo:
    """``NPU_SET_KERNEL_HEIGHT_M1``, ``NPU_SET_KERNEL_WIDTH_M1`` and ``NPU_SET_KERNEL_STRIDE``
    (U55/U65 bit layout: stride low bits 0-1, part-kernel-first 2, dilation 3-4, stride
    extension 6-8 (x) and 9-11 (y)) -> the undilated kernel. The size registers hold
    ``dilation * (k - 1)``."""
    dx = ((kernel_stride >> 3) & 1) + 1
    dy = ((kernel_stride >> 4) & 1) + 1
    sx = ((kernel_stride & 1) | (((kernel_stride >> 6) & 7) << 1)) + 1
    sy = (((kernel_stride >> 1) & 1) | (((kernel_stride >> 9) & 7) << 1)) + 1
    if height_m1 % dy or width_m1 % dx:
        raise InvalidProgramError(
            f"Ethos-U kernel registers: KERNEL_HEIGHT_M1={height_m1}/WIDTH_M1={width_m1} are not "
            f"multiples of the dilation ({dy}, {dx}) in KERNEL_STRIDE=0x{kernel_stride:x}; the "
            "command stream is corrupt or not from a U55/U65 compiler")
    return KernelInfo(height_m1 // dy + 1, width_m1 // dx + 1, (sy, sx), (dy, dx),
                      bool((kernel_stride >> 2) & 1))


_MICROBLOCKS = ((1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (4, 4))


def acc_format_u85(param: int) -> tuple[bool, tuple[int, int]]:
    """``NPU_SET_ACC_FORMAT`` (U85) -> (48-bit accumulator, OFM micro-block (height, width)):
    bits 0-1 the accumulator (0 = I32, 1 = I48), bits 8-10 the micro-block (U1X1, U1X2,
    U1X4, U2X2, U2X4, U4X4), as Vela's register listing decodes them."""
    index = (param >> 8) & 7
    if index >= len(_MICROBLOCKS):
        raise InvalidProgramError(f"Ethos-U85 ACC_FORMAT=0x{param:x} names micro-block {index}; "
                                  "known are 0-5; the command stream is corrupt")
    return (param & 3) == 1, _MICROBLOCKS[index]


def weight_format_u85(param: int) -> tuple[bool, bool]:
    """``NPU_SET_WEIGHT_FORMAT`` (U85) -> (fast weight format, sparse): bit 0 is FWD; any other
    bit set means a sparsity mode (not decoded here)."""
    return bool(param & 1), bool(param & 0xFFFE)


def _streams(streams: bytes | bytearray | memoryview | Sequence) -> list[bytes]:
    if isinstance(streams, (bytes, bytearray, memoryview)):
        return [bytes(streams)]
    return [bytes(s) for s in streams]


def decode_weights(streams, *, accelerator: str, ofm_depth: int, ifm_depth: int, kernel_h: int,
                   kernel_w: int, depthwise: bool, part_kernel_first: bool,
                   ofm_block_depth: int, ifm_bits: int = 8,
                   dilation: tuple[int, int] = (1, 1), stride: tuple[int, int] = (1, 1),
                   ofm_ublock: tuple[int, int] | None = None, fast: bool = False,
                   sparse: bool = False) -> np.ndarray:
    """The weights of one NPU operation as int32 OHWI ``[ofm_depth, kh, kw, ifm_depth]``
    (depthwise: ``[channels, kh, kw, 1]``), zero point already subtracted.

    ``streams`` is the bytes of ``WEIGHT_BASE/LENGTH`` or a list indexed by core
    (``[WEIGHT, WEIGHT1, ...]``); the other arguments are the operation's registers (see
    ``NPU_API_NOTES.md``). U85 only: ``stride``, ``ofm_ublock`` (the ACC_FORMAT microblock as
    (height, width)), ``fast`` (WEIGHT_FORMAT is FWD) and ``sparse`` (2:4 sparsity)."""
    u85 = u85_config(accelerator)
    if u85 is not None:
        return _decode_u85(_streams(streams), u85, ofm_depth, ifm_depth, kernel_h, kernel_w,
                           depthwise, part_kernel_first, ofm_block_depth, ifm_bits,
                           tuple(dilation), tuple(stride), ofm_ublock, fast, sparse)
    cfg = npu_config(accelerator)
    data = _streams(streams)
    _check_common(depthwise, part_kernel_first, ifm_bits, dilation)
    in_depth = 1 if depthwise else ifm_depth
    out = np.zeros((ofm_depth, kernel_h, kernel_w, in_depth), np.int32)
    flat = out.reshape(-1)
    used = min(cfg.cores, ofm_depth)
    if len(data) < used:
        raise InvalidArgumentError(
            f"Ethos-U weights for {ofm_depth} OFM channels on {cfg.name} need {used} streams "
            f"(one per core), got {len(data)}; pass [WEIGHT_BASE bytes, WEIGHT1_BASE bytes]")
    codec = _mlw_codec()
    for core in range(used):
        core_depth = (ofm_depth + cfg.cores - 1 - core) // cfg.cores
        core_block = (ofm_block_depth + cfg.cores - 1 - core) // cfg.cores
        order = stream_order(cfg, core_depth, in_depth, kernel_h, kernel_w, core_block,
                             depthwise, part_kernel_first, ifm_bits, tuple(dilation))
        values = np.asarray(codec.decode(bytearray(data[core])), np.int32)
        if values.size < order.size:
            raise InvalidProgramError(
                f"Ethos-U weight stream of core {core} decodes to {values.size} values but the "
                f"operation (OFM {ofm_depth}, IFM {in_depth}, kernel {kernel_h}x{kernel_w}, OFM "
                f"block depth {ofm_block_depth}, {accelerator}) needs {order.size}; check the "
                "registers passed in and the WEIGHT_BASE/LENGTH range")
        valid = order >= 0
        # The stream's indices are within this core's channels; map them to the full OFM.
        per_channel = kernel_h * kernel_w * in_depth
        src = order[valid]
        channel, rest = np.divmod(src, per_channel)
        flat[(channel * cfg.cores + core) * per_channel + rest] = values[:order.size][valid]
    return out


def _check_common(depthwise, part_kernel_first, ifm_bits, dilation):
    if depthwise and part_kernel_first:
        raise InvalidProgramError("Ethos-U depthwise operation with part-kernel-first weight "
                                  "order: Vela never emits this; the command stream is corrupt")
    if ifm_bits not in (8, 16):
        raise InvalidArgumentError(f"Ethos-U weights: IFM precision of {ifm_bits} bits; the MAC "
                                   "array takes 8- or 16-bit IFMs (pass ifm_bits=8 or 16)")
    if dilation[0] not in (1, 2) or dilation[1] not in (1, 2):
        raise InvalidArgumentError(f"Ethos-U weights: dilation {dilation}; the hardware supports "
                                   "1 or 2 per axis (Vela rewrites larger dilations)")


def _decode_fwd(data: bytes, count: int) -> np.ndarray:
    """Regor's fast-weight (FWD) format: a 256-bit header (raw flag, 2-entry-LUT flag, 102
    reserved bits, 8-bit zero adjust, 16 LUT entries of 9 bits, sign in the lowest bit) then
    2-bit LUT indices, 8-bit raw values (minus the zero adjust) or 4-bit LUT indices; bits
    are filled from each byte's least significant bit."""
    bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little").astype(np.int64)
    if bits.size < 256:
        raise InvalidProgramError(f"Ethos-U85 fast weight stream of {len(data)} bytes is shorter "
                                  "than its 32-byte header; check WEIGHT_BASE/WEIGHT_LENGTH")

    def fields(start: int, width: int, n: int) -> np.ndarray:
        chunk = bits[start:start + width * n]
        if chunk.size < width * n:
            raise InvalidProgramError(f"Ethos-U85 fast weight stream of {len(data)} bytes holds "
                                      f"fewer than the {count} weights the operation needs")
        return chunk.reshape(n, width) @ (1 << np.arange(width))

    zero_adjust = int(fields(104, 8, 1)[0])
    zero_adjust -= 256 if zero_adjust >= 128 else 0
    folded = fields(112, 9, 16)
    lut = np.where(folded & 1, -(folded >> 1), folded >> 1)
    if bits[0]:  # raw
        raw = fields(256, 8, count)
        return np.where(raw >= 128, raw - 256, raw) - zero_adjust
    return lut[fields(256, 2 if bits[1] else 4, count)]


def _decode_u85(data, cfg: U85Config, ofm_depth, ifm_depth, kernel_h, kernel_w, depthwise,
                part_kernel_first, ofm_block_depth, ifm_bits, dilation, stride, ofm_ublock, fast,
                sparse) -> np.ndarray:
    _check_common(depthwise, part_kernel_first, ifm_bits, dilation)
    if sparse:
        raise InvalidArgumentError(f"{cfg.name}: 2:4 sparse weights (WEIGHT_FORMAT sparsity) are "
                                   "not decoded yet; compile without sparsity")
    if ofm_ublock is None:
        raise InvalidArgumentError(f"{cfg.name} weights need ofm_ublock=(height, width), the "
                                   "microblock of NPU_SET_ACC_FORMAT")
    ub_depth = ublock_depth(cfg, ofm_ublock)
    traversal = "depthwise" if depthwise else "part_kernel" if part_kernel_first else "depth_first"
    in_depth = 1 if depthwise else ifm_depth
    orders = [stream_order_u85(cfg, k, cfg.cores, ofm_depth, in_depth, kernel_h, kernel_w,
                               ofm_block_depth, ub_depth, traversal, ifm_bits, dilation, stride)
              for k in range(cfg.cores)]
    if fast and cfg.cores > 1:  # one stream: the decoders' orders interleaved
        orders = [interleave_fast(orders, fast_block_size(cfg, traversal, ifm_bits, ub_depth))]
    if len(data) < len(orders):
        raise InvalidArgumentError(
            f"Ethos-U85 weights on {cfg.name} need {len(orders)} streams (one per weight "
            f"decoder{'' if not fast else ', fast format: one'}), got {len(data)}")
    out = np.zeros((ofm_depth, kernel_h, kernel_w, in_depth), np.int32)
    flat = out.reshape(-1)
    for k, order in enumerate(orders):
        if fast:
            values = _decode_fwd(data[k], order.size)
        else:
            values = np.asarray(_mlw_codec().decode(bytearray(data[k])), np.int64)
            if values.size < order.size:
                raise InvalidProgramError(
                    f"Ethos-U85 weight stream {k} decodes to {values.size} values; the operation "
                    f"(OFM {ofm_depth}, IFM {in_depth}, kernel {kernel_h}x{kernel_w}, block depth "
                    f"{ofm_block_depth}, {cfg.name}) needs {order.size}; check the registers")
        valid = order >= 0
        flat[order[valid]] = values[:order.size][valid]
    return out


class ScaleBias(NamedTuple):
    """Per OFM channel: ``acc + bias`` is scaled by ``scale / 2**shift`` (hardware rounding)."""

    bias: np.ndarray  # int64, a signed 40-bit value
    scale: np.ndarray  # int64 holding the unsigned 32-bit value
    shift: np.ndarray  # int64, 0..63


def _le(raw: np.ndarray, start: int, width: int, signed: bool) -> np.ndarray:
    value = sum(raw[:, start + k] << (8 * k) for k in range(width))
    top = 1 << (8 * width - 1)
    return np.where(value >= top, value - 2 * top, value) if signed else value


def _decode_entries(data: bytes, count: int, layout: str) -> ScaleBias:
    """``layout``: "u55" (int40 bias, u32 scale, shift), "u85_acc32" (int32 bias, u31 scale,
    shift) or "u85_acc48" (int48 bias, u15 scale, shift); 10 bytes each."""
    raw = np.frombuffer(data[:count * SCALE_ENTRY_BYTES], np.uint8).reshape(count, 10)
    raw = raw.astype(np.int64)
    if layout == "u55":
        return ScaleBias(_le(raw, 0, 5, True), _le(raw, 5, 4, False), raw[:, 9] & 0x3F)
    if layout == "u85_acc32":
        return ScaleBias(_le(raw, 0, 4, True), _le(raw, 4, 4, False) & 0x7FFFFFFF,
                         raw[:, 8] & 0x3F)
    return ScaleBias(_le(raw, 0, 6, True), _le(raw, 6, 2, False) & 0x7FFF, raw[:, 8] & 0x3F)


def decode_scales(streams, *, ofm_depth: int, accelerator: str = "ethos-u55-128",
                  acc48: bool = False) -> ScaleBias:
    """The bias/scale/shift of each of the operation's ``ofm_depth`` channels, in OFM order.
    ``streams``: ``SCALE_BASE/LENGTH`` bytes or ``[SCALE, SCALE1]`` per core (U55/U65; a U85
    has one scale stream). U85: ``acc48`` when ACC_FORMAT is I48 (16-bit IFMs)."""
    data = _streams(streams)
    if u85_config(accelerator) is not None:
        if not data or len(data[0]) < ofm_depth * SCALE_ENTRY_BYTES:
            raise InvalidProgramError(
                f"Ethos-U85 scale stream has {len(data[0]) if data else 0} bytes; {ofm_depth} OFM "
                f"channels need {ofm_depth} entries of {SCALE_ENTRY_BYTES} bytes; check "
                "SCALE_BASE/SCALE_LENGTH and the OFM depth")
        return _decode_entries(data[0], ofm_depth, "u85_acc48" if acc48 else "u85_acc32")
    cfg = npu_config(accelerator)
    bias, scale, shift = (np.zeros(ofm_depth, np.int64) for _ in range(3))
    for core in range(min(cfg.cores, ofm_depth)):
        count = (ofm_depth + cfg.cores - 1 - core) // cfg.cores
        if core >= len(data) or len(data[core]) < count * SCALE_ENTRY_BYTES:
            have = len(data[core]) if core < len(data) else 0
            raise InvalidProgramError(
                f"Ethos-U scale stream of core {core} has {have} bytes; {ofm_depth} OFM channels "
                f"on {cfg.name} need {count} entries of {SCALE_ENTRY_BYTES} bytes; check "
                "SCALE_BASE/SCALE_LENGTH (SCALE1_* for core 1) and the OFM depth")
        entries = _decode_entries(data[core], count, "u55")
        bias[core::cfg.cores], scale[core::cfg.cores], shift[core::cfg.cores] = entries
    return ScaleBias(bias, scale, shift)


def decode_operation(reg, read, *, accelerator: str,
                     depthwise: bool) -> tuple[np.ndarray, ScaleBias]:
    """Weights and scales of the NPU_OP_CONV / NPU_OP_DEPTHWISE about to run, straight from
    the register file: ``reg(name)`` returns a register's value (Vela's command names, e.g.
    ``"NPU_SET_OFM_DEPTH_M1"``; 0 when never written) and ``read(region, address, length)``
    the bytes of a memory region. Works for U55, U65 and U85."""
    k = kernel_from_registers(reg("NPU_SET_KERNEL_HEIGHT_M1"), reg("NPU_SET_KERNEL_WIDTH_M1"),
                              reg("NPU_SET_KERNEL_STRIDE"))
    ofm_depth = reg("NPU_SET_OFM_DEPTH_M1") + 1
    precision = (reg("NPU_SET_IFM_PRECISION") >> 2) & 3
    if precision > 1:
        raise InvalidProgramError(f"Ethos-U convolution with IFM_PRECISION "
                                  f"0x{reg('NPU_SET_IFM_PRECISION'):x}: only 8- and 16-bit IFMs "
                                  "feed the MAC array; the command stream is corrupt")
    u85 = u85_config(accelerator)
    cores = u85.cores if u85 else npu_config(accelerator).cores
    extra: dict = {}
    scale_kw: dict = {}
    if u85:
        acc48, ublock = acc_format_u85(reg("NPU_SET_ACC_FORMAT"))
        fast, sparse = weight_format_u85(reg("NPU_SET_WEIGHT_FORMAT"))
        extra = dict(stride=k.stride, ofm_ublock=ublock, fast=fast, sparse=sparse)
        scale_kw = dict(acc48=acc48)
        weight_cores, scale_cores = (1 if fast else cores), 1
    else:
        weight_cores = scale_cores = cores

    def streams(kind: str, count: int) -> list[bytes]:
        region = reg(f"NPU_SET_{kind}_REGION") & 0x7F
        names = [f"NPU_SET_{kind}{'' if n == 0 else n}" for n in range(count)]
        return [read(region, reg(f"{name}_BASE"), reg(f"{name}_LENGTH")) for name in names]

    weights = decode_weights(
        streams("WEIGHT", weight_cores), accelerator=accelerator, ofm_depth=ofm_depth,
        ifm_depth=reg("NPU_SET_IFM_DEPTH_M1") + 1, kernel_h=k.height, kernel_w=k.width,
        depthwise=depthwise, part_kernel_first=k.part_kernel_first,
        ofm_block_depth=reg("NPU_SET_OFM_BLK_DEPTH_M1") + 1, ifm_bits=16 if precision else 8,
        dilation=k.dilation, **extra)
    scales = decode_scales(streams("SCALE", scale_cores), ofm_depth=ofm_depth,
                           accelerator=accelerator, **scale_kw)
    return weights, scales
