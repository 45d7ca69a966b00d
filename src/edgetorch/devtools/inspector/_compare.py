"""``compare_results`` (``executorch.devtools.inspector.compare_results``): SNR, MSE and cosine
similarity of a run's outputs against reference outputs, printed or plotted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _pairs(reference: list[Any], values: list[Any], fn: Callable[[np.ndarray, np.ndarray], float]
           ) -> list[float | None]:
    out: list[float | None] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for ref, value in zip(reference or [], values or []):
            if _is_tensor(ref) and _is_tensor(value):
                out.append(round(float(fn(_f32(ref), _f32(value))), 2))
            else:
                out.append(None)  # only tensors are compared, as in ExecuTorch
    return out


def _is_tensor(v: Any) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype")


def _f32(v: Any) -> np.ndarray:
    return np.asarray(v.detach() if hasattr(v, "detach") else v, dtype=np.float32)


def _snr(ref: np.ndarray, value: np.ndarray) -> float:
    noise = ref - value
    return 10 * np.log10(np.mean(ref ** 2) / np.mean(noise ** 2))


def _mse(ref: np.ndarray, value: np.ndarray) -> float:
    return np.mean((ref - value) ** 2)


def _cosine(ref: np.ndarray, value: np.ndarray) -> float:
    if ref.shape != value.shape:
        raise ValueError(f"cosine similarity needs equal shapes, got {ref.shape} and "
                         f"{value.shape}")
    return np.sum(ref * value) / (np.sqrt(np.sum(ref ** 2)) * np.sqrt(np.sum(value ** 2)))


def calculate_snr(reference: list[Any], values: list[Any]) -> list[float | None]:
    """Signal-to-noise ratio in dB of each output against its reference (2 decimals)."""
    return _pairs(reference, values, _snr)


def calculate_mse(reference: list[Any], values: list[Any]) -> list[float | None]:
    """Mean squared error of each output against its reference (2 decimals)."""
    return _pairs(reference, values, _mse)


def calculate_cosine_similarity(reference: list[Any], values: list[Any]) -> list[float | None]:
    """Cosine similarity of each output with its reference (2 decimals)."""
    return _pairs(reference, values, _cosine)


METRICS = {"snr": calculate_snr, "mse": calculate_mse,
           "cosine_similarity": calculate_cosine_similarity}


def compare_results(reference_output: list[Any], run_output: list[Any],
                    metrics: list[str] | None = None, plot: bool = False
                    ) -> dict[str, list[float | None]]:
    """{metric: one value per output}; printed, or plotted to ``<metric>_output_plot.png``."""
    results = {}
    for name, fn in METRICS.items():
        if metrics is not None and name not in metrics:
            continue
        results[name] = result = fn(reference_output, run_output)
        if plot:
            plot_metric(result, name)
        else:
            print(name)
            print("-" * 20)
            for index, value in enumerate(result):
                print(f"{index:<5}{value:>8.5f}" if value is not None else f"{index:<5}None")
            print("\n")
    return results


def plot_metric(result: list[float | None], metric_name: str) -> str:
    """A bar per output, saved as ``<metric_name>_output_plot.png``; returns the path."""
    try:
        import matplotlib

        if not _has_display():  # a headless run writes the PNG without a window
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install matplotlib") from None
    values = [0.0 if v is None else v for v in result]
    plt.clf()
    plt.figure(figsize=(8, 6))
    bars = plt.bar(np.arange(len(values)), values, width=0.5)
    plt.grid(True, which="major", axis="y")
    ticks = max(len(values), 5)
    plt.xticks(list(range(ticks))[:: 1 if ticks < 20 else 5])
    plt.xlabel("Output value index")
    plt.ylabel(metric_name)
    plt.title(f"Metric {metric_name}")
    for bar, value in zip(bars, values):
        plt.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), str(value),
                 ha="center", va="bottom")
    finite = [v for v in values if np.isfinite(v)] or [0.0]
    low, high = min(finite) * 1.25, max(finite) * 1.25
    if metric_name == "cosine_similarity":
        high, low = 1.0, (0.0 if low >= 0 else -1.0)
    plt.ylim(min(0, low), max(0, high))
    path = f"{metric_name}_output_plot.png"
    plt.savefig(path)
    plt.show()
    plt.close("all")
    return path


def _has_display() -> bool:
    import os

    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
