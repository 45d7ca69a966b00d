"""ExecuTorch's ATen-mode pybindings run kernels from libtorch; edgetorch has one runtime with
NumPy kernels, so this module refuses to import (as ``aten_lib`` does in ExecuTorch's wheels,
which ship only ``portable_lib``), and code that tries ``portable_lib`` first keeps working."""

raise ImportError(
    "edgetorch.extension.pybindings.aten_lib does not exist: edgetorch has no ATen-kernel "
    "runtime. Use edgetorch.extension.pybindings.portable_lib (same functions) instead")
