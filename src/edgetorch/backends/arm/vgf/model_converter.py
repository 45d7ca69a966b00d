"""Finding and running Arm's ML SDK model converter (``model-converter``, the PyPI wheel
``ai-ml-sdk-model-converter``), as ExecuTorch's VGF backend does: ``$MODEL_CONVERTER_PATH``,
else ``model-converter`` / ``model_converter`` on ``PATH`` (or next to this Python);
``$MODEL_CONVERTER_LIB_DIR`` is put in front of the child's ``LD_LIBRARY_PATH``. At least
0.10.0 (ExecuTorch's minimum); 0.11.0 is the release whose binaries run on glibc 2.36."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ....errors import FeatureNotAvailableError

BINARIES = ("model-converter", "model_converter")
MIN_VERSION = (0, 10, 0)
INSTALL_HINT = ("install Arm's ML SDK model converter: pip install 'edgetorch[vgf]' "
                "(ai-ml-sdk-model-converter==0.11.0), or set MODEL_CONVERTER_PATH")


def find_model_converter_binary() -> str | None:
    env_path = os.environ.get("MODEL_CONVERTER_PATH")
    if env_path and os.path.isfile(env_path) and os.access(env_path, os.X_OK):
        return env_path
    here = Path(sys.executable).parent  # a venv's scripts, on PATH or not
    for name in BINARIES:
        found = shutil.which(name) or shutil.which(name, path=str(here))
        if found:
            return found
    return None


def model_converter_env() -> dict[str, str]:
    env = dict(os.environ)
    lib_dir = env.pop("MODEL_CONVERTER_LIB_DIR", None)
    if lib_dir:
        env["LD_LIBRARY_PATH"] = f"{lib_dir}:{env['LD_LIBRARY_PATH']}" if env.get(
            "LD_LIBRARY_PATH") else lib_dir
    return env


def converter_version(binary: str) -> tuple[int, ...] | None:
    import json
    import re

    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60,
                             env=model_converter_env()).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        text = json.loads(out).get("version", "")
    except ValueError:
        text = out
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", str(text))
    return tuple(int(g) for g in found.groups()) if found else None


def require_model_converter() -> str:
    binary = find_model_converter_binary()
    if binary is None:
        raise FeatureNotAvailableError(f"VgfBackend needs the ML SDK model converter "
                                   f"(tried {', '.join(BINARIES)}); {INSTALL_HINT}")
    version = converter_version(binary)
    if version is None or version < MIN_VERSION:
        raise FeatureNotAvailableError(
            f"the model converter {binary} reports version {version}; VgfBackend needs at "
            f"least {'.'.join(map(str, MIN_VERSION))}; {INSTALL_HINT}")
    return binary
