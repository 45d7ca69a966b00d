"""Arm VGF (Vulkan ML extensions): ``VgfCompileSpec``, ``VgfPartitioner``, ``VgfBackend`` --
the TOSA lowering, then Arm's ML SDK model converter, as ExecuTorch 1.5.1 runs them. Imported
lazily: the compile spec and the converter lookup are torch-free."""

from __future__ import annotations

from edgetorch.util.lazy_names import lazy_names

LAZY_IMPORTS = {
    "VgfCompileSpec": ".compile_spec",
    "VgfPartitioner": ".partitioner",
    "VgfBackend": ".backend",
}

__all__ = sorted(LAZY_IMPORTS)
__getattr__, __dir__ = lazy_names(__name__, LAZY_IMPORTS)
