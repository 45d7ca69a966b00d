"""``--model_name`` files for aot_arm_compiler (ExecuTorch's ``ModelUnderTest``/``ModelInputs``
convention), seeded so ExecuTorch's script and ours see the same weights and inputs.

Select one with ``EDGETORCH_AOT_MODEL`` (``add``, ``convnet``, ``mv2``); default ``add``.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "src"))

from ethosu_models import MODELS  # noqa: E402

_name = os.environ.get("EDGETORCH_AOT_MODEL", "add")
if _name == "mv2":
    import torch

    from edgetorch.examples.mobilenet_v2 import mobilenet_v2

    ModelUnderTest = mobilenet_v2()
    torch.manual_seed(1)
    ModelInputs = (torch.randn(1, 3, 224, 224),)
else:
    ModelUnderTest, ModelInputs = MODELS[_name]()
