"""Building quantized XNNPACK graphs by hand, as ExecuTorch 1.5.1 encodes them: qint8
activations with inline ``PerTensorQuant``, qcint8 / qcint32 weights and biases whose float32
scales live in named data ``"scale_" + sha256``, qbint4 weights packed two per byte with bf16
block scales, qdint8 per-token activations. (Imported by module name, like ``xnn_helpers``.)
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
from xnn_helpers import INVALID, GraphBuilder

from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.runtime.backend import compile_blob, run
from edgetorch.backends.xnnpack.serialization import (
    deserialize_xnnpack_binary,
    serialize_xnnpack_binary,
)

D = x.XNNDatatype


class QGraphBuilder(GraphBuilder):
    def _named(self, data: bytes, prefix: str = "") -> int:
        key = prefix + hashlib.sha256(data).hexdigest()
        self.named[key] = data
        self.constant_data.append(x.ConstantDataOffset(x.UINT64_MAX, len(data), key))
        return len(self.constant_data) - 1

    def _qvalue(self, dims, dtype: D, params, buffer: int = 0) -> int:
        vid = len(self.values)
        t = x.XNNTensorValue(dtype, len(dims), list(dims), buffer, INVALID, 0, vid)
        self.values.append(x.XNNQuantizedTensorValue(t, params))
        return vid

    def qint8(self, *dims: int, scale: float, zp: int) -> int:
        return self._qvalue(dims, D.xnn_datatype_qint8, x.PerTensorQuant(scale, zp))

    def qdint8(self, *dims: int, nnb: int = 1) -> int:
        return self._qvalue(dims, D.xnn_datatype_qdint8, x.PerTokenDynamicQuant(nnb))

    def per_channel(self, q: np.ndarray, scales: np.ndarray, channel_dim: int = 0,
                    dtype: D = D.xnn_datatype_qcint8, inline: bool = False,
                    num_scales: int | None = None) -> int:
        """A per-channel constant (int8 weights, or int32 bias with dtype qcint32)."""
        data = np.ascontiguousarray(q).tobytes()
        sc = np.asarray(scales, np.float32)
        if inline:
            params = x.PerChannelQuant([float(s) for s in sc], channel_dim, 0, 0)
        else:
            idx = self._named(sc.tobytes(), "scale_")
            params = x.PerChannelQuant([], channel_dim, idx,
                                       len(sc) if num_scales is None else num_scales)
        return self._qvalue(q.shape, dtype, params, self._named(data))

    def per_tensor_const(self, q: np.ndarray, scale: float, zp: int,
                         dtype: D = D.xnn_datatype_qint8) -> int:
        return self._qvalue(q.shape, dtype, x.PerTensorQuant(scale, zp),
                            self._named(np.ascontiguousarray(q).tobytes()))

    def qbint4(self, q: np.ndarray, scales: np.ndarray, group: int,
               num_scales: int | None = None) -> int:
        """int4 weights ``q`` [O, K] in [-8, 7]; ``scales`` [O, K/group] stored as bf16."""
        u = (q.astype(np.int16) + 8).astype(np.uint8)
        packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
        bf16 = (np.asarray(scales, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        idx = self._named(bf16.tobytes(), "scale_")
        params = x.PerChannelGroupQuant([], 0, group, idx,
                                        bf16.size if num_scales is None else num_scales)
        return self._qvalue(q.shape, D.xnn_datatype_qbint4, params,
                            self._named(packed.tobytes()))

    def build(self) -> x.XNNGraph:
        for ext, vid in enumerate(self._inputs + self._outputs):
            self.values[vid].external_id = ext
        return x.XNNGraph(
            version="0", xnodes=self.nodes, xvalues=[x.XValue(v) for v in self.values],
            num_externs=len(self._inputs) + len(self._outputs), input_ids=list(self._inputs),
            output_ids=list(self._outputs), constant_data=self.constant_data)


def run_graph(b: QGraphBuilder, *inputs: np.ndarray) -> list[np.ndarray]:
    """Serialize, parse, compile and run ``b``'s graph on float32 inputs."""
    g = compile_blob(deserialize_xnnpack_binary(serialize_xnnpack_binary(b.build())),
                     b.named.__getitem__)
    outs = [np.zeros(d, np.float32) for d in b.output_dims]
    values = [np.ascontiguousarray(a, np.float32) for a in inputs] + outs
    run(g, values, list(range(len(values))))
    return outs


def compile_graph(b: QGraphBuilder):
    return compile_blob(deserialize_xnnpack_binary(serialize_xnnpack_binary(b.build())),
                        b.named.__getitem__)


def quantize_ref(v: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """Round-to-nearest-even quantization in float64 (the test's own reference)."""
    return np.clip(np.rint(np.asarray(v, np.float64) / scale) + zp, -128, 127)


def dequantize_ref(q: np.ndarray, scale, zp) -> np.ndarray:
    return (np.asarray(q, np.float64) - zp) * scale


def sym_weights(rng: np.random.Generator, shape, axis: int = 0, bits: int = 8):
    """Random symmetric per-channel quantized weights: (int values, scales along ``axis``)."""
    top = 2 ** (bits - 1) - 1
    q = rng.integers(-top, top + 1, size=shape).astype(np.int8)
    scales = rng.uniform(0.002, 0.02, size=shape[axis]).astype(np.float32)
    return q, scales


def out_range(values: np.ndarray) -> tuple[float, int]:
    """An output (scale, zero point) covering ``values`` (asymmetric int8)."""
    lo, hi = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
    scale = max((hi - lo) / 255.0, 1e-6)
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return float(np.float32(scale)), zp


__all__ = ["QGraphBuilder", "run_graph", "compile_graph", "quantize_ref", "dequantize_ref",
           "sym_weights", "out_range", "D", "INVALID", "math"]
