"""What is measured: per layer (SQNR, cosine, max abs error, saturated share, accumulated over
the user's samples) and per model output (top-1, cosine, SQNR against float), and the targets
mixed precision aims at (``"top1_drop<=1"``, ``"cosine>=0.99"``).

SQNR is ``10 log10(sum ref^2 / sum (ref - x)^2)`` over every element of every sample (torchao's
``compute_error`` in dB, pooled); infinite when the values are equal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import QuantDebugError

SQNR_CAP = 100.0  # dB; equal values (infinite SQNR) count as this much when ranking drops


@dataclass(frozen=True)
class QRange:
    """A layer's output quantizer: values land on ``(q - zero_point) * scale`` with ``q`` in
    ``[qmin, qmax]``."""

    scale: float
    zero_point: int
    qmin: int
    qmax: int

    def saturated(self, value: np.ndarray) -> int:
        """How many values sit at (or beyond) an end of the integer range. An end that is
        exactly zero (a ReLU's ``qmin`` when the zero point is ``qmin``) is not counted:
        zeros land there without clipping."""
        q = value.astype(np.float64) / self.scale + self.zero_point
        hits = np.zeros(q.shape, dtype=bool)
        if self.zero_point != self.qmax:
            hits |= q >= self.qmax - 0.5
        if self.zero_point != self.qmin:
            hits |= q <= self.qmin + 0.5
        return int(np.count_nonzero(hits))


class Accumulator:
    """Running sums for one layer at one stage, compared with a reference (float, or the
    previous stage)."""

    __slots__ = ("ref2", "err2", "dot", "val2", "max_abs", "saturated", "numel", "count")

    def __init__(self) -> None:
        self.ref2 = self.err2 = self.dot = self.val2 = self.max_abs = 0.0
        self.saturated = self.numel = self.count = 0

    def add(self, ref: np.ndarray, value: np.ndarray, qrange: QRange | None = None) -> None:
        r = ref.astype(np.float64, copy=False).reshape(-1)
        v = value.astype(np.float64, copy=False).reshape(-1)
        d = r - v
        self.ref2 += float(r @ r)
        self.err2 += float(d @ d)
        self.dot += float(r @ v)
        self.val2 += float(v @ v)
        if d.size:
            self.max_abs = max(self.max_abs, float(np.max(np.abs(d))))
        if qrange is not None:
            self.saturated += qrange.saturated(v)
        self.numel += v.size
        self.count += 1

    def sqnr(self) -> float:
        if self.count == 0:
            return math.nan
        if self.err2 == 0.0:
            return math.inf
        if self.ref2 == 0.0:
            return -math.inf
        return 10.0 * math.log10(self.ref2 / self.err2)

    def cosine(self) -> float:
        if self.count == 0:
            return math.nan
        if self.ref2 == 0.0 or self.val2 == 0.0:
            return 1.0 if self.ref2 == self.val2 else 0.0
        return self.dot / math.sqrt(self.ref2 * self.val2)


def capped(db: float) -> float:
    """SQNR clipped to ``[-SQNR_CAP, SQNR_CAP]`` (so drops between equal values are finite)."""
    if math.isnan(db):
        return db
    return max(-SQNR_CAP, min(SQNR_CAP, db))


def sqnr_db(ref: np.ndarray, value: np.ndarray) -> float:
    acc = Accumulator()
    acc.add(np.asarray(ref), np.asarray(value))
    return acc.sqnr()


# ---- model-level metrics: metric(outputs, samples, reference_outputs) -> float ---------------

Metric = Callable[[Sequence[np.ndarray], Sequence[Any], Sequence[np.ndarray]], float]


def top1(outputs: Sequence[np.ndarray], samples: Sequence[Any],
         reference: Sequence[np.ndarray]) -> float:
    """Percent of rows whose arg-max over the last dimension equals the sample's target."""
    hits = total = 0
    for out, sample in zip(outputs, samples):
        if sample.target is None:
            raise QuantDebugError("the top1 metric needs targets: give (inputs..., label) items, "
                                  "or --labels FILE.npy with one label per sample")
        pred = np.asarray(out).reshape(-1, np.asarray(out).shape[-1]).argmax(-1)
        want = np.asarray(sample.target).reshape(-1)
        if want.size != pred.size:
            raise QuantDebugError(f"a target has {want.size} labels for {pred.size} predictions")
        hits += int(np.count_nonzero(pred == want))
        total += pred.size
    return 100.0 * hits / max(total, 1)


def cosine(outputs: Sequence[np.ndarray], samples: Sequence[Any],
           reference: Sequence[np.ndarray]) -> float:
    """Mean cosine similarity between each output row and the float model's."""
    sims = []
    for out, ref in zip(outputs, reference):
        a = np.asarray(out, np.float64).reshape(-1, np.asarray(out).shape[-1])
        b = np.asarray(ref, np.float64).reshape(a.shape)
        na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
        sims += list(np.where(na * nb > 0, (a * b).sum(-1) / np.maximum(na * nb, 1e-300),
                              (na == nb).astype(np.float64)))
    return float(np.mean(sims)) if sims else math.nan


def sqnr(outputs: Sequence[np.ndarray], samples: Sequence[Any],
         reference: Sequence[np.ndarray]) -> float:
    """SQNR (dB) of the outputs against the float model's, pooled over the samples."""
    acc = Accumulator()
    for out, ref in zip(outputs, reference):
        acc.add(np.asarray(ref), np.asarray(out))
    return acc.sqnr()


METRICS: dict[str, Metric] = {"top1": top1, "cosine": cosine, "sqnr": sqnr}


def resolve_metric(metric: str | Metric) -> tuple[str, Metric]:
    if callable(metric):
        return getattr(metric, "__name__", "metric"), metric
    fn = METRICS.get(str(metric))
    if fn is None:
        raise QuantDebugError(f"unknown metric {metric!r}; use one of {sorted(METRICS)} or a "
                              "callable(outputs, samples, float_outputs) -> float")
    return str(metric), fn


_TARGET = re.compile(r"^\s*(\w+?)(_drop)?\s*(<=|>=)\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Target:
    """What mixed precision must reach: ``metric`` at least ``min_value``, or at most
    ``max_drop`` below the float model's value of it (``"top1_drop<=1"``, ``"cosine>=0.99"``)."""

    metric: str | Metric = "top1"
    min_value: float | None = None
    max_drop: float | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        m = _TARGET.match(text)
        if m is None:
            raise QuantDebugError(f"target {text!r} is not '<metric>_drop<=N' or "
                                  "'<metric>>=N' (e.g. top1_drop<=1, cosine>=0.99)")
        name, drop, op, number = m.group(1), m.group(2), m.group(3), float(m.group(4))
        resolve_metric(name)
        if drop and op == "<=":
            return cls(name, max_drop=number)
        if not drop and op == ">=":
            return cls(name, min_value=number)
        raise QuantDebugError(f"target {text!r}: use '{name}_drop<=N' or '{name}>=N'")

    def met(self, value: float, float_value: float) -> bool:
        if math.isnan(value):
            return False
        if self.max_drop is not None and float_value - value > self.max_drop + 1e-9:
            return False
        return self.min_value is None or value >= self.min_value - 1e-12

    def __str__(self) -> str:
        name = resolve_metric(self.metric)[0]
        if self.max_drop is not None:
            return f"{name}_drop<={self.max_drop:g}"
        return f"{name}>={self.min_value:g}"
