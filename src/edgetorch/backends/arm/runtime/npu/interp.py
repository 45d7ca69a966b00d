"""The register-file interpreter: executes an Ethos-U55/U65 register command stream.

Registers are sticky (Vela writes a register only when its value changes), so the interpreter
keeps the whole register file and, at each ``NPU_OP_*``, reads the operation's description from
it: feature maps (``memory.FeatureMap``), kernel, scaling, activation. Operations run in stream
order; waits (``NPU_OP_DMA_WAIT``/``KERNEL_WAIT``) only synchronise hardware units, so in a
sequential simulation they do nothing.

Field layouts of the parameters used here (Ethos-U55/U65 interface; names as Vela prints them):
IFM/IFM2_PRECISION: type bit 0 (signed), precision bits 2-3 (8/16/32/64-bit), format bits 6-7
(NHWC/NHCWB16), scale_mode bits 8-9 (OPA_OPB_16/OPA_32/OPB_32), round_mode bits 14-15.
OFM_PRECISION: type bit 0, precision bits 1-2, format bits 6-7, scale_mode bit 8 (1 = GLOBAL,
0 = PER_CHANNEL), round_mode bits 14-15. ACTIVATION: function bits 0-4 (0 none, 3 tanh,
4 sigmoid, 16-23 LUT), clip range bits 12-15. IFM2_BROADCAST: h/w/c bits 0-2, operand order
bit 6 (IFM2 is operand A), scalar bit 7. DMA0_*_REGION: region bits 0-7, internal bit 8 (SHRAM),
stride mode bits 9-10.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .....errors import InvalidProgramError, OperatorMissingError
from . import ops
from .arith import int_range, lut_s16, scale_round
from .cmdstream import Command, DriverPayload
from .memory import FeatureMap, Memory

POOL_MODES = {0: "max", 1: "average", 2: "reduce_sum"}
ELEMENTWISE_MODES = {0: "mul", 1: "add", 2: "sub", 3: "min", 4: "max", 5: "lrelu", 6: "abs",
                     7: "clz", 8: "shr", 9: "shl"}
_IFM_BITS = {0: 8, 1: 16, 2: 32, 3: 64}
_OFM_BITS = {0: 8, 1: 16, 2: 32, 3: 64}
_CLIP = {2: (0, 255), 3: (-128, 127), 5: (-32768, 32767)}
SHRAM_BYTES = 256 * 1024  # larger than any U55/U65 SHRAM; only LUTs are kept there


def _s16(v: int) -> int:
    return v - 0x10000 if v & 0x8000 else v


@dataclass
class Registers:
    """The register file: cmd0 parameters and cmd1 (parameter, payload) by register name."""

    values: dict[str, tuple[int, int | None]] = field(default_factory=dict)

    def set(self, cmd: Command) -> None:
        self.values[cmd.name] = (cmd.param, cmd.data)

    def _get(self, name: str, default: int | None) -> tuple[int, int | None] | None:
        if name in self.values:
            return self.values[name]
        if default is None:
            raise InvalidProgramError(
                f"Ethos-U command stream: an operation reads {name}, which the stream never "
                "set; the stream is corrupt or from an unsupported compiler")
        return None

    def p(self, name: str, default: int | None = None) -> int:
        got = self._get(name, default)
        return default if got is None else got[0]

    def d(self, name: str, default: int | None = None) -> int:
        got = self._get(name, default)
        if got is None:
            return default
        param, data = got
        return (data or 0) | ((param & 0xFF) << 32)


@dataclass
class RunStats:
    """What a simulation ran: NPU operations by kind, DMA transfers."""

    ops: Counter = field(default_factory=Counter)

    def __str__(self) -> str:
        return ", ".join(f"{k} x{v}" for k, v in sorted(self.ops.items())) or "nothing"


class Interpreter:
    """Runs one command stream over a ``Memory``; ``accelerator`` is e.g. ``ethos-u55-128``."""

    def __init__(self, payload: DriverPayload, accelerator: str) -> None:
        self.payload = payload
        self.accelerator = accelerator
        # U55 and U65 share one architecture (the U65 stream is the U55 one)
        self.u55_family = "u85" not in accelerator

    def run(self, mem: Memory) -> RunStats:
        regs = Registers()
        stats = RunStats()
        self.shram = np.zeros(SHRAM_BYTES, np.uint8)
        # the CONFIG word's SHRAM size counts every core; each core has its own LUT area
        cores = 2 if self.accelerator.endswith("u65-512") else 1
        shram_kb = (self.payload.shram_kb or 48) // cores
        self.lut_base = shram_kb * 1024 - 2048
        for cmd in self.payload.commands:
            name = cmd.name
            if not name.startswith("NPU_OP_"):
                if cmd.code < 0x100 and cmd.data is None:  # an operation nobody named
                    raise OperatorMissingError(
                        f"Ethos-U simulation: unknown operation {name} (param {cmd.param}) at "
                        f"byte {cmd.offset} of the command stream; run the delegate from its "
                        "TOSA graph (backend option 'simulation': 'tosa')")
                regs.set(cmd)
                continue
            if name == "NPU_OP_STOP":
                break
            if name in ("NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK", "NPU_OP_IRQ"):
                continue
            try:
                kind = self._dispatch(name, cmd.param, regs, mem)
            except (InvalidProgramError, OperatorMissingError) as exc:
                raise type(exc)(f"{exc} (at {name} in byte {cmd.offset} of the command "
                                "stream)") from exc
            stats.ops[kind] += 1
        return stats

    # ---- feature maps ------------------------------------------------------------------

    def _fm(self, regs: Registers, prefix: str) -> FeatureMap:
        prec = regs.p(f"NPU_SET_{prefix}_PRECISION")
        if prefix == "OFM":
            bits = _OFM_BITS[(prec >> 1) & 3]
        else:
            bits = _IFM_BITS[(prec >> 2) & 3]
        return FeatureMap(
            region=regs.p(f"NPU_SET_{prefix}_REGION") & 0x7F,
            bases=tuple(regs.d(f"NPU_SET_{prefix}_BASE{k}", 0) for k in range(4)),
            height0=regs.p(f"NPU_SET_{prefix}_HEIGHT0_M1") + 1,
            height1=regs.p(f"NPU_SET_{prefix}_HEIGHT1_M1") + 1,
            width0=regs.p(f"NPU_SET_{prefix}_WIDTH0_M1") + 1,
            stride_x=regs.d(f"NPU_SET_{prefix}_STRIDE_X"),
            stride_y=regs.d(f"NPU_SET_{prefix}_STRIDE_Y"),
            stride_c=regs.d(f"NPU_SET_{prefix}_STRIDE_C"),
            bits=bits, signed=bool(prec & 1), nhcwb16=((prec >> 6) & 3) == 1,
            zero_point=0)

    def _zp(self, regs: Registers, prefix: str, fm: FeatureMap) -> int:
        raw = regs.p(f"NPU_SET_{prefix}_ZERO_POINT", 0)
        # the 16-bit register holds the zero point in the feature map's own signedness
        return _s16(raw) if fm.signed or fm.bits > 8 else raw

    def _ofm_shape(self, regs: Registers) -> tuple[int, int, int]:
        return (regs.p("NPU_SET_OFM_HEIGHT_M1") + 1, regs.p("NPU_SET_OFM_WIDTH_M1") + 1,
                regs.p("NPU_SET_OFM_DEPTH_M1") + 1)

    def _write_ofm(self, regs: Registers, mem: Memory, acc: np.ndarray,
                   scale=None, shift=None) -> None:
        """OFM stage: scale (when given), add the zero point, activation, clip, store."""
        ofm = self._fm(regs, "OFM")
        prec = regs.p("NPU_SET_OFM_PRECISION")
        rounding = (prec >> 14) & 3
        x = acc if scale is None else scale_round(acc, scale, shift, rounding)
        x = x + self._zp(regs, "OFM", ofm)
        act = regs.p("NPU_SET_ACTIVATION", 0)
        func, clip = act & 0x1F, (act >> 12) & 0xF
        lo = _s16(regs.p("NPU_SET_ACTIVATION_MIN", 0x8000))
        hi = _s16(regs.p("NPU_SET_ACTIVATION_MAX", 0x7FFF))
        if 16 <= func <= 23:
            x = self._lut(x, func - 16, ofm)
        elif func != 0:
            raise OperatorMissingError(
                f"Ethos-U simulation: activation function {func} (tanh/sigmoid without a LUT) is "
                "not simulated; Vela emits LUTs for int8/int16 networks")
        bits_lo, bits_hi = _CLIP.get(clip, int_range(ofm.bits, ofm.signed))
        if ofm.bits <= 16:  # the 16-bit clip registers do not bound a 32-bit OFM
            x = np.clip(x, lo, hi)
        x = np.clip(x, bits_lo, bits_hi)
        ofm.write(mem, x)

    def _lut(self, x: np.ndarray, slot: int, ofm: FeatureMap) -> np.ndarray:
        """Table lookup: the LUTs sit in the last 2 KiB of the SHRAM (DMA'd there by the
        stream). 8-bit: 256-byte slots of int8 entries indexed by value + 128. 16-bit: the
        whole area, 512 u32 entries (base in the low half, slope to the next entry in the high
        half) indexed by the top 9 bits of value + 32768 and interpolated over the low 7."""
        if ofm.bits == 8:
            base = self.lut_base + slot * 256
            table = self.shram[base:base + 256].view(np.int8).astype(np.int64)
            return table[np.clip(x, -128, 127) + 128]
        if ofm.bits != 16:
            raise OperatorMissingError(
                f"Ethos-U simulation: lookup tables on {ofm.bits}-bit outputs are not simulated; "
                "run the delegate from its TOSA graph (backend option 'simulation': 'tosa')")
        return lut_s16(self.shram[self.lut_base:self.lut_base + 2048].view("<u4"), x)

    # ---- operations --------------------------------------------------------------------

    def _dispatch(self, name: str, param: int, regs: Registers, mem: Memory) -> str:
        if name == "NPU_OP_DMA_START":
            self._dma(regs, mem)
            return "dma"
        if name == "NPU_OP_ELEMENTWISE":
            mode = ELEMENTWISE_MODES.get(param & 0x1F)
            if mode is None:
                raise OperatorMissingError(f"Ethos-U simulation: elementwise mode {param} unknown")
            self._elementwise(mode, regs, mem)
            return f"elementwise_{mode}"
        if name == "NPU_OP_POOL":
            mode = POOL_MODES.get(param & 0x7)
            if mode is None:
                raise OperatorMissingError(f"Ethos-U simulation: pooling mode {param} unknown")
            self._pool(mode, regs, mem)
            return f"pool_{mode}"
        if name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            self._conv(name == "NPU_OP_DEPTHWISE", regs, mem)
            return "depthwise" if name == "NPU_OP_DEPTHWISE" else "conv"
        raise OperatorMissingError(f"Ethos-U simulation: {name} is not simulated")

    def _dma(self, regs: Registers, mem: Memory) -> None:
        src_r, dst_r = regs.p("NPU_SET_DMA0_SRC_REGION"), regs.p("NPU_SET_DMA0_DST_REGION")
        src, dst, length = (regs.d("NPU_SET_DMA0_SRC"), regs.d("NPU_SET_DMA0_DST"),
                            regs.d("NPU_SET_DMA0_LEN"))
        mode = (src_r >> 9) & 3
        if (src_r >> 8) & 1:
            raise OperatorMissingError("Ethos-U simulation: DMA from SHRAM is not simulated")
        if mode == 0:
            chunks = [(0, 0, length)]
        else:
            # 2-D/3-D: SIZE0 bytes per row, SKIP0 between row starts; SIZE1 rows per plane and
            # SKIP1 between planes; LEN is the total length moved
            size0 = regs.p("NPU_SET_DMA0_SIZE0")
            size1 = regs.p("NPU_SET_DMA0_SIZE1", 1) if mode == 2 else 1
            skip0 = regs.d("NPU_SET_DMA0_SKIP0")
            skip1 = regs.d("NPU_SET_DMA0_SKIP1", 0)
            chunks, done, k = [], 0, 0
            while done < length:
                plane, row = divmod(k, size1) if mode == 2 else (0, k)
                off = plane * skip1 + row * skip0
                n = min(size0, length - done)
                chunks.append((off, done, n))
                done += n
                k += 1
        for s_off, d_off, n in chunks:
            data = mem.region(src_r & 0xFF, src + s_off + n)[src + s_off:src + s_off + n].copy()
            if (dst_r >> 8) & 1:  # internal: SHRAM (lookup tables)
                self.shram[dst + d_off:dst + d_off + n] = data
            else:
                mem.region(dst_r & 0xFF, dst + d_off + n, write=True)[
                    dst + d_off:dst + d_off + n] = data

    def _read_ifm(self, regs: Registers, mem: Memory, prefix: str, shape) -> tuple[
            np.ndarray, FeatureMap]:
        fm = self._fm(regs, prefix)
        zp = self._zp(regs, prefix, fm)
        x = fm.read(mem, *shape).astype(np.int64) - zp
        return x, fm

    def _window_geometry(self, regs: Registers):
        from .weights import kernel_from_registers

        k = kernel_from_registers(regs.p("NPU_SET_KERNEL_HEIGHT_M1", 0),
                                  regs.p("NPU_SET_KERNEL_WIDTH_M1", 0),
                                  regs.p("NPU_SET_KERNEL_STRIDE", 0))
        pads = tuple(regs.p(f"NPU_SET_IFM_PAD_{s}", 0) for s in ("TOP", "LEFT", "BOTTOM", "RIGHT"))
        oh, ow, oc = self._ofm_shape(regs)
        ekh = (k.height - 1) * k.dilation[0] + 1
        ekw = (k.width - 1) * k.dilation[1] + 1
        # the NPU derives the IFM extent from the OFM, the kernel and the padding
        ih = (oh - 1) * k.stride[0] + ekh - pads[0] - pads[2]
        iw = (ow - 1) * k.stride[1] + ekw - pads[1] - pads[3]
        return k, pads, (oh, ow, oc), (ih, iw)

    def _padded_ifm(self, regs, mem, depth, pads, ihw):
        upscale = regs.p("NPU_SET_IFM_UPSCALE", 0) & 3
        ih, iw = max(ihw[0], 0), max(ihw[1], 0)
        if upscale:
            # the kernel sees the IFM twice as high and wide: each element repeated (NEAREST)
            # or followed by zeros (ZEROS, for transpose convolution)
            x, _ = self._read_ifm(regs, mem, "IFM", ((ih + 1) // 2, (iw + 1) // 2, depth))
            if upscale == 1:
                x = x.repeat(2, axis=0).repeat(2, axis=1)
            else:
                up = np.zeros((2 * x.shape[0], 2 * x.shape[1], depth), np.int64)
                up[::2, ::2] = x
                x = up
            x = x[:ih, :iw]
        else:
            x, _ = self._read_ifm(regs, mem, "IFM", (ih, iw, depth))
        top, left, bottom, right = pads
        xp = np.pad(x, ((top, bottom), (left, right), (0, 0)))
        valid = np.pad(np.ones(x.shape[:2], bool), ((top, bottom), (left, right)))
        return xp, valid

    def _conv(self, depthwise: bool, regs: Registers, mem: Memory) -> None:
        from .weights import decode_scales, decode_weights

        k, pads, (oh, ow, oc), ihw = self._window_geometry(regs)
        in_depth = oc if depthwise else regs.p("NPU_SET_IFM_DEPTH_M1") + 1
        xp, _ = self._padded_ifm(regs, mem, in_depth, pads, ihw)
        ifm_bits = _IFM_BITS[(regs.p("NPU_SET_IFM_PRECISION") >> 2) & 3]

        def stream(prefix: str, second: str) -> list[bytes]:
            region = regs.p(f"NPU_SET_{prefix}_REGION") & 0x7F
            out = []
            for reg in (prefix, second):
                if f"NPU_SET_{reg}_BASE" not in regs.values:
                    continue
                base, length = regs.d(f"NPU_SET_{reg}_BASE"), regs.d(f"NPU_SET_{reg}_LENGTH")
                out.append(bytes(mem.region(region, base + length)[base:base + length]))
            return out

        cores = 2 if self.accelerator.endswith("u65-512") else 1
        w_streams = stream("WEIGHT", "WEIGHT1")[:cores]
        s_streams = stream("SCALE", "SCALE1")[:cores]
        w = decode_weights(w_streams, accelerator=self.accelerator, ofm_depth=oc,
                           ifm_depth=in_depth, kernel_h=k.height, kernel_w=k.width,
                           depthwise=depthwise, part_kernel_first=k.part_kernel_first,
                           ofm_block_depth=regs.p("NPU_SET_OFM_BLK_DEPTH_M1") + 1,
                           ifm_bits=ifm_bits, dilation=k.dilation)
        sb = decode_scales(s_streams, ofm_depth=oc, accelerator=self.accelerator)
        if depthwise:
            acc = ops.depthwise(xp, w[..., 0], k.stride, k.dilation, (oh, ow))
        else:
            acc = ops.conv2d(xp, w, k.stride, k.dilation, (oh, ow))
        acc = acc + sb.bias
        self._write_ofm(regs, mem, acc, sb.scale, sb.shift)

    def _pool(self, mode: str, regs: Registers, mem: Memory) -> None:
        k, pads, (oh, ow, oc), ihw = self._window_geometry(regs)
        # REDUCE_SUM also sums the IFM's channels (into an OFM of depth 1)
        depth = regs.p("NPU_SET_IFM_DEPTH_M1") + 1 if mode == "reduce_sum" else oc
        xp, valid = self._padded_ifm(regs, mem, depth, pads, ihw)
        res, count = ops.pool(xp, valid, mode, (k.height, k.width), k.stride, (oh, ow))
        if mode == "reduce_sum":
            res = np.broadcast_to(res.sum(axis=-1, keepdims=True), (oh, ow, oc))
        ofm_prec = regs.p("NPU_SET_OFM_PRECISION")
        global_scale = (ofm_prec >> 8) & 1
        rounding = (ofm_prec >> 14) & 3
        scale, shift = self._ofm_scale(regs)
        if mode == "average" and (any(pads) or not global_scale):
            # windows reaching into the padding: the NPU divides by the count of real
            # elements itself (Vela then sets a unit OFM scale)
            res = ops.average_by_count(res, count, rounding)
        if mode != "max" and global_scale:
            self._write_ofm(regs, mem, res, scale, shift)
        else:
            self._write_ofm(regs, mem, res)

    def _ofm_scale(self, regs: Registers) -> tuple[int, int]:
        if "NPU_SET_OFM_SCALE" not in regs.values:
            return 1, 0
        param, data = regs.values["NPU_SET_OFM_SCALE"]
        return data or 0, param & 0x3F

    def _elementwise(self, mode: str, regs: Registers, mem: Memory) -> None:
        oh, ow, oc = self._ofm_shape(regs)
        a, ifm = self._read_ifm(regs, mem, "IFM", (oh, ow, oc))
        ifm_prec = regs.p("NPU_SET_IFM_PRECISION")
        unary = mode in ("abs", "clz", "lrelu")
        if not unary:
            bc = regs.p("NPU_SET_IFM2_BROADCAST", 0)
            if (bc >> 7) & 1:
                prec2 = regs.p("NPU_SET_IFM2_PRECISION", 1)
                signed = bool(prec2 & 1) or ((prec2 >> 2) & 3) > 0
                raw = regs.p("NPU_SET_IFM2_SCALAR")
                zp_raw = regs.p("NPU_SET_IFM2_ZERO_POINT", 0)
                value = (_s16(raw) if signed else raw) - (_s16(zp_raw) if signed else zp_raw)
                b = np.full((1, 1, 1), value, np.int64)
            else:
                shape2 = (1 if bc & 1 else oh, 1 if bc & 2 else ow, 1 if bc & 4 else oc)
                b, _ = self._read_ifm(regs, mem, "IFM2", shape2)
            if (bc >> 6) & 1:
                a, b = b, a
        rounding_in = (ifm_prec >> 14) & 3
        scale, shift = self._ofm_scale(regs)
        if mode in ("add", "sub"):
            scale_mode = (ifm_prec >> 8) & 3
            opa = regs.values.get("NPU_SET_OPA_SCALE", (0, 1))
            opb = regs.values.get("NPU_SET_OPB_SCALE", (0, 1))
            in_bits = _IFM_BITS[(ifm_prec >> 2) & 3]
            # the operand that is not scaled is aligned with the scaled one's fixed point
            unscaled_shift = {8: 19, 16: 14}.get(in_bits, 0) if self.u55_family else 0
            if scale_mode == 1:
                a = scale_round(a, opa[1] or 0, opa[0] & 0x3F, rounding_in)
                b = b << unscaled_shift
            elif scale_mode == 2:  # the 32-bit scale is still OPA_SCALE's
                b = scale_round(b, opa[1] or 0, opa[0] & 0x3F, rounding_in)
                a = a << unscaled_shift
            else:
                a = a * (opa[1] & 0xFFFF)
                b = b * (opb[1] & 0xFFFF)
            acc = a + b if mode == "add" else a - b
            self._write_ofm(regs, mem, np.broadcast_to(acc, (oh, ow, oc)), scale, shift)
        elif mode == "mul":
            self._write_ofm(regs, mem, np.broadcast_to(a * b, (oh, ow, oc)), scale, shift)
        elif mode in ("min", "max"):
            acc = np.minimum(a, b) if mode == "min" else np.maximum(a, b)
            self._write_ofm(regs, mem, np.broadcast_to(acc, (oh, ow, oc)), scale, shift)
        elif mode == "abs":
            self._write_ofm(regs, mem, np.abs(a), scale, shift)
        elif mode in ("shl", "shr"):
            s = np.clip(b, -32, 31)
            if mode == "shl":
                acc = np.left_shift(a, np.maximum(s, 0)).astype(np.int32).astype(np.int64)
            else:  # the OFM round mode rounds the shift: DBL is a plain (flooring) shift
                rnd = (regs.p("NPU_SET_OFM_PRECISION") >> 14) & 3
                s = np.maximum(s, 0)
                acc = np.right_shift(a, s) if rnd == 0 else scale_round(a, 1, s, rnd)
            self._write_ofm(regs, mem, np.broadcast_to(acc, (oh, ow, oc)))
        elif mode == "clz":
            u = (a & 0xFFFFFFFF).astype(np.uint64)
            n = np.where(u == 0, 32, 31 - np.floor(np.log2(np.maximum(u, 1))).astype(np.int64))
            self._write_ofm(regs, mem, n.astype(np.int64))
        else:
            raise OperatorMissingError(f"Ethos-U simulation: elementwise {mode} is not simulated "
                                       "yet")
