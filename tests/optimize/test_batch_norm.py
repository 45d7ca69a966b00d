"""BatchNorm folded into the preceding convolution at load (runtime/optimize/batch_norm.py),
for programs whose compiler did not fold it: the folded method agrees with eager PyTorch, and
the graph decides when folding is allowed."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest
import torch

from edgetorch.exir import ExecutorchBackendConfig, to_edge
from edgetorch.kernels import accel
from edgetorch.runtime import Runtime
from edgetorch.runtime.optimize import batch_norm


def _bn(c: int, affine: bool = True) -> torch.nn.BatchNorm2d:
    bn = torch.nn.BatchNorm2d(c, affine=affine, eps=1e-3)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.25, 4)
    if affine:
        bn.weight.data.uniform_(0.5, 2)
        bn.bias.data.uniform_(-1, 1)
    return bn


def _load(model, x, fast=True):
    """A method of ``model``'s program as a compiler that keeps BatchNorms writes it (as
    ExecuTorch's does; edgetorch's folds them ahead of time)."""
    pte = to_edge(torch.export.export(model, (x,))).to_executorch(
        ExecutorchBackendConfig(fuse_batch_norm=False)).buffer
    return Runtime.get().load_program(pte).load_method("forward", optimize=fast)


def _folded(method) -> list[str]:
    """Names of the instructions that run no step of their own (a folded BatchNorm)."""
    steps, owner = method._steps
    return [r.name for r in method.records if r.index not in owner]


@pytest.mark.parametrize("groups,bias,affine", [(1, True, True), (1, False, False), (4, True, True)])
def test_conv_batchnorm_folds_and_matches_eager(groups, bias, affine):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, 3, padding=1, groups=groups, bias=bias), _bn(16, affine),
        torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 1, stride=2), _bn(8)).eval()
    x = torch.randn(2, 8, 10, 10)
    method = _load(model, x)
    bn = "aten::_native_batch_norm_legit_no_training.out"
    assert _folded(method) == [bn, "aten::relu.out", bn]  # the ReLU rides on the first
    with torch.no_grad():
        want = model(x).numpy()
    got = method.execute([x.numpy()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    unfolded = _load(model, x, fast=False).execute([x.numpy()])[0]
    np.testing.assert_allclose(got, unfolded, rtol=1e-5, atol=1e-5)


class _Shared(torch.nn.Module):
    """The convolution's result feeds the BatchNorm and a residual add: no folding."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(4, 4, 3, padding=1), _bn(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


def test_no_folding_when_the_convolution_result_is_read_elsewhere():
    torch.manual_seed(1)
    model = _Shared().eval()
    x = torch.randn(1, 4, 6, 6)
    method = _load(model, x)
    assert _folded(method) == []
    with torch.no_grad():
        np.testing.assert_allclose(method.execute([x.numpy()])[0], model(x).numpy(),
                                   rtol=1e-5, atol=1e-5)


class _Viewed(torch.nn.Module):
    """The convolution's result also leaves through a view of it: no folding."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(4, 4, 3, padding=1), _bn(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y), y.reshape(1, -1) * 2


def test_no_folding_when_a_view_of_the_convolution_result_is_read():
    torch.manual_seed(2)
    model = _Viewed().eval()
    x = torch.randn(1, 4, 6, 6)
    method = _load(model, x)
    assert _folded(method) == []
    with torch.no_grad():
        for got, want in zip(method.execute([x.numpy()]), model(x)):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


# ---- the activation after the BatchNorm, fused into the folded convolution's epilogue ------


def _act_model(act, groups):
    c = 8 if groups == 1 else 16
    return torch.nn.Sequential(
        torch.nn.Conv2d(8, c, 3, padding=1, groups=groups, bias=False), _bn(c), act,
        torch.nn.Conv2d(c, 16, 1), _bn(16), act,  # a GEMM epilogue
        torch.nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16), _bn(16), act,  # depthwise
        torch.nn.Conv2d(16, 4, 3, padding=1), _bn(4)).eval()  # no activation: folded only


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("act", [torch.nn.ReLU6(), torch.nn.ReLU(), torch.nn.Hardtanh(-1, 2)],
                         ids=["relu6", "relu", "hardtanh"])
@pytest.mark.parametrize("groups", [1, 8])
def test_activation_fuses_into_the_folded_convolution(act, groups, compiled):
    torch.manual_seed(3)
    model = _act_model(act, groups)
    x = torch.randn(2, 8, 10, 10) * 3
    with (contextlib.nullcontext() if compiled else accel.disabled()):
        if compiled and not accel.available():
            pytest.skip("numba is not installed (the accel extra)")
        method = _load(model, x)
        names = _folded(method)
        assert names.count("aten::_native_batch_norm_legit_no_training.out") == 4
        # and the activations, but where the planner put the activation's output over the
        # convolution's input (the input is dead after the convolution) they cannot fuse
        assert len(names) >= 6
        got = method.execute([x.numpy()])[0]
        again = method.execute([x.numpy()])[0]
        # the same rule without its activation tail
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(batch_norm, "RULE", dataclasses.replace(batch_norm.RULE, tail=None))
            unfused = _load(model, x)
        assert len(_folded(unfused)) == 4
        assert got.tobytes() == again.tobytes() == unfused.execute([x.numpy()])[0].tobytes()
        unfolded = _load(model, x, fast=False).execute([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, unfolded, rtol=1e-5, atol=1e-5)


class _ActivationRead(torch.nn.Module):
    """The BatchNorm's output is also a method output: the BatchNorm folds, the activation
    stays an instruction of its own."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(4, 4, 3, padding=1), _bn(4)

    def forward(self, x):
        y = self.bn(self.conv(x))
        return torch.nn.functional.relu6(y), y


def test_no_activation_fusion_when_the_batchnorm_output_is_read_elsewhere():
    torch.manual_seed(4)
    model = _ActivationRead().eval()
    x = torch.randn(1, 4, 6, 6) * 3
    method = _load(model, x)
    assert _folded(method) == ["aten::_native_batch_norm_legit_no_training.out"]
    with torch.no_grad():
        for got, want in zip(method.execute([x.numpy()]), model(x)):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


class _ConvActs(torch.nn.Module):
    """Convolutions with an activation after them and nothing in between (edgetorch's own
    programs: the BatchNorms folded ahead of time), one whose result is also read elsewhere."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.bn = _bn(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)  # depthwise
        self.c3 = torch.nn.Conv2d(8, 8, 1, bias=False)
        self.c4 = torch.nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.c2(torch.relu(self.bn(self.c1(x)))))
        z = self.c4(torch.relu(self.c3(y)))
        return torch.relu(z) + z  # z also read by the add: its activation stays


@pytest.mark.parametrize("compiled", [False, True])
def test_conv_activation_fuses_within_float_rounding(compiled):
    torch.manual_seed(3)
    model, x = _ConvActs().eval(), torch.randn(2, 4, 9, 9)
    pte = to_edge(torch.export.export(model, (x,))).to_executorch().buffer  # BN fused AOT
    prog = Runtime.get().load_program(pte)
    with contextlib.nullcontext() if compiled else accel.disabled():
        fused = prog.load_method("forward", optimize={"fuse_conv_activation"})
        # The planner gives each activation here its convolution's input bytes: the GEMM
        # convolution with a bias keeps writing its own result, read by the epilogue (c1);
        # the compiled depthwise loop clamps itself, into the output (c2's 9x9 planes go
        # channels-last, reading a copy of the input); NumPy's depthwise and the bias-free
        # GEMM would save nothing that way and stay; the last relu stays (its input is read
        # by the add too).
        assert fused.load_report["fuse_conv_activation"].changed == (4 if compiled else 2)
        assert _folded(fused) == ["aten::relu.out"] + (["aten::hardtanh.out"] if compiled
                                                       else [])
        got = fused.execute([x.numpy()])[0]
    want = prog.load_method("forward", optimize=False).execute([x.numpy()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # (the pass's tolerance)
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)


class _LargeDepthwise(torch.nn.Module):
    """A depthwise convolution on planes the compiled loop computes in NCHW (above the
    channels-last threshold), its relu6 given the input's bytes by the planner."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.dw2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.dw(torch.relu(self.c1(x))))
        return torch.relu(self.dw2(y))


def test_compiled_depthwise_clamps_in_its_loop_when_the_output_takes_the_input_bytes():
    torch.manual_seed(5)
    model, x = _LargeDepthwise().eval(), torch.randn(1, 3, 40, 40) * 4
    pte = to_edge(torch.export.export(model, (x,))).to_executorch().buffer
    prog = Runtime.get().load_program(pte)
    fused = prog.load_method("forward", optimize={"fuse_conv_activation"})
    assert fused.load_report["fuse_conv_activation"].changed == 6  # all three convolutions
    assert _folded(fused) == ["aten::relu.out", "aten::hardtanh.out", "aten::relu.out"]
    got = fused.execute([x.numpy()])[0]
    want = prog.load_method("forward", optimize=False).execute([x.numpy()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # (the pass's tolerance)
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)
