"""ExecuTorch's Arm scripts on edgetorch: ``aot_arm_compiler`` and ``run`` (``run.sh``)."""
