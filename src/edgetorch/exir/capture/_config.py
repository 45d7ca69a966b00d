"""ExecuTorch's path of the compile configs (``exir.capture._config``); they live in
``edgetorch.exir.config`` and ``edgetorch.exir.capture._capture``."""

from ..config import EdgeCompileConfig, ExecutorchBackendConfig
from ._capture import CaptureConfig

__all__ = ["CaptureConfig", "EdgeCompileConfig", "ExecutorchBackendConfig"]
