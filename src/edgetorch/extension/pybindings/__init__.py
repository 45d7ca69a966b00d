"""ExecuTorch's legacy pybindings (``executorch.extension.pybindings``): ``portable_lib`` runs
programs on edgetorch's runtime. ``aten_lib`` (ExecuTorch's ATen-kernel build) has no
counterpart and raises ImportError, as it does in ExecuTorch's pip wheels."""
