"""``save_pte_program``, as in ``executorch.extension.export_util.utils``."""

from __future__ import annotations

import logging
import os
from typing import Any

logger = logging.getLogger(__name__)


def save_pte_program(prog: Any, model_name: str, output_dir: str = "") -> str:
    """Write ``prog`` (an ``ExecutorchProgramManager``, or anything with ``.buffer``) to
    ``<output_dir>/<model_name>.pte`` (``.pte`` added when missing) and return the path."""
    filename = model_name if model_name.endswith(".pte") else f"{model_name}.pte"
    path = os.path.join(output_dir, filename) if output_dir else filename
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
    with open(path, "wb") as f:
        if hasattr(prog, "write_to_file"):
            prog.write_to_file(f)
        else:
            f.write(prog.buffer)
    logger.info("saved exported program to %s", path)
    return path
