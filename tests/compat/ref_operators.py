"""The operator names ExecuTorch 1.5.1's runtime registers; runs ONLY in the reference venv.

    /work/main/.venv-ref/bin/python tests/compat/ref_operators.py OUT.json

Writes ``{"runtime": [...], "quantized": [...], "llm_custom": [...]}``: the names the
pybindings runtime reports on its own (portable + prim + the optimized-only FFTs), then the
names each further import adds: ``executorch.kernels.quantized`` (``quantized_decomposed::*``)
and ``executorch.extension.llm.custom_ops`` (``llama::*``, ``preprocess::*``).
"""

from __future__ import annotations

import json
import sys


def main(out: str) -> None:
    from executorch.extension.pybindings import portable_lib

    def names() -> set[str]:
        return set(portable_lib._get_operator_names())

    runtime = names()
    import executorch.kernels.quantized  # noqa: F401  (registers quantized_decomposed kernels)

    quantized = names() - runtime
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401

    custom = names() - runtime - quantized
    result = {"runtime": sorted(runtime), "quantized": sorted(quantized), "llm_custom": sorted(custom)}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
