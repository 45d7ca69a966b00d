"""ExecuTorch's legacy capture API (``exir.capture``): deprecated there, kept for old scripts
and tests. New code uses ``torch.export.export`` and ``edgetorch.exir.to_edge``."""

from ._capture import CaptureConfig, ExirExportedProgram, WrapperModule, capture, patch_forward

__all__ = ["CaptureConfig", "ExirExportedProgram", "WrapperModule", "capture", "patch_forward"]
