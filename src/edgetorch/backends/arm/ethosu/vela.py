"""Compile a TOSA flatbuffer with Vela (``ethos-u-vela``, called as a library, as ExecuTorch
does) into the Ethos-U delegate blob, and keep Vela's performance estimates as data.

Vela runs on ``<dir>/out.tosa`` with the compile spec's flags plus ``--output-dir=<dir>/output``;
``<dir>`` is the intermediates folder when one is set (Vela's files stay there, as in
ExecuTorch) or a temporary one. We always add ``--verbose-performance`` to the run (not to the
stored flags; the command stream is the same) so the per-layer CSV exists, and keep Vela's
stdout in the estimates instead of printing it (it goes to this module's logger at INFO).
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ....errors import ExportError
from .vela_bin import ExternalBlock, VelaIO, write_vela_bin

logger = logging.getLogger(__name__)

MAX_TOSA_BYTES = 2 * 1024 * 1024 * 1024  # Vela reads flatbuffers up to 2 GiB


@dataclass
class VelaResult:
    """What one Vela run produced: the blob, its external blocks and the estimates."""

    processed_bytes: bytes
    external_blocks: list[ExternalBlock]
    summary: dict[str, Any]  # Vela's summary CSV row, numbers parsed
    per_layer: list[dict[str, Any]] = field(default_factory=list)  # Vela's per-layer CSV rows
    stdout: str = ""


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_vela_csv(path: str) -> list[dict[str, Any]]:
    """Rows of a Vela CSV file with numeric fields as int/float (column names as Vela writes)."""
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _io(npz, prefix: str) -> list[VelaIO]:
    shapes = npz[prefix + "_shape"]
    return [VelaIO(tuple(int(d) for d in shapes[k]), int(npz[prefix + "_elem_size"][k]),
                   int(npz[prefix + "_offset"][k]), int(npz[prefix + "_region"][k]))
            for k in range(len(shapes))]


def _import_vela():
    try:
        from ethosu.vela import vela
    except ImportError as e:
        raise ExportError(
            "EthosUBackend needs Vela: the ethos-u-vela package is not installed; install "
            "edgetorch's Arm extra (pip install 'edgetorch[arm]', ethos-u-vela==5.1.0)") from e
    return vela


def vela_compile(tosa: bytes, flags: list[str], workdir: str | None = None,
                 placements: Mapping[str, str] | None = None,
                 verbose: bool = False) -> VelaResult:
    """Run Vela on ``tosa`` with ``flags`` (the compile spec's ``compiler_flags``)."""
    if not flags:
        raise ExportError("EthosUBackend: no Vela flags in the compile spec; build it with "
                           "EthosUCompileSpec(target)")
    if len(tosa) > MAX_TOSA_BYTES:
        raise ExportError(f"TOSA flatbuffer is too large for Vela ({len(tosa)} bytes > "
                           f"{MAX_TOSA_BYTES}); split the model into smaller partitions")
    if workdir is None:
        with tempfile.TemporaryDirectory() as tmp:
            return vela_compile(tosa, flags, tmp, placements, verbose)
    import numpy as np

    vela = _import_vela()
    os.makedirs(workdir, exist_ok=True)
    tosa_path = os.path.join(workdir, "out.tosa")
    out_dir = os.path.join(workdir, "output")
    with open(tosa_path, "wb") as f:
        f.write(tosa)
    # ExecuTorch joins the flags and splits on single spaces; do the same so a flag list
    # stored in a .pte means exactly what it meant there.
    argv = " ".join([*flags, "--verbose-performance", f"--output-dir={out_dir}", tosa_path])
    if verbose:
        argv += " --verbose-all"
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        try:
            status = vela.main(argv.split(" "))
        except SystemExit as e:  # argparse refusing a flag
            status = e.code
        except Exception as e:
            raise ExportError(f"Vela failed on the TOSA graph ({type(e).__name__}: {e}); "
                               f"flags were {argv!r}. Check the compile spec's target, "
                               "system_config, memory_mode and extra_flags") from e
    logger.info("%s", text.getvalue())
    if status not in (0, None):
        raise ExportError(f"Vela exited with status {status} for flags {argv!r}:\n"
                           f"{text.getvalue()[-2000:]}\nCheck the Vela flags in the compile spec")
    with np.load(os.path.join(out_dir, "out_vela.npz"), allow_pickle=False) as npz:
        blob, externals = write_vela_bin(npz["cmd_data"].tobytes(), npz["weight_data"].tobytes(),
                                         int(npz["scratch_shape"][0]), _io(npz, "input"),
                                         _io(npz, "output"), placements)
    summary_files = sorted(f for f in os.listdir(out_dir) if f.startswith("out_summary_"))
    summary = read_vela_csv(os.path.join(out_dir, summary_files[-1]))[0] if summary_files else {}
    per_layer_path = os.path.join(out_dir, "out_per-layer.csv")
    per_layer = read_vela_csv(per_layer_path) if os.path.exists(per_layer_path) else []
    return VelaResult(blob, externals, summary, per_layer, text.getvalue())
