"""Test helper: walk a U55/U65 command stream just far enough to find each NPU_OP_CONV /
NPU_OP_DEPTHWISE's weight and scale bytes (following the 1-D weight DMAs into scratch) and
decode them with ``npu.weights``. Not the simulator: registers only, no feature maps."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from edgetorch.backends.arm.runtime.npu import weights as W
from edgetorch.backends.arm.runtime.tosa_graph import read_tosa

PAYLOAD32 = 0x4000
DA_NOP, DA_CMD_STREAM = 0x05, 0x02


def command_words(cmd_data: bytes) -> np.ndarray:
    """The register command stream inside Vela's ``COP1`` driver payload."""
    words = np.frombuffer(cmd_data, "<u4")
    assert words[0] == int.from_bytes(b"COP1", "little")
    i = 4  # magic, config tag, config word, id word
    while words[i] & 0xFF == DA_NOP:
        i += 1
    assert words[i] & 0xFF == DA_CMD_STREAM
    length = (((int(words[i]) >> 8) & 0xFF) << 16) | (int(words[i]) >> 16)
    return words[i + 1:i + 1 + length]


@dataclass
class WeightOp:
    kind: str  # "conv" | "depthwise"
    regs: dict  # register name -> value at the operation
    weights: np.ndarray  # decoded OHWI
    scales: W.ScaleBias


def decode_ops(cmd_data: bytes, weight_data: bytes, accelerator: str) -> list[WeightOp]:
    regions: dict[int, bytearray] = {0: bytearray(weight_data)}
    regs: dict[str, int] = {}
    ops: list[WeightOp] = []
    words = command_words(cmd_data)
    i = 0
    while i < len(words):
        w = int(words[i])
        code, param = w & 0x3FF, w >> 16
        if w & PAYLOAD32:
            regs[cmd1(code).name] = int(words[i + 1]) | (param << 32)
            i += 2
            continue
        i += 1
        name = cmd0(code).name
        if not name.startswith("NPU_OP_"):
            regs[name] = param
        elif name == "NPU_OP_DMA_START":
            _dma(regions, regs)
        elif name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            ops.append(_decode(regions, dict(regs), name, accelerator))
    return ops


def _region(regions: dict[int, bytearray], index: int, end: int) -> bytearray:
    buf = regions.setdefault(index, bytearray())
    if len(buf) < end:
        buf.extend(bytes(end - len(buf)))
    return buf


def _dma(regions, regs):
    src_region, dst_region = regs["NPU_SET_DMA0_SRC_REGION"], regs["NPU_SET_DMA0_DST_REGION"]
    assert (src_region >> 9) & 3 == 0 and (dst_region >> 9) & 3 == 0, "only 1-D DMA here"
    src, dst, n = regs["NPU_SET_DMA0_SRC"], regs["NPU_SET_DMA0_DST"], regs["NPU_SET_DMA0_LEN"]
    data = bytes(_region(regions, src_region & 0xFF, src + n)[src:src + n])
    _region(regions, dst_region & 0xFF, dst + n)[dst:dst + n] = data


def _streams(regions, regs, region_reg, pairs, cores):
    region = regs[region_reg] & 0xFF
    out = []
    for base, length in pairs[:cores]:
        start, n = regs.get(base, 0), regs.get(length, 0)
        out.append(bytes(_region(regions, region, start + n)[start:start + n]))
    return out


def _reader(regions):
    def read(region: int, base: int, length: int) -> bytes:
        return bytes(_region(regions, region, base + length)[base:base + length])
    return read


def _decode(regions, regs, name, accelerator) -> WeightOp:
    depthwise = name == "NPU_OP_DEPTHWISE"
    weights, scales = W.decode_operation(lambda r: regs.get(r, 0), _reader(regions),
                                         accelerator=accelerator, depthwise=depthwise)
    return WeightOp("depthwise" if depthwise else "conv", regs, weights, scales)


def _ints(tensor) -> np.ndarray:
    """A TOSA constant's values as int64 (INT48 is stored as 6 little-endian bytes)."""
    if tensor.dtype == "INT48":
        raw = np.frombuffer(tensor.data, np.uint8).reshape(-1, 6).astype(np.int64)
        value = sum(raw[:, k] << (8 * k) for k in range(6))
        return np.where(value >= 1 << 47, value - (1 << 48), value)
    return np.frombuffer(tensor.data, {"INT8": np.int8, "INT16": np.int16,
                                       "INT32": np.int32}[tensor.dtype]).astype(np.int64)


def tosa_layers(tosa: bytes) -> list[dict]:
    """Each CONV2D / DEPTHWISE_CONV2D: OHWI weights minus zero point (depthwise HWCM ->
    ``[C*M, H, W, 1]``), bias and the following RESCALE's factors."""
    block = read_tosa(tosa).main
    rescale_of = {op.inputs[0]: op for op in block.operators if op.op == "RESCALE"}
    layers = []
    for op in block.operators:
        if op.op not in ("CONV2D", "DEPTHWISE_CONV2D"):
            continue
        tensor = block.tensor(op.inputs[1])
        w = _ints(tensor).reshape(tensor.shape)
        multiplier = 1
        if op.op == "DEPTHWISE_CONV2D":
            multiplier = tensor.shape[3]
            w = w.reshape(tensor.shape[0], tensor.shape[1], -1).transpose(2, 0, 1)[..., None]
        zp = _ints(block.tensor(op.inputs[4]))
        w = w - (zp[0] if np.all(zp == zp[0]) else zp[:w.shape[0]].reshape(-1, 1, 1, 1))
        rescale = rescale_of[op.outputs[0]]
        layers.append(dict(name=op.outputs[0], kind="depthwise" if "DEPTH" in op.op else "conv",
                           weights=w, depth_multiplier=multiplier,
                           bias=_ints(block.tensor(op.inputs[2])),
                           multiplier=_ints(block.tensor(rescale.inputs[1])),
                           shift=_ints(block.tensor(rescale.inputs[2]))))
    return layers


def _channel_sets(layer, depth: int):
    """OFM channel index sets one NPU operation may take from a layer: contiguous slices, and
    for a depthwise multiplier M the channels ``m, m + M, ...`` (Vela runs one op per m)."""
    total = layer["weights"].shape[0]
    for s in range(total - depth + 1):
        yield np.arange(s, s + depth)
    step = layer["depth_multiplier"]
    if step > 1:
        for m in range(step):
            for s in range(m, total - (depth - 1) * step, step):
                yield np.arange(s, s + depth * step, step)


def _kernel_windows(full: int, size: int):
    """Kernel rows (or columns) an operation's ``size``-long kernel may take from a ``full``
    one: all of it, or (Vela's kernel decomposition, e.g. a stride-4 depthwise becomes 25 1x1
    operations) an evenly spaced part."""
    if size == full:
        yield np.arange(full)
        return
    for start in range(full):
        for step in range(1, full + 1):
            if start + step * (size - 1) < full:
                yield np.arange(start, start + step * size, step)


def _matches(op, layers):
    o, kh, kw, i = op.weights.shape
    for layer in layers:
        lw = layer["weights"]
        if layer["kind"] != op.kind or lw.shape[3] != i or lw.shape[1] < kh or lw.shape[2] < kw:
            continue
        for ys in _kernel_windows(lw.shape[1], kh):
            for xs in _kernel_windows(lw.shape[2], kw):
                window = lw[:, ys][:, :, xs]
                for idx in _channel_sets(layer, o):
                    if np.array_equal(window[idx], op.weights):
                        yield layer, idx, ys, xs


def check_against_tosa(ops, layers) -> None:
    """Each NPU operation's weights are some OFM channels (and, for a decomposed kernel, some
    kernel positions) of one TOSA layer, with their biases and the same rescale factors (Vela
    drops common factors of two: compare as fractions); together the operations cover every
    weight of every layer."""
    for layer in layers:
        layer["covered"] = np.zeros(layer["weights"].shape[:3], bool)
    for op in ops:
        match = next(_matches(op, layers), None)
        assert match, f"{op.kind} weights {op.weights.shape} match no TOSA layer's weights"
        layer, idx, ys, xs = match
        np.testing.assert_array_equal(op.scales.bias, layer["bias"][idx], err_msg=layer["name"])
        for c, ref_c in enumerate(idx):
            ours = Fraction(int(op.scales.scale[c]), 1 << int(op.scales.shift[c]))
            ref = Fraction(int(layer["multiplier"][ref_c]), 1 << int(layer["shift"][ref_c]))
            assert ours == ref, (layer["name"], int(ref_c), ours, ref)
        layer["covered"][np.ix_(idx, ys, xs)] = True
    for layer in layers:
        assert layer["covered"].all(), f"TOSA layer {layer['name']} has weights no NPU op uses"


# ---- U85: no Python register definitions ship with Vela; read Regor's own listing ----------

_LINE = re.compile(r"^0x[0-9a-f]+:\s+(?:([0-9a-f]{8})\s+)?([0-9a-f]{4})\s+([0-9a-f]{4}) - (\w+)\s+-?\d+"
                   r"(?:, (.*))?$")


def vela_listing(tosa: bytes, flags: list[str], workdir: str) -> tuple[str, Path]:
    """Vela's ``--verbose-register-command-stream`` text for ``tosa`` and its output folder."""
    from ethosu.vela import vela

    Path(workdir).mkdir(parents=True, exist_ok=True)
    path = Path(workdir) / "net.tosa"
    path.write_bytes(tosa)
    # Regor prints from C++: capture file descriptor 1, not just sys.stdout.
    log = Path(workdir) / "listing.txt"
    sys.stdout.flush()
    saved = os.dup(1)
    with open(log, "wb") as f, contextlib.redirect_stdout(io.StringIO()) as py_out:
        os.dup2(f.fileno(), 1)
        try:
            status = vela.main([*flags, "--verbose-register-command-stream",
                                f"--output-dir={workdir}/output", str(path)])
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
    text = log.read_text() + py_out.getvalue()
    assert status in (0, None), text[-2000:]
    return text, Path(workdir) / "output" / "net_vela.npz"


def decode_ops_u85(listing: str, weight_data: bytes, accelerator: str) -> list[WeightOp]:
    """Like ``decode_ops`` for a U85, registers and fields taken from Regor's listing."""
    regions: dict[int, bytearray] = {0: bytearray(weight_data)}
    regs: dict[str, int] = {}
    fields: dict[str, dict[str, str]] = {}
    ops = []
    for line in listing.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        payload, param, name = m.group(1), int(m.group(2), 16), m.group(4)
        value = (int(payload, 16) | (param << 32)) if payload else param
        if name == "NPU_OP_DMA_START":
            _dma(regions, regs)
        elif name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            ops.append(_decode_u85(regions, dict(regs), fields, name, accelerator))
        elif not name.startswith("NPU_OP_"):
            regs[name] = value
            fields[name] = dict(f.split(" = ") for f in (m.group(5) or "").split(", ") if " = " in f)
    return ops


def _decode_u85(regions, regs, fields, name, accelerator) -> WeightOp:
    from edgetorch.backends.arm.runtime.npu.layout_u85 import u85_config

    cores = u85_config(accelerator).cores
    k = W.kernel_from_registers(regs["NPU_SET_KERNEL_HEIGHT_M1"], regs["NPU_SET_KERNEL_WIDTH_M1"],
                                regs["NPU_SET_KERNEL_STRIDE"])
    depthwise = name == "NPU_OP_DEPTHWISE"
    fast = fields["NPU_SET_WEIGHT_FORMAT"]["weight_format"] == "WEIGHT_FORMAT_FWD"
    sparse = fields["NPU_SET_WEIGHT_FORMAT"]["weight_sparsity"] != "WEIGHT_SPARSITY_NONE"
    acc = fields["NPU_SET_ACC_FORMAT"]
    ublock = tuple(int(v) for v in acc["microblock"].removeprefix("MICROBLOCK_U").split("X"))
    # The register helpers the simulator uses agree with Vela's own field names.
    assert W.acc_format_u85(regs["NPU_SET_ACC_FORMAT"]) == (acc["acc_format"] == "ACC_FORMAT_I48",
                                                            ublock)
    assert W.weight_format_u85(regs["NPU_SET_WEIGHT_FORMAT"]) == (fast, sparse)
    suffixes = [""] + [str(n) for n in range(1, cores)]
    weight_streams = _streams(regions, regs, "NPU_SET_WEIGHT_REGION",
                              [(f"NPU_SET_WEIGHT{s}_BASE", f"NPU_SET_WEIGHT{s}_LENGTH")
                               for s in suffixes], 1 if fast else cores)
    scale_streams = _streams(regions, regs, "NPU_SET_SCALE_REGION",
                             [("NPU_SET_SCALE_BASE", "NPU_SET_SCALE_LENGTH")], 1)
    precision = fields["NPU_SET_IFM_PRECISION"]["activation_precision"]
    ofm_depth = regs["NPU_SET_OFM_DEPTH_M1"] + 1
    weights = W.decode_weights(
        weight_streams, accelerator=accelerator, ofm_depth=ofm_depth,
        ifm_depth=regs["NPU_SET_IFM_DEPTH_M1"] + 1, kernel_h=k.height, kernel_w=k.width,
        depthwise=depthwise, part_kernel_first=k.part_kernel_first,
        ofm_block_depth=regs["NPU_SET_OFM_BLK_DEPTH_M1"] + 1,
        ifm_bits=16 if precision.endswith("B16") else 8, dilation=k.dilation, stride=k.stride,
        ofm_ublock=ublock, fast=fast, sparse=sparse)
    scales = W.decode_scales(scale_streams, ofm_depth=ofm_depth, accelerator=accelerator,
                             acc48=acc["acc_format"] == "ACC_FORMAT_I48")
    # The register-file entry point the simulator calls gives the same result.
    w2, s2 = W.decode_operation(lambda r: regs.get(r, 0), _reader(regions),
                                accelerator=accelerator, depthwise=depthwise)
    np.testing.assert_array_equal(w2, weights)
    for ours, ref in zip(s2, scales):
        np.testing.assert_array_equal(ours, ref)
    return WeightOp("depthwise" if depthwise else "conv", regs, weights, scales)


def check_pte(pte: bytes, tosas: list[bytes], workdir: Path) -> int:
    """Every Ethos-U delegate of ``pte``: its weights and scales, decoded from its own command
    stream and weight data, equal those of one of ``tosas`` (the partitions' TOSA graphs, each
    used once). U55/U65 decode the stream directly; for a U85 Vela is re-run on the candidate
    TOSA with the delegate's flags, its command stream must equal the delegate's byte for byte,
    and the register fields come from Vela's listing. Returns the NPU operations checked."""
    from edgetorch.backends.arm.ethosu.vela_bin import parse_vela_bin
    from edgetorch.schema.pte import PteFile

    pf = PteFile.parse(pte)
    delegates = pf.program.execution_plan[0].delegates
    assert len(delegates) == len(tosas) >= 1
    unmatched, checked = list(range(len(tosas))), 0
    for n, delegate in enumerate(delegates):
        specs = {c.key: bytes(c.value).decode() for c in delegate.compile_specs}
        target, flags = specs["target"], specs["compile_flags"].split(" ")
        blob = parse_vela_bin(pf.delegate_bytes(delegate))
        for k in unmatched:
            if target.startswith("ethos-u85"):
                listing, npz_path = vela_listing(tosas[k], flags, str(workdir / f"d{n}_t{k}"))
                with np.load(npz_path) as npz:
                    if npz["cmd_data"].tobytes() != blob.cmd_data:
                        continue
                ops = decode_ops_u85(listing, blob.weight_data, target)
            else:
                ops = decode_ops(blob.cmd_data, blob.weight_data, target)
            try:
                check_against_tosa(ops, tosa_layers(tosas[k]))
            except AssertionError:
                continue
            unmatched.remove(k)
            checked += len(ops)
            break
        else:
            raise AssertionError(f"delegate {n} ({target}): its weights match no partition's TOSA")
    return checked
