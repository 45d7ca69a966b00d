"""The MLPerf Tiny benchmark models, as ExecuTorch's ``examples/models/mlperf_tiny`` builds them
for its Arm and Cortex-M tests: image classification (``ResNet8``, CIFAR-10), keyword spotting
(``DSCNNKWS``), anomaly detection (``DeepAutoEncoder``) and visual wake words
(``MobileNetV1025``). Random weights; each class gives its ``get_example_inputs()``."""

from .deep_autoencoder import DeepAutoEncoder
from .ds_cnn import DSCNNKWS
from .mobilenet_v1_025 import MobileNetV1025
from .resnet8 import ResNet8

__all__ = ["DSCNNKWS", "DeepAutoEncoder", "MobileNetV1025", "ResNet8"]
