"""Malformed quantized XNNPACK values raise typed errors when the delegate is loaded."""

from __future__ import annotations

import numpy as np
import pytest
from xnn_qhelpers import INVALID, QGraphBuilder, compile_graph

from edgetorch.backends.xnnpack import schema as x
from edgetorch.errors import EdgeTorchError, FormatError, InvalidProgramError

D = x.XNNDatatype


def _fc(b: QGraphBuilder, wid: int, k: int = 64, n: int = 4, dynamic: bool = True) -> None:
    i = b.input(2, k)
    o = b.output(2, n)
    if dynamic:
        q = b.qdint8(2, k)
        b.node(x.XNNConvert(i, q))
        b.node(x.XNNFullyConnected(q, wid, INVALID, o))
    else:
        q = b.qint8(2, k, scale=0.1, zp=0)
        qo = b.qint8(2, n, scale=0.1, zp=0)
        b.node(x.XNNConvert(i, q))
        b.node(x.XNNFullyConnected(q, wid, INVALID, qo))
        b.node(x.XNNConvert(qo, o))


W8 = np.ones((4, 64), np.int8)
W4 = np.zeros((4, 64), np.int8)


def _bad_channel_dim(b):
    _fc(b, b.per_channel(W8, np.ones(4), channel_dim=2))


def _scale_count_inline(b):
    _fc(b, b.per_channel(W8, np.ones(3), inline=True))


def _scale_count_num_scales(b):
    _fc(b, b.per_channel(W8, np.ones(4), num_scales=5))


def _scale_buffer_short(b):
    _fc(b, b.per_channel(W8, np.ones(2), num_scales=4))


def _scales_on_wrong_axis(b):
    _fc(b, b.per_channel(np.ones((4, 4), np.int8), np.ones(4), channel_dim=1), k=4)


def _group_not_dividing(b):
    _fc(b, b.qbint4(W4, np.ones((4, 2)), group=48))


def _group_scale_count(b):
    _fc(b, b.qbint4(W4, np.ones((4, 2)), group=32, num_scales=6))


def _zero_scale(b):
    wid = b._qvalue((4, 64), D.xnn_datatype_qint8, x.PerTensorQuant(0.0, 0),
                    b._named(W8.tobytes()))
    _fc(b, wid, dynamic=False)


def _wrong_datatype(b):
    wid = b._qvalue((4, 64), D.xnn_datatype_qcint8, x.PerTensorQuant(0.1, 0),
                    b._named(W8.tobytes()))
    _fc(b, wid, dynamic=False)


def _dynamic_constant(b):
    wid = b._qvalue((4, 64), D.xnn_datatype_qdint8, x.PerTokenDynamicQuant(1),
                    b._named(W8.tobytes()))
    _fc(b, wid)


def _nonbatch_dims(b):
    i = b.input(2, 8)
    q = b._qvalue((2, 8), D.xnn_datatype_qdint8, x.PerTokenDynamicQuant(3))
    b.node(x.XNNConvert(i, q))


def _truncated_int4(b):
    wid = b._qvalue((4, 64), D.xnn_datatype_qbint4,
                    x.PerChannelGroupQuant([], 0, 32, b._named(b"\0" * 16, "scale_"), 8),
                    b._named(b"\0" * 100))
    _fc(b, wid)


def _static_input_to_dynamic_weights_mix(b):
    # a static FC whose output is float: not something XNNPACK defines
    i = b.input(2, 64)
    q = b.qint8(2, 64, scale=0.1, zp=0)
    o = b.output(2, 4)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNFullyConnected(q, b.per_channel(W8, np.ones(4)), INVALID, o))


CASES = [_bad_channel_dim, _scale_count_inline, _scale_count_num_scales, _scale_buffer_short,
         _scales_on_wrong_axis, _group_not_dividing, _group_scale_count, _zero_scale,
         _wrong_datatype, _dynamic_constant, _nonbatch_dims, _truncated_int4,
         _static_input_to_dynamic_weights_mix]


@pytest.mark.parametrize("case", CASES, ids=lambda f: f.__name__.strip("_"))
def test_malformed_quantized_value_is_a_typed_error(case):
    b = QGraphBuilder()
    case(b)
    with pytest.raises((FormatError, InvalidProgramError)) as info:
        compile_graph(b)
    assert "XNNPACK" in str(info.value)


def test_every_field_corruption_of_a_quantized_graph_fails_cleanly():
    """Flip each quantization field of a valid graph to odd values: a typed error or a graph
    that compiles, never another exception."""
    outcomes = set()
    for field, bad in [("channel_dim", -1), ("channel_dim", 7), ("num_scales", 0),
                       ("num_scales", 2**31), ("scale_buffer_idx", 99), ("group_size", 0),
                       ("group_size", 2**31 - 1)]:
        b = QGraphBuilder()
        wid = b.qbint4(W4, np.ones((4, 2)), group=32) if "group" in field else \
            b.per_channel(W8, np.ones(4))
        _fc(b, wid)
        setattr(b.values[wid].quant_params, field, bad)
        try:
            compile_graph(b)
            outcomes.add("ok")
        except EdgeTorchError:
            outcomes.add("error")
    assert "error" in outcomes
