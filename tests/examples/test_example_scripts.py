"""ExecuTorch's example scripts on edgetorch: every example through
``examples.portable.scripts.export`` and ``examples.xnnpack.aot_compiler``, each .pte equal to
eager in the runtime; the helpers scripts import (configs, inspect_node, save_pte_program)."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from edgetorch.backends.xnnpack.utils.configs import (  # noqa: E402
    get_transform_passes,
    get_xnnpack_edge_compile_config,
    get_xnnpack_executorch_backend_config,
)
from edgetorch.errors import FeatureNotAvailableError  # noqa: E402
from edgetorch.examples import EXAMPLES  # noqa: E402
from edgetorch.examples.models import MODEL_NAME_TO_MODEL, create_model  # noqa: E402
from edgetorch.examples.portable.scripts import export as portable_export  # noqa: E402
from edgetorch.examples.xnnpack import aot_compiler  # noqa: E402
from edgetorch.exir import to_edge  # noqa: E402
from edgetorch.exir.print_program import inspect_node  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

TOY = ["add", "add_mul", "mul", "linear", "softmax", "conv1d"]


def _run_and_compare(pte, model_name):
    model, inputs, _, _ = create_model(model_name)
    outputs = Runtime.get().load_program(pte).load_method("forward").execute(list(inputs))
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    return Runtime.get().load_program(pte).program


@pytest.mark.parametrize("name", TOY + sorted(EXAMPLES))
def test_portable_export_script(name, tmp_path):
    path = portable_export.main([f"--model_name={name}", "--output_dir", str(tmp_path)])
    assert path == str(tmp_path / f"{name}.pte")
    program = _run_and_compare(path, name)
    assert not program.execution_plan[0].delegates


@pytest.mark.parametrize("name", ["add", "add_mul", "linear", "mv2"] + sorted(EXAMPLES))
def test_xnnpack_aot_compiler(name, tmp_path):
    path = aot_compiler.main(["--model_name", name, "--delegate", "-o", str(tmp_path)])
    assert path == str(tmp_path / f"{name}_xnnpack_fp32.pte")
    program = _run_and_compare(path, name)
    delegates = {d.id for d in program.execution_plan[0].delegates}
    assert delegates == {"XnnpackBackend"}


def test_scripts_run_as_modules(tmp_path):
    for module, args, out in [
        ("edgetorch.examples.portable.scripts.export",
         ["--model_name=add", "--segment_alignment", "0x4000", "--strict"], "add.pte"),
        ("edgetorch.examples.xnnpack.aot_compiler", ["--model_name=add_mul", "-t"],
         "add_mul_xnnpack_fp32.pte"),
    ]:
        res = subprocess.run([sys.executable, "-m", module, *args, "--output_dir", str(tmp_path)],
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        _run_and_compare(tmp_path / out, out.split("_xnnpack")[0].removesuffix(".pte"))
    assert (tmp_path / "add.pte").read_bytes()[4:8] == b"ET12"


def test_segment_alignment_and_external_constants(tmp_path):
    portable_export.main(["--model_name=linear", "-o", str(tmp_path), "--external_constants"])
    assert (tmp_path / "_default_external_constant.ptd").exists()
    model, inputs, _, _ = create_model("linear")
    program = Runtime.get().load_program(
        tmp_path / "linear.pte", data_path=tmp_path / "_default_external_constant.ptd")
    torch.testing.assert_close(program.load_method("forward").execute(list(inputs))[0],
                               model(*inputs), rtol=1e-5, atol=1e-5)


def test_quantize_and_etrecord(tmp_path):
    from edgetorch.devtools.etrecord import parse_etrecord

    try:
        import edgetorch.backends.xnnpack.quantizer  # noqa: F401
    except ImportError:
        with pytest.raises(FeatureNotAvailableError, match="quantization is not available yet"):
            aot_compiler.main(["--model_name=linear", "--quantize", "-o", str(tmp_path)])
    else:
        path = aot_compiler.main(["--model_name=linear", "--quantize", "-o", str(tmp_path)])
        assert path.endswith("linear_xnnpack_q8.pte")
        model, inputs, _, _ = create_model("linear")
        got = Runtime.get().load_program(path).load_method("forward").execute(list(inputs))[0]
        assert (got - model(*inputs)).abs().max() < 0.05  # int8 quantization error
    aot_compiler.main(["--model_name=add", "--etrecord", str(tmp_path / "add.etrecord"),
                       "-o", str(tmp_path)])
    record = parse_etrecord(tmp_path / "add.etrecord")  # ExecuTorch's aot_compiler writes one
    assert record.edge_dialect_program is not None and record._delegate_map is not None
    with pytest.raises(RuntimeError, match="not a valid name"):
        portable_export.main(["--model_name=nope", "-o", str(tmp_path)])


def test_model_names_follow_executorch():
    assert {"add", "add_mul", "mul", "linear", "softmax", "conv1d", "mv2", "resnet18"} <= set(
        MODEL_NAME_TO_MODEL)
    assert set(EXAMPLES) <= set(MODEL_NAME_TO_MODEL)
    model, inputs, kwargs, dynamic = create_model("add_mul")
    assert [tuple(t.shape) for t in inputs] == [(2, 2)] * 3 and kwargs is None and dynamic is None


def test_xnnpack_configs():
    config = get_xnnpack_edge_compile_config()
    assert config._check_ir_validity is False and config._skip_dim_order is False
    assert get_xnnpack_edge_compile_config(skip_dim_order=True)._skip_dim_order
    marker = object()
    passes = get_transform_passes([marker])
    assert type(passes[0]).__name__ == "RemoveNoopExpandCopyPass" and passes[-1] is marker
    backend = get_xnnpack_executorch_backend_config([marker])
    assert backend.passes == [marker] and backend.extract_delegate_segments


def test_remove_noop_expand_copy_pass():
    class M(torch.nn.Module):
        def forward(self, x):
            return x.expand(2, 3) + x.expand(4, 2, 3).sum(0)

    x = torch.randn(2, 3)
    edge = to_edge(torch.export.export(M(), (x,)))
    gm = edge.exported_program().graph_module
    expands = lambda: [n for n in gm.graph.nodes if "expand_copy" in str(n.target)]  # noqa: E731
    assert len(expands()) == 2
    result = get_transform_passes()[0](gm)
    assert result.modified and [n.args[1] for n in expands()] == [[4, 2, 3]]
    program = edge.transform([get_transform_passes()[0]]).to_executorch()
    out = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])[0]
    torch.testing.assert_close(out, M()(x))


def test_inspect_node_marks_the_node_and_its_source_line():
    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.relu(x)
            return y * 2

    ep = torch.export.export(M(), (torch.randn(3),))
    node = next(n for n in ep.graph.nodes if "relu" in str(n.target))
    text = inspect_node(ep.graph, node)
    marked = [line for line in text.splitlines() if line.startswith("--> ")]
    assert len(marked) == 1 and "relu" in marked[0]
    assert "The node stacktrace:" in text and "y = torch.relu(x)" in text
