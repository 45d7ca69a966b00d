"""ExecuTorch's own ``selected_operators.yaml`` for a .pte; runs ONLY in the reference venv.

    /work/main/.venv-ref/bin/python tests/compat/ref_oplist.py MODEL.pte OUT.yaml
"""

from __future__ import annotations

import sys

from executorch.codegen.tools.gen_oplist import main

if __name__ == "__main__":
    main(["--model_file_path", sys.argv[1], "--output_path", sys.argv[2]])
