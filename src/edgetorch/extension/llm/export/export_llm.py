"""``python -m edgetorch.extension.llm.export.export_llm section.field=value ... [--config x.yaml]``

ExecuTorch's ``export_llm`` command line: dotted ``LlmConfig`` overrides, e.g.::

    python -m edgetorch.extension.llm.export.export_llm base.checkpoint=model.gguf \\
        model.use_kv_cache=True model.use_sdpa_with_kv_cache=True \\
        backend.xnnpack.enabled=True quantization.qmode=8da4w quantization.group_size=32 \\
        export.max_seq_length=128 export.max_context_length=512 export.output_name=m.pte
"""

from __future__ import annotations

import argparse
import sys

from ....errors import EdgeTorchError
from .builder import export_llm
from .config.llm_config import LlmConfig


def parse_config_arg() -> tuple[str | None, list[str]]:
    """``--config PATH`` from the command line (None without one) and the other arguments
    (the ``section.field=value`` overrides)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config")
    ns, remaining = parser.parse_known_args(sys.argv[1:])
    return ns.config, remaining


def pop_config_arg() -> str:
    """Remove ``--config PATH`` from ``sys.argv`` and return PATH (it must be there)."""
    try:
        i = sys.argv.index("--config")
        path = sys.argv[i + 1]
    except (ValueError, IndexError):
        raise ValueError("no '--config PATH' on the command line") from None
    del sys.argv[i:i + 2]
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="export_llm", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a YAML file of LlmConfig sections")
    parser.add_argument("overrides", nargs="*", help="section.field=value")
    ns = parser.parse_args(argv)
    try:
        cfg = LlmConfig.from_args(ns.overrides, ns.config)
        path = export_llm(cfg)
    except EdgeTorchError as e:
        print(f"export_llm: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
