"""qdint8 x qbint4 fully connected layers (XNNPACK's ``qd8-f32-qb4w-gemm``, torchao's 8da4w).

The int4 weights stay packed (half a byte a weight, as in the ``.pte``), re-tiled once at load
into ``[O/T, K/2, T]`` bytes: tile ``t`` holds output channels ``t*T .. t*T+T-1`` side by side,
so a compiled loop (``edgetorch.kernels.accel``) updates T outputs per weight byte with no
horizontal sums. The byte of column pair ``p`` keeps the ``.pte``'s nibble order: column
``2p`` in the low nibble, ``2p+1`` in the high one, both ``+8``.

Numerics (bit-exact with ExecuTorch 1.5.1's XNNPACK for a decode row, and the same for every
path here): each block's exact integer sum ``sum (x - x_zp) * (w - 8)``, times the block's
float32 scale (from bf16), summed over the blocks in order in float32, times the row's input
scale, plus the bias. The compiled loop sums in int32 (``|sum| <= 255 * 8 * block``); the
NumPy path gets the same integers from float32 BLAS products (exact while below ``2**24``).

Without numba (or with ``EDGETORCH_ACCEL=0``) the NumPy path unpacks the weights once, on its
first call, into float32 blocks ``[K/block, block, O]`` (8x the packed size) kept for later
calls, and gets every block's sum from one batched BLAS product. With numba, prompts of many
tokens use the same BLAS product on blocks unpacked into a per-thread scratch per call (BLAS
beats the loop there), so the float32 copy is never kept.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ....kernels import accel
from ....runtime.file_pages import release_file_pages
from .kernels_quant import DynQ, unpack_int4

F32 = np.float32
TILE = 64  # output channels per tile: one 512-bit vector of int32 sums per 16
BLAS_ROWS = 160  # from about this many rows on, BLAS (after unpacking) beats the loop


@accel.jit
def _gemm_tiles(pk, sc, xc, rs, bias, has_bias, out):  # pragma: no cover - compiled
    """``out[m, o]`` for packed tiles ``pk`` ``[nt, K/2, T]`` (uint8), block scales ``sc``
    ``[nt, nb, T]``, centered inputs ``xc`` ``[M, K]`` (float32 integers), row scales ``rs``."""
    nt, kh, t_ = pk.shape
    nb = sc.shape[1]
    gh = kh // nb  # byte columns per block
    m_, o_ = xc.shape[0], out.shape[1]
    xi = np.empty((m_, 2 * kh), np.int32)
    zs = np.empty((m_, nb), np.int32)  # 8 * each block's input sum: the weights' zero point
    for m in range(m_):
        for g in range(nb):
            s = 0
            for k in range(2 * g * gh, 2 * (g + 1) * gh):
                v = np.int32(xc[m, k])
                xi[m, k] = v
                s += v
            zs[m, g] = 8 * s
    facc = np.empty((m_, t_), np.float32)
    iacc = np.empty((m_, t_), np.int32)
    for t in range(nt):
        facc[:] = 0
        for g in range(nb):
            iacc[:] = 0
            for p in range(g * gh, (g + 1) * gh):
                for m in range(m_):
                    xe = xi[m, 2 * p]
                    xo = xi[m, 2 * p + 1]
                    for j in range(t_):
                        b = np.int32(pk[t, p, j])
                        iacc[m, j] += xe * (b & 15) + xo * (b >> 4)
            for m in range(m_):
                for j in range(t_):
                    # float32 product, then float32 sum: no fused multiply-add (not fastmath)
                    facc[m, j] += np.float32(iacc[m, j] - zs[m, g]) * sc[t, g, j]
        for m in range(m_):
            for j in range(t_):
                o = t * t_ + j
                if o < o_:
                    v = facc[m, j] * rs[m]
                    out[m, o] = v + bias[o] if has_bias else v
    return out


@accel.jit
def _unpack_blocks(pk, o_, out):  # pragma: no cover - compiled
    """Packed tiles -> float32 blocks ``out`` ``[nb, block, O]`` of ``w - 8``."""
    nt, kh, t_ = pk.shape
    block = out.shape[1]
    gh = block // 2
    for t in range(nt):
        for p in range(kh):
            g, r = p // gh, 2 * (p % gh)
            for j in range(t_):
                o = t * t_ + j
                if o < o_:
                    b = np.int32(pk[t, p, j])
                    out[g, r, o] = np.float32((b & 15) - 8)
                    out[g, r + 1, o] = np.float32((b >> 4) - 8)
    return out


_NO_BIAS = np.zeros(1, F32)
_scratch = threading.local()  # per-thread float32 blocks for the BLAS path (largest layer)


def _shared_blocks(shape: tuple[int, int, int], dtype: np.dtype) -> np.ndarray:
    need = shape[0] * shape[1] * shape[2]
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.size < need or buf.dtype != dtype:
        buf = _scratch.buf = np.empty(max(need, 0 if buf is None else buf.size), dtype)
    return buf[:need].reshape(shape)


class Blockwise:
    """qbint4 weights ``[O, K]`` prepared once for :func:`dynamic_fc_blockwise`.

    ``packed``: uint8 ``[O, K/2]`` as in the ``.pte``; ``block_scale``: float32 ``[O, K/block]``.
    """

    def __init__(self, packed: np.ndarray, o: int, k: int, block_scale: np.ndarray,
                 block: int) -> None:
        self.o, self.k, self.block, self.nb = o, k, block, k // block
        self.acc_dtype = np.dtype(F32 if 255 * 8 * block < 2**24 else np.float64)
        nt = -(-o // TILE)
        b = np.full((nt * TILE, k // 2), 0x88, np.uint8)  # padding channels: weights 0
        b[:o] = np.asarray(packed, np.uint8).reshape(o, k // 2)
        self.tiles = np.ascontiguousarray(b.reshape(nt, TILE, k // 2).transpose(0, 2, 1))
        s = np.zeros((nt * TILE, self.nb), F32)
        s[:o] = block_scale
        self.tile_scale = np.ascontiguousarray(s.reshape(nt, TILE, self.nb).transpose(0, 2, 1))
        self._blocks: np.ndarray | None = None  # float32 blocks of the NumPy path, on demand
        self._scale: np.ndarray | None = None  # their scales [nb, 1, O], likewise
        self._acc: dict[int, np.ndarray] = {}
        release_file_pages(packed)  # the tiles are a copy: the .pte's bytes are not read again

    @property
    def scale(self) -> np.ndarray:
        """float32 ``[nb, 1, O]`` block scales, as the NumPy path multiplies them."""
        if self._scale is None:
            s = self.tile_scale.transpose(1, 0, 2).reshape(self.nb, -1)[:, : self.o]
            self._scale = np.ascontiguousarray(s)[:, None, :]
        return self._scale

    @property
    def nbytes(self) -> int:
        """Bytes held: the packed tiles and scales (plus the NumPy path's blocks once made)."""
        extra = sum(a.nbytes for a in (self._blocks, self._scale) if a is not None)
        return self.tiles.nbytes + self.tile_scale.nbytes + extra

    def int_weights(self) -> np.ndarray:
        """int8 ``[O, K]`` (values -8..7): the weights as the ``.pte`` defines them."""
        packed = self.tiles.transpose(0, 2, 1).reshape(-1, self.k // 2)[: self.o]
        return unpack_int4(np.ascontiguousarray(packed), self.o, self.k)

    def blocks(self, keep: bool) -> np.ndarray:
        """float32 ``[nb, block, O]`` of the centered weights: kept (``keep``, the NumPy path)
        or written into the thread's scratch (the compiled path's long prompts)."""
        if self._blocks is not None:
            return self._blocks
        shape = (self.nb, self.block, self.o)
        if keep or not accel.available():
            w = self.int_weights().reshape(self.o, self.nb, self.block).transpose(1, 2, 0)
            blocks = np.ascontiguousarray(w, self.acc_dtype)
            if keep:
                self._blocks = blocks
            return blocks
        return _unpack_blocks(self.tiles, self.o, _shared_blocks(shape, self.acc_dtype))

    def block_sums(self, xc: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``[nb, M, O]`` exact integer sums of each block (``xc``: centered ``[M, K]``)."""
        m = xc.shape[0]
        acc = self._acc.get(m)
        if acc is None:
            if len(self._acc) > 8:  # many prompt lengths: keep the buffers bounded
                self._acc.clear()
            acc = self._acc[m] = np.empty((self.nb, m, self.o), self.acc_dtype)
        xb = xc.reshape(m, self.nb, self.block).transpose(1, 0, 2)
        return np.matmul(xb, w, out=acc)


def _centered(x: DynQ, dtype: np.dtype) -> np.ndarray:
    if x.qc is not None and x.qc.dtype == dtype:
        return x.qc
    xc = x.q.astype(dtype)
    xc -= x.zero_point.reshape(x.zero_point.shape + (1,) * x.num_nonbatch_dims)
    return xc


def dynamic_fc_blockwise(x: DynQ, wb: Blockwise, bias: np.ndarray | None) -> np.ndarray:
    """qdint8 x qbint4 (``qd8-f32-qb4w-gemm``) -> float32.

    XNNPACK folds the input zero point in through a precomputed float ``ksum``; we fold it into
    the integer sums (measured bit-exact with ExecuTorch 1.5.1's XNNPACK on SmolLM2 layers)."""
    lead = x.q.shape[:-1]
    rows = math.prod(lead)
    compiled = accel.available() and wb.acc_dtype == F32
    if compiled and rows < BLAS_ROWS:
        xc = _centered(x, np.dtype(F32)).reshape(rows, wb.k)
        if x.scale.shape == lead:  # one scale per row (num_nonbatch_dims 1): the usual case
            rs = x.scale.reshape(rows)
        else:
            rs = np.broadcast_to(x.row_scale(len(lead) + 1), lead + (1,)).reshape(rows)
        out = np.empty((rows, wb.o), F32)
        _gemm_tiles(wb.tiles, wb.tile_scale, np.ascontiguousarray(xc),
                    np.ascontiguousarray(rs, F32), _NO_BIAS if bias is None else bias,
                    bias is not None, out)
        return out.reshape(lead + (wb.o,))
    xc = _centered(x, wb.acc_dtype).reshape(rows, wb.k)
    acc = wb.block_sums(xc, wb.blocks(keep=not compiled))
    if acc.dtype != F32:
        acc = acc.astype(F32)
    acc *= wb.scale
    out = np.add.reduce(acc, axis=0)  # over the outer axis: block 0, then 1, ... (in order)
    out = out.reshape(lead + (wb.o,))
    out *= x.row_scale(len(lead) + 1)
    if bias is not None:
        out += bias
    return out
