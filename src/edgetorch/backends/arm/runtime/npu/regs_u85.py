"""The Ethos-U85 register interface: opcode names and parameter field layouts.

Vela 5.1 ships Python register definitions for the U55/U65 only (``ethos_u55_regs``); its U85
back end (Regor, C++) has them compiled in. Regor's ``--verbose-register-command-stream``
listing prints every command with its opcode, parameter and named fields, so this table was
read off Regor's listings of many graphs (every MAC config, every operation kind the tests
compile) and is checked against them word for word by ``tests/backends/arm/npu/test_u85.py``.
The U85 keeps the U55 opcodes for the registers the two share; the differences are below.
Enum values marked "not observed" follow the order Regor names them in and print as numbers
if wrong; the interpreter refuses values it does not know.
"""

from __future__ import annotations

# cmd0/cmd1 opcodes whose U85 name differs from (or is missing on) the U55
CMD0_U85 = {
    0x108: "NPU_SET_IFM_BROADCAST",
    0x124: "NPU_SET_ACC_FORMAT",
    0x12E: "NPU_SET_WEIGHT_FORMAT",
    0x007: "NPU_OP_RESIZE",
    0x12A: "NPU_SET_RESIZE_X_SCALE_N_M1",
    0x12B: "NPU_SET_RESIZE_Y_SCALE_N_M1",
    0x12C: "NPU_SET_RESIZE_X_OFFSET",
    0x12D: "NPU_SET_RESIZE_Y_OFFSET",  # the U55's AB_START
}
CMD1_U85 = {
    0x24: "NPU_SET_OFM_SCALE",
    0x25: "NPU_SET_IFM_SCALE",
    0x26: "NPU_SET_IFM2_SCALE",
    0x27: "NPU_SET_OP_SCALAR",
    # the U55's SCALE1_* slots hold the third and fourth weight decoders' streams
    0x96: "NPU_SET_RESIZE_X_STEP",
    0x97: "NPU_SET_RESIZE_Y_STEP",
    0x92: "NPU_SET_WEIGHT2_BASE",
    0x93: "NPU_SET_WEIGHT2_LENGTH",
    0x94: "NPU_SET_WEIGHT3_BASE",
    0x95: "NPU_SET_WEIGHT3_LENGTH",
}

STORAGE_CHAINED, STORAGE_NONE = 2, 3
ACC_INPUT_RESET, ACC_INPUT_KEEP, ACC_INPUT_IFM2 = 0, 1, 2

E = {
    "activation_type": ("ACTIVATION_TYPE", {0: "UNSIGNED", 1: "SIGNED"}),
    "activation_precision": ("ACTIVATION_PRECISION", {0: "B8", 1: "B16", 2: "B32", 3: "B64"}),
    "activation_format": ("ACTIVATION_FORMAT", {0: "NHWC", 1: "NHCWB16"}),
    "activation_storage": ("ACTIVATION_STORAGE", {0: "TILE2X2", 1: "TILE3X1", 2: "CHAINED",
                                                  3: "NONE"}),
    "activation_reverse": ("ACTIVATION_REVERSE", {0: "NONE", 1: "H", 2: "W", 3: "C"}),
    # OFM axis order written: HWC is plain NHWC; WHC swaps H and W, HCW stores [H, C, W] ...
    "activation_transpose": ("ACTIVATION_TRANSPOSE", {0: "HWC", 1: "WHC", 2: "HCW", 3: "WCH",
                                                      6: "CHW", 7: "CWH"}),
    "ofm_scale_mode": ("OFM_SCALE_MODE", {0: "PER_CHANNEL", 1: "GLOBAL"}),
    "round_ofm": ("ROUND_MODE", {0: "OFM_DOUBLE_SYMMETRIC", 1: "OFM_NATURAL",
                                 2: "OFM_DOUBLE_ASYMMETRIC", 3: "OFM_SYMMETRIC",
                                 4: "OFM_TRUNCATE_TO_ZERO", 5: "OFM_TRUNCATE_TO_LOWER"}),
    "round_ifm": ("ROUND_MODE", {0: "IFM_DOUBLE_SYMMETRIC", 1: "IFM_NATURAL"}),
    "upscale": ("IFM_UPSCALE_MODE", {0: "NONE", 1: "NEAREST", 2: "ZEROS"}),
    "weight_order": ("WEIGHT_ORDER", {0: "DEPTH_FIRST", 1: "PART_KERNEL_FIRST"}),
    "dilation": ("KERNEL_DILATION", {0: "NONE", 1: "X2"}),
    "decomposition": ("KERNEL_DECOMPOSITION", {0: "D8X8", 1: "D4X4"}),
    "acc_format": ("ACC_FORMAT", {0: "I32", 1: "I48"}),
    "acc_input": ("ACC_INPUT", {0: "RESET", 1: "KEEP", 2: "IFM2"}),
    "acc_output": ("ACC_OUTPUT", {0: "ENABLE", 1: "DISABLE"}),
    "microblock": ("MICROBLOCK", {0: "U1X1", 1: "U1X2", 2: "U1X4", 3: "U2X2", 4: "U2X4",
                                  5: "U4X4"}),
    "activation_function": ("ACTIVATION_FUNCTION", {0: "LUT_NONE", 1: "LUT_U8_U8", 4: "LUT_S8_S8",
                                                    5: "LUT_S8_S16", 7: "LUT_S8_S32",
                                                    8: "LUT_S16_S16", 9: "LUT_S16_S32",
                                                    10: "LUT_TANH", 11: "LUT_SIGMOID"}),
    "clip_range": ("ACTIVATION_CLIP_RANGE", {0: "B16", 1: "NONE"}),
    "weight_format": ("WEIGHT_FORMAT", {0: "SWD", 1: "FWD"}),
    "weight_sparsity": ("WEIGHT_SPARSITY", {0: "NONE", 1: "SPARSE_2_4"}),
    "broadcast_mode": ("BROADCAST_MODE", {0: "NONE", 1: "H", 2: "W", 3: "HW", 4: "C", 5: "CH",
                                          6: "CW", 7: "CWH", 8: "SCALAR"}),
    "pooling_mode": ("POOLING_MODE", {0: "MAX", 1: "AVERAGE", 2: "REDUCE_SUM", 3: "SUM",
                                      4: "NONE", 5: "MIN", 6: "ARGMAX_X", 7: "ARGMAX_Y"}),
    "elementwise_mode": ("ELEMENTWISE_MODE", {0: "MUL", 1: "ADD", 2: "SUB", 3: "MIN", 4: "MAX",
                                              5: "LRELU", 6: "ABS", 7: "CLZ", 8: "SHR", 9: "SHL"}),
    "region_mode": ("DMA_REGION_MODE", {0: "EXTERNAL", 1: "INTERNAL"}),
    "stride_mode": ("DMA_STRIDE_MODE", {0: "D1", 1: "D2", 2: "D3"}),
    "idx_mode": ("DMA_IDX_MODE", {0: "DISABLED", 1: "ENABLED"}),
    "resize_mode": ("RESIZE_MODE", {0: "BILINEAR", 1: "REPLICATE", 2: "NEAREST"}),
}

_PREC_IN = [("activation_type", 0, 1, "activation_type"),
            ("activation_precision", 2, 2, "activation_precision"),
            ("activation_format", 6, 2, "activation_format"),
            ("activation_storage", 14, 2, "activation_storage")]
_BROADCAST = [("broadcast_mode", 0, 4, "broadcast_mode")]

# cmd0 parameter fields: (printed name, low bit, width, enum key or None); registers not listed
# here print like the U55's (a single field named after the register)
CMD0_FIELDS: dict[str, list] = {
    "NPU_OP_STOP": [("mask", 0, 16, None)],
    "NPU_OP_IRQ": [("mask", 0, 16, None)],
    "NPU_OP_CONV": [("weights_ifm2", 0, 1, None)],
    "NPU_OP_DEPTHWISE": [],
    "NPU_OP_POOL": [("pooling_mode", 0, 3, "pooling_mode")],
    "NPU_OP_ELEMENTWISE": [("elementwise_mode", 0, 6, "elementwise_mode")],
    "NPU_OP_DMA_WAIT": [("k", 0, 2, None)],
    "NPU_OP_RESIZE": [("resize_mode", 0, 2, "resize_mode")],
    "NPU_SET_RESIZE_X_SCALE_N_M1": [("resize_x_scale_n_m1", 0, 16, None)],
    "NPU_SET_RESIZE_Y_SCALE_N_M1": [("resize_y_scale_n_m1", 0, 16, None)],
    "NPU_OP_KERNEL_WAIT": [("n", 0, 2, None)],
    "NPU_SET_IFM_PRECISION": _PREC_IN,
    "NPU_SET_IFM2_PRECISION": _PREC_IN,
    "NPU_SET_OFM_PRECISION": [("activation_type", 0, 1, "activation_type"),
                              ("activation_precision", 1, 2, "activation_precision"),
                              ("activation_format", 6, 2, "activation_format"),
                              ("scale_mode", 8, 1, "ofm_scale_mode"),
                              ("activation_reverse", 9, 2, "activation_reverse"),
                              ("activation_transpose", 11, 3, "activation_transpose"),
                              ("activation_storage", 14, 2, "activation_storage")],
    "NPU_SET_IFM_UPSCALE": [("mode", 0, 2, "upscale")],
    "NPU_SET_IFM_BROADCAST": _BROADCAST,
    "NPU_SET_IFM2_BROADCAST": _BROADCAST,
    "NPU_SET_KERNEL_STRIDE": [("stride_x_lsb", 0, 1, None), ("stride_y_lsb", 1, 1, None),
                              ("weight_order", 2, 1, "weight_order"),
                              ("dilation_x", 3, 1, "dilation"), ("dilation_y", 4, 1, "dilation"),
                              ("decomposition", 5, 1, "decomposition"),
                              ("stride_x_msb", 6, 1, None), ("stride_y_msb", 9, 1, None)],
    "NPU_SET_ACC_FORMAT": [("acc_format", 0, 2, "acc_format"), ("acc_input", 4, 2, "acc_input"),
                           ("acc_output", 6, 1, "acc_output"),
                           ("microblock", 8, 3, "microblock")],
    "NPU_SET_ACTIVATION": [("activation_function", 0, 4, "activation_function"),
                           ("table", 5, 3, None),
                           ("activation_clip_range", 12, 1, "clip_range")],
    "NPU_SET_WEIGHT_FORMAT": [("weight_format", 0, 1, "weight_format"),
                              ("weight_sparsity", 4, 1, "weight_sparsity")],
    "NPU_SET_DMA0_SRC_REGION": [("region", 0, 8, None), ("region_mode", 8, 1, "region_mode"),
                                ("stride_mode", 9, 2, "stride_mode"),
                                ("idx_mode", 11, 1, "idx_mode")],
    # the destination has no stride mode of its own (the source's applies)
    "NPU_SET_DMA0_DST_REGION": [("region", 0, 8, None), ("region_mode", 8, 1, "region_mode"),
                                ("idx_mode", 11, 1, "idx_mode")],
}

# the three scale registers: shift bits 0-5, double-rounding shift bits 8-12, round mode 13-15
SCALE_ROUND_ENUM = {"NPU_SET_OFM_SCALE": "round_ofm", "NPU_SET_IFM_SCALE": "round_ifm",
                    "NPU_SET_IFM2_SCALE": "round_ifm"}


def resize_offset(param: int) -> int:
    """``RESIZE_X/Y_OFFSET``: a signed 12-bit value."""
    return (param & 0xFFF) - ((param & 0x800) << 1)


def resize_step(param: int, data: int) -> tuple[int, int, int, int]:
    """``RESIZE_X/Y_STEP``: ``(one_step_int, blk_step_int, one_step_mod, blk_step_mod)``; one
    output step advances the input position by ``one_step_int * scale_n + one_step_mod``."""
    return param & 0xF, (param >> 4) & 0xFFF, data & 0xFFFF, data >> 16


def scale_fields(param: int) -> tuple[int, int, int]:
    """``(shift, dbl_rnd, round_mode)`` of an OFM/IFM/IFM2_SCALE parameter."""
    return param & 0x3F, (param >> 8) & 0x1F, (param >> 13) & 0x7
