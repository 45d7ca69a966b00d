#!/usr/bin/env bash
# Create <repo>/.venv-ref-arm: the Arm reference venv, executorch[ethos-u]==1.5.1 (which pins
# tosa-tools==2026.5.0 and ethos-u-vela==5.1.0, so numpy<2.2). Used only by the Arm compat
# tests (tests/backends/arm/ref_arm.py); edgetorch itself never imports executorch.
#
# Idempotent: an existing venv is reused and pip is skipped when the pins are installed.
# Extra arguments are passed to pip (e.g. an --index-url for CPU wheels).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv-ref-arm"
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

if installed torch "$TORCH_VERSION" && installed executorch "$EXECUTORCH_VERSION" \
        && installed tosa-tools 2026.5.0 && installed ethos-u-vela 5.1.0; then
    echo "executorch[ethos-u]==$EXECUTORCH_VERSION already installed; nothing to do"
else
    "$VENV/bin/pip" install "torch==$TORCH_VERSION" "executorch[ethos-u]==$EXECUTORCH_VERSION" "$@"
fi

echo "Arm reference python: $PY (set EDGETORCH_REF_ARM_PYTHON to use another)"
