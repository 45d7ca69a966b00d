"""The pybindings API side by side with ExecuTorch 1.5.1's: the same edgetorch-written .pte
(with its .ptd, and as a bundled program) loaded through both ``portable_lib``s reports the
same metadata, raises the same exception types and gives the same outputs, equal to eager."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from refenv import _run_tool, load_npz, ref_available  # noqa: E402

from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.extension.pybindings import portable_lib as rt  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]

TOOL = Path(__file__).with_name("ref_pybindings_tool.py")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x, y):
        return torch.nn.functional.interpolate(self.conv(x), scale_factor=2), y * 2


def _bundle(prog, model, inputs):
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from edgetorch.devtools.bundled_program.core import BundledProgram
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    suite = MethodTestSuite("forward", [MethodTestCase(inputs=inputs,
                                                       expected_outputs=(model(*inputs),))])
    return serialize_from_bundled_program_to_flatbuffer(BundledProgram(prog, [suite]))


@pytest.mark.parametrize("external", [False, True])
def test_same_report_and_outputs_as_executorch(tmp_path, external):
    model = Net().eval()
    inputs = (torch.randn(1, 3, 5, 6).to(memory_format=torch.channels_last), torch.randn(2))
    prog = to_edge(torch.export.export(model, inputs, strict=True)).to_executorch(
        ExecutorchBackendConfig(external_constants=external))
    pte = tmp_path / "net.pte"
    pte.write_bytes(prog.buffer)
    ptd = ""
    if external:
        prog.write_tensor_data_to_file(tmp_path)
        ptd = str(tmp_path / "_default_external_constant.ptd")
    bpte = ""
    if not external:  # a contiguous-output program: ExecuTorch compares strides too
        lin = torch.nn.Linear(3, 2).eval()
        lin_in = (torch.randn(4, 3),)
        lin_prog = to_edge(torch.export.export(lin, lin_in, strict=True)).to_executorch()
        bpte = str(tmp_path / "lin.bpte")
        Path(bpte).write_bytes(_bundle(lin_prog, lin, lin_in))
    np.savez(tmp_path / "in.npz", *[t.contiguous().numpy() for t in inputs])
    theirs_npz = tmp_path / "ref_out.npz"
    result = _run_tool([str(pte), ptd, str(tmp_path / "in.npz"), str(theirs_npz), bpte],
                       timeout=600, tool=TOOL)
    ref = json.loads(result.stdout.strip().splitlines()[-1])

    module = rt._load_for_executorch(str(pte), ptd or None)
    meta = module.method_meta("forward")
    assert str(meta) == ref["method_meta"]
    assert [repr(meta.input_tensor_meta(i)) for i in range(2)] == ref["inputs"]
    assert [meta.input_tensor_meta(i).dtype() for i in range(2)] == ref["dtypes"]
    assert sorted(module.method_names()) == ref["method_names"]
    assert meta.num_attributes() == ref["num_attributes"]
    ours = module.forward(inputs)
    assert [list(o.stride()) for o in ours] == ref["output_strides"]
    expected = [t.detach() for t in model(*inputs)]
    for got, want, eager in zip(ours, load_npz(theirs_npz), expected, strict=True):
        np.testing.assert_allclose(got.numpy(), want, atol=1e-5, rtol=0)
        torch.testing.assert_close(got, eager, atol=1e-5, rtol=1e-5)
    errors = {}
    for name, call in {
        "bad_method": lambda: module.run_method("nope", inputs),
        "list_input": lambda: module.forward([list(inputs)]),
        "too_many": lambda: module.forward([*inputs, inputs[0]]),
    }.items():
        try:
            call()
            errors[name] = None
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            errors[name] = type(e).__name__
    assert errors == ref["errors"]
    if bpte:
        bundle = rt._load_bundled_program_from_buffer(Path(bpte).read_bytes())
        outs = bundle.verify_result_with_bundled_expected_output("forward", 0)
        assert len(outs) == ref["bundled_outputs"]
    assert os.path.exists(pte)
