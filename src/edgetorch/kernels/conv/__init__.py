"""Convolution: every algorithm, in both layouts, and the one place that chooses among them.

* ``dispatch.py``: which algorithm runs (``choose_nchw``, ``choose_nhwc``) and every threshold
  that decides it, in one table (``THRESHOLDS``);
* ``nchw.py``: torch's layout, for the portable ``convolution`` kernel (GEMM over an im2col
  patch matrix, Winograd, depthwise tap by tap, channels-last or compiled; transposed);
* ``nhwc.py``: XNNPACK's layouts, for its convolution, depthwise and deconvolution nodes (and
  the window geometry and buffers its pooling shares);
* ``winograd.py``: F(2x2, 3x3), shared by both; ``compiled.py``: the loops compiled with numba
  (the ``accel`` extra; ``EDGETORCH_ACCEL`` chooses them or NumPy, see ``kernels.accel``).
"""
