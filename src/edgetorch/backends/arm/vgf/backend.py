"""``VgfBackend`` (ahead of time): lower a partition to TOSA (the TOSA backend, with the
compile spec's TOSA part), then convert the flatbuffer to VGF with ``model-converter`` --
ExecuTorch's command, ``model-converter <flags> -i output_<tag>.tosa -o output_<tag>.tosa.vgf``,
in a temporary folder; with an intermediates folder the ``.vgf`` is copied there too. The
TOSA graph of each blob made in this process is kept (``COMPILED``) for the runtime's TOSA
simulation."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from typing import final

from torch.export import ExportedProgram

from ....errors import ExportError
from ....exir.backend.backend_details import BackendDetails, PreprocessResult
from ....schema.program import CompileSpec
from ..ethosu.backend import delegation_tag
from .compile_spec import VgfCompileSpec
from .compiled import COMPILED, blob_key
from .model_converter import model_converter_env, require_model_converter

logger = logging.getLogger(__name__)


def vgf_compile(tosa: bytes, flags: list[str], artifact_path: str | None = None,
                tag: str = "") -> bytes:
    """``model-converter`` on a TOSA flatbuffer; returns the VGF bytes."""
    binary = require_model_converter()
    with tempfile.TemporaryDirectory() as tmp:
        tosa_path = os.path.join(tmp, f"output_{tag}.tosa")
        with open(tosa_path, "wb") as f:
            f.write(tosa)
        vgf_path = tosa_path + ".vgf"
        command = [binary, *[f for f in flags if f and f.strip()], "-i", tosa_path, "-o",
                   vgf_path]
        proc = subprocess.run(command, capture_output=True, env=model_converter_env(), check=False)
        if proc.returncode != 0:
            kept = None
            if artifact_path:
                os.makedirs(artifact_path, exist_ok=True)
                kept = os.path.join(artifact_path, f"failed_model_converter_input"
                                                   f"{'_' + tag if tag else ''}.tosa")
                shutil.copy2(tosa_path, kept)
                command[command.index("-i") + 1] = kept
            raise ExportError(
                f"VgfBackend: model-converter failed (exit {proc.returncode}).\n"
                f"Repro command:\n  {' '.join(shlex.quote(c) for c in command)}\n"
                f"Stderr:\n{proc.stderr.decode(errors='replace')[-3000:]}")
        if artifact_path:
            os.makedirs(artifact_path, exist_ok=True)
            shutil.copy2(vgf_path, artifact_path)
        with open(vgf_path, "rb") as f:
            return f.read()


@final
class VgfBackend(BackendDetails):
    """VGF: TOSA lowering (``TOSABackend``), then the ML SDK model converter."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        from ..tosa.backend import TOSABackend, tosa_flatbuffer

        spec = VgfCompileSpec._from_list(compile_specs)
        tag = delegation_tag(edge_program)
        tosa = tosa_flatbuffer(edge_program, TOSABackend.filter_tosa_compile_specs(spec))
        blob = vgf_compile(tosa, list(spec.compiler_flags), spec._get_intermediate_path(), tag)
        COMPILED[blob_key(blob)] = tosa
        logger.info("VgfBackend: partition %s -> %d bytes of VGF", tag or "?", len(blob))
        return PreprocessResult(processed_bytes=blob)
