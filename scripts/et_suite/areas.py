"""The areas of ExecuTorch's test tree the runner knows: one record per area.

An area names the folders whose test files it runs, an optional pytest marker expression (the
backend conformance suite selects its flows by marker), the Pythons it runs under by default
(relative to the repository; ``--python`` / ``--ref-python`` override them), and the test
files to leave out with the reason. The Arm and Cortex-M/VGF areas use their own venvs
(``.venv-arm`` with tosa-tools, ``.venv-ref-arm`` with ``executorch[ethos-u]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Area:
    name: str
    roots: tuple[str, ...]
    marker: str = ""
    # keep only tests whose node id holds this text (case-insensitive): ExecuTorch tags its Arm
    # VGF cases by name (``test_add_tensor_vgf_quant``), not by a marker
    keyword: str = ""
    python: str = ".venv/bin/python"
    ref_python: str = ".venv-ref/bin/python"
    # path prefix -> why the file is not run on either side
    skip: dict[str, str] = field(default_factory=dict)
    note: str = ""


# The order is the order of the report.
AREAS: tuple[Area, ...] = (
    Area("exir", ("exir", "backends/transforms", "export/tests"),
         note="the compiler: exir/**, the shared backend pass library, the export API"),
    Area("xnnpack", ("backends/xnnpack/test",),
         note="XNNPACK op, pass, quantizer, serialization and model tests"),
    Area("suite-xnnpack", ("backends/test/suite",), marker="flow_xnnpack",
         note="ExecuTorch's backend conformance suite, its float XNNPACK flow (the quantized "
         "flows: --marker flow_xnnpack_static_int8_per_channel ...)"),
    Area("llm", ("extension/llm",), note="extension/llm/**: export helpers, modules, custom ops"),
    Area("quantized-kernels", ("kernels/quantized/test",)),
    Area("devtools", ("devtools",), note="devtools/** (owned by the devtools surface work)"),
    Area("vulkan", ("backends/vulkan/test",),
         skip={"backends/vulkan/test/op_tests": "code generators for the C++ operator tests"},
         note="Vulkan partitioner, passes, serialization, delegate (ExecuTorch's pip runtime "
         "has no Vulkan backend; edgetorch's interprets the graph)"),
    Area("coreml", ("backends/apple/coreml/test",),
         note="Core ML partitioner, compile specs, torch ops, enumerated shapes (coremltools "
         "9.0; prediction is macOS-only on both sides)"),
    Area("arm", ("backends/arm/test",), python=".venv-arm/bin/python",
         ref_python=".venv-ref-arm/bin/python", note="TOSA / Ethos-U (tosa-tools venvs)"),
    Area("arm-vgf", ("backends/arm/test",), keyword="vgf", python=".venv-arm/bin/python",
         ref_python=".venv-ref-vgf/bin/python",
         note="the VGF cases of the Arm tests (ML SDK model converter; ExecuTorch's `vgf` extra)"),
    Area("cortex-m", ("backends/cortex_m/test",), python=".venv-arm/bin/python",
         ref_python=".venv-ref-arm/bin/python"),
)

BY_NAME = {a.name: a for a in AREAS}

# Folders exported from the source tree besides the areas' roots: the test-support code the
# test files import from elsewhere (exir/tests/models.py, backends/test/harness,
# extension/pybindings/test/make_test.py, devtools/bundled_program/util/test_util.py, ...).
SUPPORT_DIRS = ("exir", "backends", "export", "extension", "devtools", "kernels", "runtime",
                "test", "examples", "conftest.py")
