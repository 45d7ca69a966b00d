"""edgetorch's own CMSIS-NN functions (``cmsis_nn``), the implementation
``edgetorch.backends.cortex_m.library.cmsis_nn`` resolves first."""
