"""The OpenVINO backend's own contract: compile specs, partitioner options, the runtime's
errors, and the CLI path."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from ov_helpers import CPU, F32_TOL, lower, max_diff, run_ours, structure

from edgetorch.backends.openvino import OpenvinoPartitioner, parse_options, runtime
from edgetorch.errors import BackendNotFoundError, ExportError, InvalidArgumentError
from edgetorch.exir.backend import CompileSpec
from edgetorch.runtime import Runtime


class AddReluMul(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y) * 2.0, torch.floor_divide(x, 0.7)


INPUTS = (torch.randn(2, 8, generator=torch.Generator().manual_seed(0)),
          torch.randn(2, 8, generator=torch.Generator().manual_seed(1)))


def _eager():
    return [t.numpy() for t in AddReluMul()(*INPUTS)]


def test_compile_specs_parse_and_refuse():
    opts = parse_options([CompileSpec("device", b"CPU\0"), CompileSpec("cache_dir", b"/tmp/c"),
                          CompileSpec("inference_precision", b"f32")], strict=True)
    assert (opts.device, opts.cache_dir, opts.inference_precision) == ("CPU", "/tmp/c", "f32")
    assert opts.ov_config() == {"INFERENCE_PRECISION_HINT": "f32", "CACHE_DIR": "/tmp/c"}
    assert parse_options({"config": b"x"}).device == "CPU"  # run time: unknown keys ignored
    with pytest.raises(InvalidArgumentError, match="unknown compile spec 'config'"):
        OpenvinoPartitioner([CompileSpec("config", b"x")])
    with pytest.raises(InvalidArgumentError, match="inference_precision 'f64'"):
        OpenvinoPartitioner([CompileSpec("inference_precision", b"f64")])


def test_unavailable_device_is_an_export_error():
    with pytest.raises(ExportError, match="device 'GPU' is not available"):
        lower(AddReluMul(), INPUTS, [CompileSpec("device", b"GPU")])


def test_whole_graph_one_delegate_and_floor_divide_rounds_down():
    pte = lower(AddReluMul(), INPUTS, [CPU, CompileSpec("inference_precision", b"f32")])
    s = structure(pte)
    assert (len(s["delegates"]), s["operators"]) == (1, [])
    assert max_diff(run_ours(pte, INPUTS), _eager()) <= F32_TOL


def test_op_types_and_names_to_skip_stay_outside():
    pte = lower(AddReluMul(), INPUTS, [CPU], op_types_to_skip={"aten.relu.default"})
    s = structure(pte)
    assert s["operators"] == ["aten::relu.out"] and s["delegate_calls"] == 2
    np.testing.assert_allclose(run_ours(pte, INPUTS, "f32")[0], _eager()[0], atol=F32_TOL)
    # node names are the Edge graph's, as ExecuTorch names them (aten_add_tensor)
    pte = lower(AddReluMul(), INPUTS, [CPU], op_names_to_skip={"aten_add_tensor"})
    assert structure(pte)["operators"] == ["aten::add.out"]


def test_cache_dir_is_the_users_choice_not_the_files(tmp_path):
    """A cache folder stored in the .pte is never written by the runtime (it writes no file a
    file asks for); the load option ``cache_dir`` is honoured. (OpenVINO's compile step, at
    export, may use the folder the user named in the compile spec: removed before running.)"""
    stored, chosen = tmp_path / "stored-cache", tmp_path / "ov-cache"
    pte = lower(AddReluMul(), INPUTS, [CPU, CompileSpec("cache_dir", str(stored).encode())])
    shutil.rmtree(stored, ignore_errors=True)
    assert max_diff(run_ours(pte, INPUTS, "f32"), _eager()) <= F32_TOL
    assert not stored.exists()
    assert max_diff(run_ours(pte, INPUTS, "f32", {"cache_dir": str(chosen)}), _eager()) <= F32_TOL
    assert chosen.is_dir()


def test_missing_openvino_names_the_extra(monkeypatch):
    pte = lower(AddReluMul(), INPUTS, [CPU])
    missing = (None, "the openvino package is not installed (No module named 'openvino')")
    monkeypatch.setattr(runtime, "_openvino", lambda: missing)
    assert not Runtime.get().backend_registry.is_available("OpenvinoBackend")
    program = Runtime.get().load_program(pte)
    with pytest.raises(BackendNotFoundError, match=r"edgetorch\[openvino\]") as err:
        program.load_method("forward")
    assert err.value.code == 0x20  # ExecuTorch's NotFound


def test_runtime_precision_override_is_validated():
    with pytest.raises(InvalidArgumentError, match="'f64'"):
        runtime.set_inference_precision("f64")


def test_cli_exports_openvino(tmp_path, capsys):
    from edgetorch.cli import main

    out = tmp_path / "tiny.pte"
    assert main(["export", "tiny_classifier", "--delegate", "openvino", "-o", str(out)]) == 0
    assert structure(out.read_bytes())["delegates"] == [("OpenvinoBackend", [("device", b"CPU")])]


def test_runtime_half_runs_without_torch(tmp_path):
    """Load and run an OpenVINO .pte in a process where importing torch fails."""
    import subprocess
    import sys

    pte = tmp_path / "m.pte"
    pte.write_bytes(lower(AddReluMul(), INPUTS, [CPU, CompileSpec("inference_precision", b"f32")]))
    np.savez(tmp_path / "in.npz", *[t.numpy() for t in INPUTS])
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np\n"
        "from edgetorch.runtime import Runtime\n"
        f"d = np.load({str(tmp_path / 'in.npz')!r})\n"
        f"m = Runtime.get().load_program({str(pte)!r}).load_method('forward')\n"
        "outs = m.execute([d['arr_0'], d['arr_1']])\n"
        f"np.save({str(tmp_path / 'out.npy')!r}, outs[0])\n"
        "assert 'torch' not in [k for k, v in sys.modules.items() if v is not None]\n")
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), _eager()[0], atol=F32_TOL)


def test_precision_reaches_the_compiled_model():
    pte = lower(AddReluMul(), INPUTS, [CPU, CompileSpec("inference_precision", b"f32")])
    method = Runtime.get().load_program(pte).load_method("forward")
    assert method._delegate_handles[0][1].inference_precision == "f32"
