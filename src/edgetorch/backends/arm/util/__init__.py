"""Arm backend utilities (ExecuTorch's ``backends/arm/util``)."""
