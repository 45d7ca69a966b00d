"""A printable listing of a register command stream, in the format of Vela's
``--verbose-register-command-stream`` (so the two can be compared line by line; Vela's ``//``
comment lines come from its own graph and are not in the stream).

Field layouts and enum names follow the Ethos-U55/U65 register interface (the names Vela 5.1's
back end prints); unknown values print as numbers.
"""

from __future__ import annotations

from .cmdstream import Command, DriverPayload

E = {
    "activation_type": ("ACTIVATION_TYPE", {0: "UNSIGNED", 1: "SIGNED"}),
    "activation_precision": ("ACTIVATION_PRECISION", {0: "B8", 1: "B16", 2: "B32", 3: "B64"}),
    "activation_format": ("ACTIVATION_FORMAT", {0: "NHWC", 1: "NHCWB16"}),
    "ifm_scale_mode": ("IFM_SCALE_MODE", {0: "OPA_OPB_16", 1: "OPA_32", 2: "OPB_32"}),
    "ofm_scale_mode": ("OFM_SCALE_MODE", {0: "PER_CHANNEL", 1: "GLOBAL"}),
    "round_mode": ("ROUND_MODE", {0: "DBL", 1: "TRUNCATE", 2: "NATURAL"}),
    "upscale": ("IFM_UPSCALE_MODE", {0: "NONE", 1: "NEAREST", 2: "ZEROS"}),
    "weight_order": ("WEIGHT_ORDER", {0: "DEPTH_FIRST", 1: "PART_KERNEL_FIRST"}),
    "dilation": ("KERNEL_DILATION", {0: "NONE", 1: "X2"}),
    "decomposition": ("KERNEL_DECOMPOSITION", {0: "D8X8", 1: "D4X4"}),
    "acc_format": ("ACC_FORMAT", {0: "I32", 1: "I40", 2: "F16"}),
    "activation_function": ("ACTIVATION_FUNCTION", {0: "RELU", 3: "TANH", 4: "SIGMOID",
                                                    **{16 + k: f"TABLE_{k}" for k in range(8)}}),
    "clip_range": ("ACTIVATION_CLIP_RANGE", {0: "OFM_PRECISION", 2: "FORCE_UINT8",
                                             3: "FORCE_INT8", 5: "FORCE_INT16"}),
    "parallel_mode": ("PARALLEL_MODE", {0: "SINGLE_CORE", 1: "DUAL_CORE_DEPTH"}),
    "region_mode": ("DMA_REGION_MODE", {0: "EXTERNAL", 1: "INTERNAL"}),
    "stride_mode": ("DMA_STRIDE_MODE", {0: "D1", 1: "D2", 2: "D3"}),
    "broadcast": ("BROADCAST_MODE", {0: "DISABLE", 1: "ENABLE"}),
    "operand_order": ("IFM2_OPERAND_ORDER", {0: "ORDER_B", 1: "ORDER_A"}),
    "pooling_mode": ("POOLING_MODE", {0: "MAX", 1: "AVERAGE", 2: "REDUCE_SUM"}),
    "elementwise_mode": ("ELEMENTWISE_MODE", {0: "MUL", 1: "ADD", 2: "SUB", 3: "MIN", 4: "MAX",
                                              5: "LRELU", 6: "ABS", 7: "CLZ", 8: "SHR", 9: "SHL"}),
}

# cmd0 parameter fields: (printed name, low bit, width, enum key or None)
_PREC_IN = [("activation_type", 0, 1, "activation_type"),
            ("activation_precision", 2, 2, "activation_precision"),
            ("activation_format", 6, 2, "activation_format")]
_WHOLE = {  # a single field covering the parameter: command suffix -> field name
    "PAD_TOP": "pad", "PAD_LEFT": "pad", "PAD_RIGHT": "pad", "PAD_BOTTOM": "pad",
    "ZERO_POINT": "zero_point", "IB_END": "ib_end", "IB_START": "ib_start",
    "AB_START": "ab_start", "BLOCKDEP": "blockdep", "ACTIVATION_MIN": "clip_boundary",
    "ACTIVATION_MAX": "clip_boundary", "SCALAR": "scalar", "SIZE0": "size", "SIZE1": "size",
}
CMD0_FIELDS: dict[str, list] = {
    "NPU_OP_STOP": [("mask", 0, 16, None)],
    "NPU_OP_IRQ": [("mask", 0, 16, None)],
    "NPU_OP_POOL": [("pooling_mode", 0, 3, "pooling_mode")],
    "NPU_OP_ELEMENTWISE": [("elementwise_mode", 0, 6, "elementwise_mode")],
    "NPU_OP_DMA_WAIT": [("k", 0, 2, None)],
    "NPU_OP_KERNEL_WAIT": [("n", 0, 2, None)],
    "NPU_SET_IFM_PRECISION": _PREC_IN + [("scale_mode", 8, 2, "ifm_scale_mode"),
                                         ("round_mode", 14, 2, "round_mode")],
    "NPU_SET_IFM2_PRECISION": _PREC_IN,
    "NPU_SET_OFM_PRECISION": [("activation_type", 0, 1, "activation_type"),
                              ("activation_precision", 1, 2, "activation_precision"),
                              ("activation_format", 6, 2, "activation_format"),
                              ("scale_mode", 8, 1, "ofm_scale_mode"),
                              ("round_mode", 14, 2, "round_mode")],
    "NPU_SET_IFM_UPSCALE": [("mode", 0, 2, "upscale")],
    "NPU_SET_KERNEL_STRIDE": [("stride_x_lsb", 0, 1, None), ("stride_y_lsb", 1, 1, None),
                              ("weight_order", 2, 1, "weight_order"),
                              ("dilation_x", 3, 1, "dilation"), ("dilation_y", 4, 1, "dilation"),
                              ("decomposition", 5, 1, "decomposition"),
                              ("stride_x_msb", 6, 1, None), ("stride_y_msb", 9, 1, None)],
    "NPU_SET_PARALLEL_MODE": [("parallel_mode", 0, 1, "parallel_mode")],
    "NPU_SET_ACC_FORMAT": [("acc_format", 0, 2, "acc_format")],
    "NPU_SET_ACTIVATION": [("activation_function", 0, 5, "activation_function"),
                           ("activation_clip_range", 12, 3, "clip_range")],
    "NPU_SET_DMA0_SRC_REGION": [("region", 0, 8, None), ("region_mode", 8, 1, "region_mode"),
                                ("stride_mode", 9, 2, "stride_mode")],
    "NPU_SET_DMA0_DST_REGION": [("region", 0, 8, None), ("region_mode", 8, 1, "region_mode"),
                                ("stride_mode", 9, 2, "stride_mode")],
    "NPU_SET_IFM2_BROADCAST": [("broadcast_h", 0, 1, "broadcast"), ("broadcast_w", 1, 1, "broadcast"),
                               ("broadcast_c", 2, 1, "broadcast"),
                               ("operand_order", 6, 1, "operand_order"),
                               ("broadcast_constant", 7, 1, "broadcast")],
}


def _value(v: int, enum: str | None) -> str:
    if enum is None:
        return str(v)
    prefix, names = E[enum]
    return f"{prefix}_{names[v]}" if v in names else str(v)


def fields(cmd: Command) -> list[str]:
    """``name = value`` strings of a command's fields."""
    name = cmd.name
    if cmd.data is not None:
        if name.endswith("_SCALE") and name != "NPU_SET_OPB_SCALE":
            return [f"shift = {cmd.param & 0x3F}", f"scale = {cmd.data}"]
        if name == "NPU_SET_OPB_SCALE":
            return [f"scale = {cmd.data}"]
        if name.endswith("_LENGTH") and "DMA" not in name:
            return [f"length = {cmd.data}"]
        return [f"addr = 0x{cmd.data | ((cmd.param & 0xFF) << 32):x}"]
    spec = CMD0_FIELDS.get(name)
    if spec is None:
        suffix = name.replace("NPU_SET_", "")
        for key, field in _WHOLE.items():
            if suffix.endswith(key):
                return [f"{field} = {cmd.param}"]
        if name.endswith("_REGION"):
            return [f"region = {cmd.param & 0x7}"]
        for key in ("HEIGHT", "WIDTH", "DEPTH"):
            if name.endswith("_M1") and key in name.rsplit("_", 2)[-2]:
                return [f"{key.lower()}_m1 = {cmd.param}"]
        return []
    return [f"{f} = {_value((cmd.param >> lo) & ((1 << width) - 1), enum)}"
            for f, lo, width, enum in spec]


def format_command(cmd: Command) -> str:
    payload = f"{cmd.data:08x}" if cmd.data is not None else " " * 8
    low = cmd.word & 0xFFFF
    text = f"0x{cmd.offset:06x}: {payload} {cmd.param:04x} {low:04x} - {cmd.name:<30}{cmd.param:>6}"
    extra = fields(cmd)
    return text + (", " + ", ".join(extra) if extra else "")


def listing(payload: DriverPayload) -> str:
    """The register command stream as Vela's back end prints it (without its comments)."""
    lines = [f"Register command stream: {payload.stream_words} words",
             "  Offset: Payload Param Code - Command                        Param, Fields"]
    lines += [format_command(c) for c in payload.commands]
    return "\n".join(lines)


def ethosu_listing(pte_path: str) -> str:
    """``edgetorch inspect --ethosu``: each Ethos-U delegate's blob and command stream."""
    from .....errors import InvalidArgumentError, OperatorMissingError
    from .....runtime import Runtime
    from ...ethosu.vela_bin import parse_vela_bin
    from .cmdstream import parse_driver_payload
    from .simulator import accelerator_of

    program = Runtime.get().load_program(pte_path)
    out = []
    for name in sorted(program.method_names):
        plan = program._plan(name)
        for k, d in enumerate(plan.delegates):
            if d.id != "EthosUBackend":
                continue
            blob = program._delegate_data(d, name)
            vela = parse_vela_bin(blob, getattr(program, "named_data", None))
            payload = parse_driver_payload(vela.cmd_data)
            specs = {c.key: bytes(c.value).decode("utf-8", "replace") for c in d.compile_specs}
            try:
                accelerator = accelerator_of(payload, specs.get("target"))
            except OperatorMissingError:  # e.g. an Ethos-U85 stream: other registers
                out.append(f"method {name}, delegate {k} ({specs.get('target', '?')}): {vela}")
                out.append(f"{payload.stream_words}-word command stream for product "
                           f"{(payload.config or 0) >> 28} (not an Ethos-U55/U65): not decoded")
                continue
            out.append(f"method {name}, delegate {k} ({specs.get('target', '?')}, stream for "
                       f"{accelerator}): {vela}")
            out.append(listing(payload))
    if not out:
        raise InvalidArgumentError(f"{pte_path}: no EthosUBackend delegate in this program; "
                                   "`edgetorch inspect` without --ethosu shows what it holds")
    return "\n".join(out)
