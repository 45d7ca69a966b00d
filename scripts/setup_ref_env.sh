#!/usr/bin/env bash
# Create <repo>/.venv-ref: the reference venv with the real ExecuTorch, used only by the
# compat tests (tests/compat/ref_tool.py). edgetorch itself never imports executorch.
#
# Idempotent: an existing venv is reused and pip is skipped when the pinned versions are
# already installed. Extra arguments are passed to pip (e.g. an --index-url for CPU wheels).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv-ref"
PY="$VENV/bin/python"
TORCH_VERSION="2.13.0"
EXECUTORCH_VERSION="1.5.1"

if [[ -x "$PY" ]]; then
    echo "reusing existing venv $VENV"
else
    echo "creating venv $VENV"
    python3 -m venv "$VENV"
fi

installed() {
    "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1').split('+')[0] != '$2')" \
        2>/dev/null
}

if installed torch "$TORCH_VERSION" && installed executorch "$EXECUTORCH_VERSION"; then
    echo "torch==$TORCH_VERSION and executorch==$EXECUTORCH_VERSION already installed; nothing to do"
else
    echo "installing torch==$TORCH_VERSION executorch==$EXECUTORCH_VERSION into $VENV"
    "$VENV/bin/pip" install "torch==$TORCH_VERSION" "executorch==$EXECUTORCH_VERSION" "$@"
fi

echo "reference python: $PY (tests find it automatically; or set EDGETORCH_REF_PYTHON)"
