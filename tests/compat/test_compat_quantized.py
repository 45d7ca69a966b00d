"""Non-delegated quantized programs and the quantized kernels against ExecuTorch 1.5.1.

- every kernel of the quantized library, bit for bit: the table cases of
  tests/kernels/test_quantized.py, each as a one-operator program run by both runtimes;
- PT2E-quantized models (quant_models.py): our .pte runs in ExecuTorch and ExecuTorch's runs
  in ours, within one output quantization step of the converted (fake-quant) model, and the
  quantized kernel calls are encoded as ExecuTorch encodes them;
- weight-only quantized embeddings with ``do_quant_fusion_and_const_prop=True``: one
  ``embedding_byte``/``embedding_4bit`` kernel, equal to eager, in both runtimes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from refenv import REF_TOOL, _clean_env, load_npz, ref_available, ref_python  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ref_process  # noqa: E402
from quant_models import CONFIG, MODELS, build  # noqa: E402

from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402
from edgetorch.schema.pte import PteFile  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]
REF_QUANTIZED = REF_TOOL.with_name("ref_quantized.py")


def _ref(*args: str, timeout: float = 900) -> None:
    cmd = [str(ref_python()), str(REF_QUANTIZED), *args]
    r = ref_process.run(cmd, env=_clean_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr[-4000:]}"


def ref_run_many(items: list[dict], tmp: Path) -> list[dict]:
    """Run many (.pte, inputs) pairs in ExecuTorch in one process; adds "result" or "error"."""
    manifest = tmp / "manifest.json"
    for i, item in enumerate(items):
        item["outputs"] = str(tmp / f"ref_out_{i}.npz")
    manifest.write_text(json.dumps(items))
    _ref("run-many", str(manifest))
    done = json.loads(manifest.with_suffix(".out.json").read_text())
    for item in done:
        if "error" not in item:
            item["result"] = load_npz(item["outputs"])
    return done


def ours(pte: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    method = Runtime.get().load_program(pte).load_method("forward")
    return [np.asarray(o) for o in method.execute(list(inputs))]


# ---- the kernels, bit for bit ---------------------------------------------------------------

def _kernel_table():
    path = Path(__file__).resolve().parents[1] / "kernels" / "test_quantized.py"
    spec = importlib.util.spec_from_file_location("_quantized_kernel_table", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


class _OneOp(torch.nn.Module):
    def __init__(self, op, names, consts):
        super().__init__()
        self.op, self.names, self.consts = op, names, consts

    def forward(self, *tensors):
        kwargs = dict(self.consts)
        kwargs.update(zip(self.names, tensors))
        return self.op(**kwargs)


def _functional(out_name: str):
    name, overload = out_name.split("::")[1].split(".")
    base = {"out": "default", "Tensor_out": "tensor", "dtype_out": "dtype"}[overload]
    return getattr(getattr(torch.ops.quantized_decomposed, name), base)


def _one_op_program(kt, name: str, args: list):
    """A program calling the functional op of kernel ``name`` with ``args`` (tensor arguments
    become inputs, the rest constants of the graph)."""
    from edgetorch.schema.scalar_type import to_numpy_dtype

    op = _functional(name)
    schema = [a for a in _functional(name)._schema.arguments]
    out_args = [a for a in _out_schema(name).arguments if not a.is_out]
    names, inputs, consts = [], [], {}
    for a, v in zip(out_args, args):
        if isinstance(v, np.ndarray):
            names.append(a.name)
            inputs.append(torch.from_numpy(v.copy()))
        elif "ScalarType" in str(a.type) and v is not None:
            consts[a.name] = kt.TORCH_OF[np.dtype(to_numpy_dtype(v))]
        else:
            consts[a.name] = v
    assert {a.name for a in schema} >= set(names) | set(consts)
    ep = torch.export.export(_OneOp(op, names, consts), tuple(inputs))
    return to_edge(ep).to_executorch().buffer, [t.numpy() for t in inputs]


def _out_schema(name: str):
    ns, rest = name.split("::")
    op, overload = rest.split(".")
    return getattr(getattr(torch.ops.quantized_decomposed, op), overload)._schema


MAX_CASES = 3  # per record and dtype: every variant and shape kind, quick enough to export


def test_every_kernel_is_bit_exact_with_executorch(tmp_path):
    kt = _kernel_table()
    items, ours_out, labels = [], [], []
    for rec in kt.RECORDS:
        for dt in kt.dtypes_of(rec.name):
            if dt == kt.BF16:  # the reference tool's npz files cannot carry bfloat16
                continue
            rng = np.random.default_rng(11)
            for k, (args, _, _) in enumerate(rec.cases(rng, dt)[:MAX_CASES]):
                if any(isinstance(a, np.ndarray) and a.dtype == kt.BF16 for a in args):
                    continue
                try:
                    pte, inputs = _one_op_program(kt, rec.name, args)
                except (AssertionError, RuntimeError):
                    # torch's own op refuses it (e.g. float64 into quantize_per_tensor), so no
                    # exported program can contain it; the kernel test covers it directly
                    continue
                i = len(items)
                (tmp_path / f"case_{i}.pte").write_bytes(pte)
                np.savez(tmp_path / f"case_{i}.npz", *inputs)
                items.append({"pte": str(tmp_path / f"case_{i}.pte"),
                              "inputs": str(tmp_path / f"case_{i}.npz")})
                ours_out.append(ours(pte, inputs))
                labels.append(f"{rec.name} {dt} case {k}")
    done = ref_run_many(items, tmp_path)
    errors = [f"{label}: {item['error']}" for label, item in zip(labels, done) if "error" in item]
    assert not errors, "\n".join(errors)
    covered = set()
    for label, got, item in zip(labels, ours_out, done):
        want = item["result"]
        assert len(got) == len(want), label
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (label, g.dtype, w.dtype)
            assert g.tobytes() == w.tobytes(), f"{label}: ours {g} vs ExecuTorch {w}"
        covered.add(label.split()[0])
    assert covered == {r.name for r in kt.RECORDS}


# ---- whole programs ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """name -> (our .pte, ExecuTorch's .pte, inputs, eager outputs, eager module)."""
    tmp = tmp_path_factory.mktemp("quant_models")
    result = {}
    for name in MODELS:
        et_path = tmp / f"{name}.pte"
        _ref("export", name, str(et_path))
        ep, example, eager = build(name)
        pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(**CONFIG.get(name, {}))).buffer
        inputs = load_npz(et_path.with_suffix(".inputs.npz"))
        for mine, theirs in zip(example, inputs):
            np.testing.assert_array_equal(mine.numpy(), theirs)
        with torch.no_grad():
            expected = eager(*example)
        result[name] = (pte, et_path.read_bytes(), inputs, [expected.numpy()], eager)
    return result


def output_step(name: str, eager) -> float:
    """The tolerance: one quantization step of the output (float programs: 1e-5)."""
    if name.startswith("embedding"):
        return 1e-6
    out = next(n for n in eager.graph.nodes if n.op == "output").args[0]
    node = out[0] if isinstance(out, (tuple, list)) else out
    if "dequantize_per_tensor.default" in str(node.target):
        return float(node.args[1]) * 1.0001
    return 1e-5


_SIZE = {"CHAR": 1, "BYTE": 1, "SHORT": 2, "INT": 4, "LONG": 8, "HALF": 2, "FLOAT": 4,
         "DOUBLE": 8, "BFLOAT16": 2, "BOOL": 1, "UINT16": 2}


def quantized_calls(pte: bytes) -> list[tuple]:
    """(operator, arguments) of every quantized kernel call, arguments as comparable values:
    tensors by dtype and shape (and constant data), scalars by type and value."""
    pf = PteFile.parse(pte)
    plan = pf.program.execution_plan[0]
    calls = []
    for ins in plan.chains[0].instructions:
        a = ins.instr_args
        if type(a).__name__ != "KernelCall":
            continue
        op = plan.operators[a.op_index]
        if not op.name.startswith("quantized_decomposed::"):
            continue
        args = []
        for i in a.args:
            v = plan.values[i].val
            kind = type(v).__name__
            if kind == "Tensor":
                data = None
                if v.data_buffer_idx > 0:  # a constant: compare its bytes too
                    data = bytes(pf.constant_bytes(v.data_buffer_idx))
                    data = data[:int(np.prod(v.sizes, dtype=np.int64)) * _SIZE[v.scalar_type.name]]
                args.append(("Tensor", v.scalar_type.name, tuple(v.sizes), data))
            elif kind == "TensorList":
                args.append(("TensorList", len(v.items)))
            else:
                fields = vars(v)
                args.append((kind, *fields.values()))
        calls.append((f"{op.name}.{op.overload}", args))
    return calls


@pytest.mark.parametrize("name", MODELS)
def test_our_program_runs_in_executorch(programs, name, tmp_path):
    pte, _, inputs, expected, eager = programs[name]
    (tmp_path / "ours.pte").write_bytes(pte)
    np.savez(tmp_path / "in.npz", *inputs)
    done = ref_run_many([{"pte": str(tmp_path / "ours.pte"), "inputs": str(tmp_path / "in.npz")}],
                        tmp_path)[0]
    assert "error" not in done, done.get("error")
    tol = output_step(name, eager)
    np.testing.assert_allclose(done["result"][0], expected[0], rtol=0, atol=tol)
    np.testing.assert_allclose(ours(pte, inputs)[0], expected[0], rtol=0, atol=tol)


@pytest.mark.parametrize("name", MODELS)
def test_executorch_program_runs_in_edgetorch(programs, name):
    _, et_pte, inputs, expected, eager = programs[name]
    np.testing.assert_allclose(ours(et_pte, inputs)[0], expected[0], rtol=0,
                               atol=output_step(name, eager))


@pytest.mark.parametrize("name", MODELS)
def test_quantized_calls_are_encoded_as_executorch_encodes_them(programs, name):
    pte, et_pte, *_ = programs[name]
    mine, theirs = quantized_calls(pte), quantized_calls(et_pte)
    assert mine, "no quantized kernel call in the program"
    assert sorted(mine) == sorted(theirs)


@pytest.mark.parametrize("name,kernel", [("embedding_int8", "embedding_byte.out"),
                                         ("embedding_int4", "embedding_4bit.out"),
                                         ("embedding_int2", "embedding_2bit.out")])
def test_quant_fusion_makes_one_embedding_kernel(programs, name, kernel):
    pte, et_pte, *_ = programs[name]
    for program in (pte, et_pte):
        calls = quantized_calls(program)
        assert [c[0] for c in calls] == [f"quantized_decomposed::{kernel}"]
    plan = PteFile.parse(pte).program.execution_plan[0]
    names = {f"{o.name}.{o.overload}" for o in plan.operators}
    assert "aten::embedding.out" not in names and "aten::sub.out" not in names
