"""Torch-free: without the openvino package, the always-registered OpenVINO backend says it is
unavailable and why, naming the extra to install (ExecuTorch's NotFound)."""

import pytest

from edgetorch.backends.openvino import runtime as ov_runtime
from edgetorch.errors import BackendNotFoundError
from edgetorch.runtime import Runtime
from edgetorch.runtime.backends import get_backend


def test_missing_openvino_is_not_found_naming_the_extra(monkeypatch):
    monkeypatch.setattr(ov_runtime, "_openvino", lambda: (None, "no module named 'openvino'"))
    assert "OpenvinoBackend" in Runtime.get().backend_registry.registered_backend_names
    assert not Runtime.get().backend_registry.is_available("OpenvinoBackend")
    with pytest.raises(BackendNotFoundError, match=r"pip install 'edgetorch\[openvino\]'") as e:
        get_backend("OpenvinoBackend")
    assert e.value.code == 0x20
