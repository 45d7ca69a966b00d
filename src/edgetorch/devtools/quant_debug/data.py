"""The user's data for quantization debugging, mixed precision and sweeps.

Three sources, one result (a list of :class:`Sample`):

- a folder of ``.npy`` files, in name order. A model with ``k`` inputs takes them ``k`` files at
  a time (``0_ids.npy, 0_mask.npy, 1_ids.npy, ...``); a file holds one sample (the example
  input's shape) or several stacked along the batch dimension (``[n * B, ...]`` for an example
  batch of ``B``), which are split;
- a ``torch.utils.data.DataLoader`` or any iterable: each item is a tensor (one-input models) or
  a tuple/list whose first ``k`` entries are the inputs and whose rest is the target (a label the
  metric reads: ``TensorDataset(x, y)`` gives ``(x, y)``); batches larger than the example's are
  split;
- a list of :class:`Sample`.

The exported graph is specialised to the example's shapes, so every input must have them.
Arrays may come in another dtype of the same kind (float64 for float32); anything else is a
:class:`~edgetorch.errors.QuantDebugError` naming the file or item.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...errors import QuantDebugError

MAX_SAMPLES = 100_000  # a folder or loader larger than this is cut (every loop is bounded)


@dataclass(frozen=True)
class Sample:
    """One call of the model: its positional inputs, and the target the metric may read."""

    inputs: tuple[torch.Tensor, ...]
    target: Any = None


def load_samples(data: Any, example: Sequence[torch.Tensor], *, max_samples: int | None = None,
                 targets: Any = None) -> list[Sample]:
    """``data`` (a folder of .npy files, a DataLoader, an iterable or samples) as samples
    shaped like ``example``. ``targets`` (an array or a ``.npy`` path, one row per sample)
    labels samples that carry none."""
    limit = min(max_samples or MAX_SAMPLES, MAX_SAMPLES)
    example = tuple(example)
    if isinstance(data, (str, Path)):
        samples = _from_folder(Path(data), example, limit)
    else:
        samples = _from_iterable(data, example, limit)
    if not samples:
        raise QuantDebugError(f"no samples in {_describe(data)}; give at least one input "
                              f"shaped like the example ({_shapes(example)})")
    if targets is not None:
        samples = _with_targets(samples, targets)
    return samples


def shard(samples: Sequence[Sample], count: int) -> list[list[Sample]]:
    """``samples`` cut into ``count`` contiguous shards (as even as possible, none empty)."""
    count = max(1, min(int(count), len(samples)))
    size, extra = divmod(len(samples), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (i < extra)
        out.append(list(samples[start:end]))
        start = end
    return out


def _describe(data: Any) -> str:
    return str(data) if isinstance(data, (str, Path)) else type(data).__name__


def _shapes(example: Sequence[torch.Tensor]) -> str:
    return ", ".join(f"{t.dtype}{list(t.shape)}" for t in example)


def _from_folder(folder: Path, example: tuple[torch.Tensor, ...], limit: int) -> list[Sample]:
    if not folder.is_dir():
        raise QuantDebugError(f"{folder} is not a folder; give a folder of .npy files, a "
                              "DataLoader or an iterable of inputs")
    files = sorted(folder.glob("*.npy"))[: limit * len(example)]
    k = len(example)
    if not files or len(files) % k:
        raise QuantDebugError(f"{folder}: found {len(files)} .npy file(s); the model takes {k} "
                              f"input(s) per sample, so give a positive multiple of {k} files")
    samples: list[Sample] = []
    for i in range(0, len(files), k):
        # allow_pickle=False: a .npy holding objects is refused, never unpickled
        group = [np.load(f, allow_pickle=False) for f in files[i:i + k]]
        names = ", ".join(f.name for f in files[i:i + k])
        samples += _split([torch.from_numpy(np.ascontiguousarray(a)) for a in group], example,
                          None, names)
        if len(samples) >= limit:
            break
    return samples[:limit]


def _from_iterable(data: Iterable, example: tuple[torch.Tensor, ...],
                   limit: int) -> list[Sample]:
    k = len(example)
    samples: list[Sample] = []
    try:
        iterator = iter(data)
    except TypeError:
        raise QuantDebugError(f"cannot read samples from a {type(data).__name__}; give a folder "
                              "of .npy files, a DataLoader or an iterable") from None
    for n, item in enumerate(iterator):
        if len(samples) >= limit:
            break
        if isinstance(item, Sample):
            samples.append(item)
            continue
        if isinstance(item, dict):
            raise QuantDebugError(f"item {n} is a dict; give the model's positional inputs as a "
                                  "tuple (inputs first, then the target)")
        parts = list(item) if isinstance(item, (tuple, list)) else [item]
        if len(parts) < k:
            raise QuantDebugError(f"item {n} has {len(parts)} value(s); the model takes {k} "
                                  "input(s)")
        rest = parts[k:]
        target = None if not rest else rest[0] if len(rest) == 1 else tuple(rest)
        inputs = [_as_tensor(p, f"item {n}") for p in parts[:k]]
        samples += _split(inputs, example, target, f"item {n}")
    return samples[:limit]


def _as_tensor(value: Any, where: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    raise QuantDebugError(f"{where}: an input is a {type(value).__name__}; give tensors or "
                          "NumPy arrays")


def _split(inputs: list[torch.Tensor], example: tuple[torch.Tensor, ...], target: Any,
           where: str) -> list[Sample]:
    """One sample, or several when every input stacks whole example batches."""
    counts = []
    cast = []
    for j, (value, ex) in enumerate(zip(inputs, example)):
        value = _same_kind(value, ex, f"{where} input {j}")
        cast.append(value)
        if tuple(value.shape) == tuple(ex.shape):
            counts.append(1)
        elif (value.dim() == ex.dim() and ex.dim() > 0 and tuple(value.shape[1:]) ==
              tuple(ex.shape[1:]) and ex.shape[0] > 0 and value.shape[0] % ex.shape[0] == 0):
            counts.append(value.shape[0] // ex.shape[0])
        else:
            raise QuantDebugError(
                f"{where} input {j} is {value.dtype}{list(value.shape)}; the exported graph "
                f"takes {ex.dtype}{list(ex.shape)} (or whole batches of it stacked on dim 0)")
    if len(set(counts)) != 1:
        raise QuantDebugError(f"{where}: the inputs stack different numbers of samples "
                              f"({counts}); stack them alike")
    n = counts[0]
    if n == 1:
        return [Sample(tuple(cast), target)]
    targets = _split_target(target, n, example[0].shape[0])
    return [Sample(tuple(v[i * ex.shape[0]:(i + 1) * ex.shape[0]] for v, ex in zip(cast, example)),
                   targets[i]) for i in range(n)]


def _split_target(target: Any, n: int, batch: int) -> list[Any]:
    if isinstance(target, (torch.Tensor, np.ndarray)) and len(target) == n * batch:
        return [target[i * batch:(i + 1) * batch] for i in range(n)]
    return [target] * n


def _same_kind(value: torch.Tensor, ex: torch.Tensor, where: str) -> torch.Tensor:
    if value.dtype == ex.dtype:
        return value
    kinds = (value.dtype.is_floating_point, ex.dtype.is_floating_point)
    if kinds[0] == kinds[1] and ex.dtype != torch.bool and value.dtype != torch.bool:
        return value.to(ex.dtype)
    raise QuantDebugError(f"{where} is {value.dtype}; the model takes {ex.dtype} (convert it "
                          "first)")


def _with_targets(samples: list[Sample], targets: Any) -> list[Sample]:
    if isinstance(targets, (str, Path)):
        targets = np.load(targets, allow_pickle=False)
    targets = np.asarray(targets)
    per = len(targets) // len(samples) if len(samples) else 0
    if per < 1 or len(targets) != per * len(samples):
        raise QuantDebugError(f"{len(targets)} targets for {len(samples)} samples; give one "
                              "row per sample (or per batch element)")
    return [Sample(s.inputs, torch.from_numpy(np.ascontiguousarray(
        targets[i * per:(i + 1) * per]))) for i, s in enumerate(samples)]
