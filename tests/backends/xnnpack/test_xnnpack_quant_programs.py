"""ExecuTorch 1.5.1's quantized XNNPACK programs run in edgetorch's runtime.

Bounds (issue 8): static int8 within one output quantization step of ExecuTorch's runtime
output; dynamic int8 and 8da4w within 1% of the output range; and the same bounds against the
converted (fake-quant) eager model. Three small programs are checked in (torch-free); the
compat tests quantize and lower every model of ``xnn_qref.CASES`` with the real ExecuTorch.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from refenv import _clean_env, ref_available, ref_python

from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.serialization import deserialize_xnnpack_binary
from edgetorch.runtime import Runtime
from edgetorch.schema.pte import PteFile

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
CHECKED_IN = ["small_mlp_static_pc", "blocks_static_pc", "small_mlp_8da4w"]
# every case of xnn_qref.CASES (kept here so collecting stays torch-free)
CASES = ["cnn_static_pc", "cnn_static_pt", "cnn_dynamic", "mlp_static_pc", "mlp_static_pt",
         "mlp_dynamic", "small_mlp_static_pc", "small_mlp_8da4w", "mobilenet_v2_static_pc",
         "blocks_static_pc", "blocks_static_pt", "mlp_8da4w", "llama_8da4w", "llama_dynamic",
         "llama_static_pc"]
# The default run keeps each mode (static per channel, dynamic, 8da4w) on a conv net, an MLP,
# the residual blocks and the Llama block; the others run with `-m slow` (make test-slow):
# exporting them in ExecuTorch took most of this file's 8 minutes.
SLOW_CASES = {"mobilenet_v2_static_pc", "llama_dynamic", "llama_static_pc", "cnn_static_pt",
              "mlp_static_pt", "blocks_static_pt", "cnn_dynamic", "mlp_static_pc",
              "small_mlp_static_pc", "mlp_8da4w"}


def _params(xfail: dict | None = None) -> list:
    return [pytest.param(n, marks=[*([pytest.mark.slow] if n in SLOW_CASES else []),
                                   *([xfail[n]] if xfail and n in xfail else [])])
            for n in CASES]


def output_steps(pte: bytes) -> list[float]:
    """Per delegate output, the scale of the int8 value converted into it (0 if float)."""
    program = PteFile.parse(pte)
    steps = []
    for d in program.program.execution_plan[0].delegates:
        g = deserialize_xnnpack_binary(program.delegate_bytes(d)).graph
        values = {v.tensor.id_out: v for v in g.xvalues}
        for n in g.xnodes:
            u = n.xnode_union
            if isinstance(u, x.XNNConvert) and values[u.output_id].tensor.flags & \
                    x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT:
                q = getattr(values[u.input_id].xvalue_union, "quant_params", None)
                steps.append(q.scale if isinstance(q, x.PerTensorQuant) else 0.0)
    return steps


def check(name: str, pte: bytes, io: dict[str, np.ndarray], against: str = "et"
          ) -> dict[str, float]:
    """Run ``pte`` here on the recorded inputs; assert the bound against ExecuTorch's outputs
    (``against="et"``) or the fake-quant eager model's (``"fq"``)."""
    n_in = sum(k.startswith("in_") for k in io)
    method = Runtime.get().load_program(pte).load_method("forward")
    outs = method.execute([io[f"in_{k}"] for k in range(n_in)])
    static = "static" in name
    step = max(output_steps(pte), default=0.0)
    report = {}
    for k, ours in enumerate(outs):
        ref = io[f"{against}_{k}"]
        assert ours.shape == ref.shape and ours.dtype == ref.dtype
        bound = step * 1.0001 if static and step else 0.01 * float(np.ptp(io[f"et_{k}"]))
        d = np.abs(ours - ref)
        assert d.max() <= bound, f"{name} out {k}: {d.max()} from {against} > {bound}"
        report[f"exact_{k}"] = float(np.mean(d == 0))
    return report


@pytest.mark.parametrize("name", CHECKED_IN)
def test_checked_in_executorch_quantized_program(name):
    pte = (FIXTURES / f"et_q_{name}.pte").read_bytes()
    with np.load(FIXTURES / f"et_q_{name}.io.npz") as d:
        io = dict(d)
    report = check(name, pte, io)
    check(name, pte, io, against="fq")
    if "static" in name:  # XNNPACK's fp32 requantization, reproduced
        assert min(report.values()) == 1.0, report


@pytest.mark.parametrize("name", CHECKED_IN)
def test_checked_in_quantized_programs_load_passes_give_the_reference_results(name):
    from pass_equivalence import assert_passes_match_the_kernels

    pte = (FIXTURES / f"et_q_{name}.pte").read_bytes()
    with np.load(FIXTURES / f"et_q_{name}.io.npz") as d:
        inputs = [d[f"in_{k}"] for k in range(sum(k.startswith("in_") for k in d))]
    assert_passes_match_the_kernels(pte, inputs, name)


@pytest.fixture(scope="session")
def quant_exports(tmp_path_factory, request):
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    out = tmp_path_factory.mktemp("xnnpack-quant")
    cmd = [str(ref_python()), str(HERE / "xnn_qref.py"), "export", str(out)]
    # only the cases this session runs
    wanted = {item.callspec.params["name"] for item in request.session.items
              if item.path == Path(__file__) and "quant_exports" in item.fixturenames}
    cases = [n for n in CASES if n in wanted]
    # two processes, half the cases each (the machine has two cores)
    procs = [subprocess.Popen(cmd + cases[k::2], env=_clean_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=1800)
        if p.returncode:
            pytest.fail(f"xnn_qref.py failed:\n{err[-4000:]}")
    return out


def _load(directory: Path, name: str) -> tuple[bytes, dict[str, np.ndarray]]:
    err = directory / f"{name}.err.txt"
    if err.exists():
        pytest.fail(f"ExecuTorch could not build {name}:\n{err.read_text()[-3000:]}")
    with np.load(directory / f"{name}.io.npz") as d:
        return (directory / f"{name}.pte").read_bytes(), dict(d)


@pytest.mark.compat
@pytest.mark.parametrize("name", _params())
def test_executorch_quantized_program_runs_here(quant_exports, name):
    report = check(name, *_load(quant_exports, name))
    if "static" in name:  # measured: every static program is bit-exact
        assert min(report.values()) == 1.0, report


# Measured: ExecuTorch's own output is 2 output steps (0.0048) from the fake-quant eager model
# here, and ours equals ExecuTorch's bit for bit; the bound holds for every other case.
_ET_ITSELF_OFF = pytest.mark.xfail(strict=True, reason="ExecuTorch 1.5.1's XNNPACK output is "
                                   "itself 2 output steps from fake-quant eager")


@pytest.mark.compat
@pytest.mark.parametrize("name", _params({"mobilenet_v2_static_pc": _ET_ITSELF_OFF}))
def test_executorch_quantized_program_matches_fake_quant(quant_exports, name):
    pte, io = _load(quant_exports, name)
    check(name, pte, io, against="fq")
