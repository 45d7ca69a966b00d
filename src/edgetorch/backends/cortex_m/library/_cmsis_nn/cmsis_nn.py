"""CMSIS-NN's ISA backends and its ``*_get_buffer_size*`` functions, in Python.

ExecuTorch sizes each kernel's scratch buffer with CMSIS-NN's own C functions, called through
a pybind module built for the host (gcc, no ``ARM_MATH_MVEI``/``ARM_MATH_DSP``). The explicit
``_mve``/``_dsp`` variants compute what the device needs; the plain ("scalar") ones take
their host-build branch, and a few helpers depend on the compiler (armclang vs gcc). These
are those functions as the host build evaluates them (CMSIS-NN at ExecuTorch 1.5.1's pinned
commit), so the buffers planned into a ``.pte`` have ExecuTorch's sizes.
"""

from __future__ import annotations

from enum import Enum

from .....errors import InvalidArgumentError


class Backend(Enum):
    MVE = 0
    DSP = 1
    SCALAR = 2


class DataType(Enum):
    """Activation and weight widths of a CMSIS-NN kernel: int8 x int8, int16 x int8, or
    int8 activations with int4 weights."""

    A8W8 = 0
    A16W8 = 1
    A8W4 = 2


class CortexM(Enum):
    M0 = 0
    M0PLUS = 1
    M3 = 2
    M4 = 3
    M7 = 4
    M23 = 5
    M33 = 6
    M35P = 7
    M55 = 8
    M85 = 9


def resolve_backend(cpu: CortexM) -> Backend:
    if cpu in (CortexM.M55, CortexM.M85):
        return Backend.MVE
    if cpu in (CortexM.M4, CortexM.M7, CortexM.M33, CortexM.M35P):
        return Backend.DSP
    return Backend.SCALAR


CH_IN_BLOCK_MVE = 124
REVERSE_TCOL_EFFICIENT_THRESHOLD = 16
# 8 with armclang; the host build is gcc
DW_ONE_INPUT_CH_THRESHOLD = 1


def _is_1x1(pad_hw, stride_hw, dil_hw, in_c, f_h, f_w, f_c) -> bool:
    return pad_hw == (0, 0) and f_w == 1 and f_h == 1 and dil_hw == (1, 1) and in_c == f_c


def _is_1_x_n(stride_hw, dil_hw, in_h, in_c, f_h, f_c) -> bool:
    return in_h == 1 and dil_hw[1] == 1 and f_h == 1 and (stride_hw[1] * in_c) % 4 == 0 \
        and in_c == f_c


def _conv_s8_mve(in_c: int, f_h: int, f_w: int) -> int:
    return 4 * ((in_c * f_w * f_h + 15) // 16) * 16


def _conv_s8_host(in_c: int, f_h: int, f_w: int) -> int:
    cols = f_w * f_h * in_c
    return 2 * (cols + (4 - cols % 4) % 4) * 2


def _conv_1_x_n_mve(pad_w, stride_w, in_w, in_c, f_h, f_w, out_w) -> int:
    total_pad = (out_w - 1) * stride_w + f_w - in_w
    asym = total_pad % 2
    right = max(1, (pad_w + asym + stride_w - 1) // stride_w) if pad_w + asym != 0 else 0
    left = max(1, (pad_w + stride_w - 1) // stride_w) if pad_w != 0 else 0
    no_pad = max(out_w - (right + left), 0)
    if right + no_pad + left != out_w:
        return _conv_s8_mve(in_c, f_h, f_w)
    pad_left = pad_w * in_c
    pad_right = right * in_c if asym else pad_left
    left_elems = f_w * in_c
    return max(left_elems + pad_left, left_elems - in_c + pad_right)


def _s8_only(function: str, data_type: DataType) -> None:
    if data_type is not DataType.A8W8:
        raise InvalidArgumentError(f"{function}: {data_type} is not sized here; only "
                                   "DataType.A8W8 (CMSIS-NN's s8 kernels) is")


def convolve_wrapper_buffer_size(backend: Backend, data_type: DataType = DataType.A8W8, *,
                                 input_nhwc, filter_nhwc, output_nhwc, padding_hw, stride_hw,
                                 dilation_hw) -> int:
    """``arm_convolve_wrapper_s8_get_buffer_size{_mve,_dsp,}`` (filter dims N=C_out, H, W,
    C=C_in). Each function takes ``(backend, data_type, **dims)``, as ExecuTorch's bindings
    do; only int8 x int8 (``DataType.A8W8``) is sized."""
    _s8_only("convolve_wrapper_buffer_size", data_type)
    _, in_h, in_w, in_c = input_nhwc
    _, f_h, f_w, f_c = filter_nhwc
    pad, stride, dil = tuple(padding_hw), tuple(stride_hw), tuple(dilation_hw)
    if _is_1x1(pad, stride, dil, in_c, f_h, f_w, f_c):
        return 0  # the fast 1x1 kernel's buffer exists only with armclang
    if _is_1_x_n(stride, dil, in_h, in_c, f_h, f_c):
        if backend is Backend.MVE:
            return _conv_1_x_n_mve(pad[1], stride[1], in_w, in_c, f_h, f_w, output_nhwc[2])
        return _conv_s8_host(in_c, f_h, f_w)
    return _conv_s8_mve(in_c, f_h, f_w) if backend is Backend.MVE else \
        _conv_s8_host(in_c, f_h, f_w)


def depthwise_conv_wrapper_buffer_size(backend: Backend, data_type: DataType = DataType.A8W8,
                                       *, input_nhwc, filter_nhwc,
                                       output_nhwc, padding_hw, stride_hw, dilation_hw) -> int:
    """``arm_depthwise_conv_wrapper_s8_get_buffer_size{_mve,_dsp,}`` (filter dims
    N=C_out, H, W, C=1)."""
    _s8_only("depthwise_conv_wrapper_buffer_size", data_type)
    in_n, _, _, in_c = input_nhwc
    f_n, f_h, f_w, f_c = filter_nhwc
    out_c = output_nhwc[3]
    plain = in_c == out_c and in_n == 1 and tuple(dilation_hw) == (1, 1)
    small_3x3 = f_w == 3 and f_h == 3 and padding_hw[0] <= 1 and padding_hw[1] <= 1
    if backend is Backend.MVE:
        size = 4 * CH_IN_BLOCK_MVE * f_w * f_h if plain else 0
        if in_c == 1 and out_c > DW_ONE_INPUT_CH_THRESHOLD:
            # converted to a regular convolution over a transposed filter
            conv = convolve_wrapper_buffer_size(
                backend, input_nhwc=input_nhwc, filter_nhwc=(f_c, f_h, f_w, f_n),
                output_nhwc=output_nhwc, padding_hw=padding_hw, stride_hw=stride_hw,
                dilation_hw=dilation_hw) + f_c * f_h * f_w * f_n
            size = max(size, conv)
        return size
    if backend is Backend.DSP:
        return 0 if not plain or small_3x3 else in_c * f_w * f_h * 2
    return 0  # the scalar kernels need no buffer


def fully_connected_buffer_size(backend: Backend, data_type: DataType = DataType.A8W8,
                                *, filter_nhwc) -> int:
    _s8_only("fully_connected_buffer_size", data_type)
    return filter_nhwc[3] * 4 if backend is Backend.MVE else 0


def avgpool_buffer_size(backend: Backend, data_type: DataType = DataType.A8W8,
                        *, dim_dst_width: int, ch_src: int) -> int:
    _s8_only("avgpool_buffer_size", data_type)
    return ch_src * 4 if backend is Backend.DSP else 0


def _reverse_conv(stride_hw, in_c: int) -> bool:
    return stride_hw[0] <= 2 and stride_hw[1] <= 2 and in_c > REVERSE_TCOL_EFFICIENT_THRESHOLD


def transpose_conv_buffer_size(backend: Backend, data_type: DataType = DataType.A8W8,
                               *, input_nhwc, filter_nhwc, output_nhwc,
                               stride_hw) -> int:
    """``arm_transpose_conv_s8_get_buffer_size{_mve,}`` (DSP uses the plain one)."""
    _s8_only("transpose_conv_buffer_size", data_type)
    n, in_h, in_w, in_c = input_nhwc
    _, f_h, f_w, _ = filter_nhwc
    if _reverse_conv(stride_hw, in_c):
        size = _conv_s8_mve if backend is Backend.MVE else _conv_s8_host
        return size(in_c, f_h, f_w)
    buf_x = ((in_w - 1) * stride_hw[1] + max(f_w, stride_hw[0])) * output_nhwc[3]
    return buf_x * max(f_h, stride_hw[0]) * 4


def transpose_conv_reverse_conv_buffer_size(backend: Backend, data_type: DataType = DataType.A8W8,
                                            *, input_nhwc, filter_nhwc,
                                            stride_hw) -> int:
    _s8_only("transpose_conv_reverse_conv_buffer_size", data_type)
    in_c = input_nhwc[3]
    f_n, f_h, f_w, _ = filter_nhwc
    return in_c * f_w * f_h * f_n if _reverse_conv(stride_hw, in_c) else 0
