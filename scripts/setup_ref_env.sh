#!/usr/bin/env bash
# Create a reference venv with the real ExecuTorch, used only by the compat tests
# (tests/compat/ref_tool.py, tests/backends/arm/ref_arm.py); edgetorch itself never imports
# executorch.
#
#   bash scripts/setup_ref_env.sh                       # <repo>/.venv-ref: executorch==1.5.1
#   REF_VENV=.venv-ref-arm REF_EXTRA=ethos-u \
#   REF_PINS="tosa-tools==2026.5.0 ethos-u-vela==5.1.0" bash scripts/setup_ref_env.sh
#       # <repo>/.venv-ref-arm: executorch[ethos-u]==1.5.1 (its pins need numpy<2.2: kept apart)
#
# Idempotent: an existing venv is reused and pip is skipped when the pinned versions (and
# REF_PINS) are already installed. Extra arguments are passed to pip (e.g. an --index-url).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/${REF_VENV:-.venv-ref}"
PY="$VENV/bin/python"
TORCH_VERSION="2.13.0"
EXECUTORCH_VERSION="1.5.1"
PACKAGE="executorch${REF_EXTRA:+[$REF_EXTRA]}==$EXECUTORCH_VERSION"

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

all_installed() {
    installed torch "$TORCH_VERSION" && installed executorch "$EXECUTORCH_VERSION" || return 1
    for pin in ${REF_PINS:-}; do
        installed "${pin%%==*}" "${pin##*==}" || return 1
    done
}

if all_installed; then
    echo "torch==$TORCH_VERSION and $PACKAGE already installed; nothing to do"
else
    echo "installing torch==$TORCH_VERSION $PACKAGE into $VENV"
    "$VENV/bin/pip" install "torch==$TORCH_VERSION" "$PACKAGE" "$@"
fi

# The benchmarks (bench/) run edgetorch inside this venv next to ExecuTorch's runtime, with
# edgetorch's optional compiled kernels (its `accel` extra).
if [[ -z "${REF_EXTRA:-}" ]] && ! "$PY" -c "import numba" 2>/dev/null; then
    "$VENV/bin/pip" install "numba>=0.61" "$@"
fi

# ExecuTorch's Model Explorer adapters for ETRecord and ETDump import executorch, so they live
# here and read edgetorch's files and ExecuTorch's alike (tests/devtools/test_model_explorer.py).
# Model Explorer 0.1.33: 0.1.34 renamed a module ExecuTorch 1.5.1's visualize() imports.
if [[ -z "${REF_EXTRA:-}" ]] && ! "$PY" -c "import importlib.util as u, sys; \
        sys.exit(u.find_spec('etdump_data_provider_model_explorer') is None)" 2>/dev/null; then
    "$VENV/bin/pip" install "ai-edge-model-explorer==0.1.33" "etrecord-adapter-model-explorer==0.2.0" \
        "etdump-data-provider-model-explorer==0.1.0" "torch==$TORCH_VERSION" \
        "executorch==$EXECUTORCH_VERSION" "$@"
fi

echo "reference python: $PY (tests find it automatically; or set EDGETORCH_REF_PYTHON /"
echo "EDGETORCH_REF_ARM_PYTHON)"
