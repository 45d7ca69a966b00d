"""The debugger's building blocks, without exporting anything: reading the user's data, the
per-layer and per-output metrics, targets, recipes and the quantizer calls they print."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from edgetorch.devtools.quant_debug.data import Sample, load_samples, shard
from edgetorch.devtools.quant_debug.metrics import Accumulator, QRange, Target, cosine, top1
from edgetorch.devtools.quant_debug.recipes import (
    Recipe,
    fallback_config,
    make_quantizer,
    quantizer_calls,
)
from edgetorch.errors import FeatureNotAvailableError, QuantDebugError

EXAMPLE = (torch.zeros(2, 3),)


# ---- data ---------------------------------------------------------------------------------------


def test_folder_one_sample_per_file_and_stacked_batches(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((6, 3))  # float64: cast to float32
    np.save(tmp_path / "0.npy", a)
    np.save(tmp_path / "1.npy", b)
    samples = load_samples(tmp_path, EXAMPLE)
    assert len(samples) == 1 + 3
    assert all(s.inputs[0].shape == (2, 3) and s.inputs[0].dtype == torch.float32
               for s in samples)
    np.testing.assert_array_equal(samples[2].inputs[0].numpy(), b[2:4].astype(np.float32))


def test_folder_groups_files_per_input_and_refuses_objects(tmp_path):
    example = (torch.zeros(1, 4), torch.zeros(1, 4, dtype=torch.int64))
    for i in range(2):
        np.save(tmp_path / f"{i}_a.npy", np.ones((1, 4), np.float32))
        np.save(tmp_path / f"{i}_b.npy", np.ones((1, 4), np.int64))
    assert len(load_samples(tmp_path, example)) == 2
    np.save(tmp_path / "2_a.npy", np.array([object()], dtype=object))
    with pytest.raises(QuantDebugError, match="multiple of 2"):
        load_samples(tmp_path, example)


def test_loader_items_split_inputs_from_targets():
    x, y = torch.randn(8, 3), torch.arange(8)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    samples = load_samples(loader, EXAMPLE)
    assert len(samples) == 4  # two batches of 4, each split into example batches of 2
    torch.testing.assert_close(samples[1].inputs[0], x[2:4])
    torch.testing.assert_close(samples[1].target, y[2:4])


@pytest.mark.parametrize("item, message", [
    ({"x": torch.zeros(2, 3)}, "dict"),
    (torch.zeros(3, 3), "takes torch.float32\\[2, 3\\]"),
    (torch.zeros(2, 3, dtype=torch.int64), "convert it first"),
    ("text", "give tensors"),
])
def test_bad_items_say_what_is_wrong(item, message):
    with pytest.raises(QuantDebugError, match=message):
        load_samples([item], EXAMPLE)


def test_targets_file_labels_samples(tmp_path):
    np.save(tmp_path / "y.npy", np.arange(6))
    samples = load_samples([torch.zeros(2, 3)] * 3, EXAMPLE, targets=tmp_path / "y.npy")
    assert [s.target.tolist() for s in samples] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(QuantDebugError, match="targets for"):
        load_samples([torch.zeros(2, 3)] * 4, EXAMPLE, targets=np.arange(6))


def test_shards_cover_every_sample_once():
    samples = [Sample((torch.tensor([i]),)) for i in range(7)]
    parts = shard(samples, 3)
    assert [len(p) for p in parts] == [3, 2, 2]
    assert [int(s.inputs[0]) for p in parts for s in p] == list(range(7))
    assert len(shard(samples[:1], 4)) == 1


# ---- metrics ------------------------------------------------------------------------------------


def test_sqnr_pools_samples_as_torchao_computes_it():
    from torchao.quantization.utils import compute_error

    rng = np.random.default_rng(1)
    refs = [rng.standard_normal(50).astype(np.float32) for _ in range(3)]
    vals = [r + rng.standard_normal(50).astype(np.float32) * 0.01 for r in refs]
    acc = Accumulator()
    for r, v in zip(refs, vals):
        acc.add(r, v)
    want = float(compute_error(torch.from_numpy(np.concatenate(refs)),
                               torch.from_numpy(np.concatenate(vals))))
    assert acc.sqnr() == pytest.approx(want, abs=1e-3)
    assert acc.max_abs == pytest.approx(max(np.abs(r - v).max() for r, v in zip(refs, vals)))
    same = Accumulator()
    same.add(refs[0], refs[0])
    assert same.sqnr() == math.inf and same.cosine() == pytest.approx(1.0)


def test_saturation_counts_range_ends_but_not_an_exact_zero_end():
    relu = QRange(scale=0.1, zero_point=-128, qmin=-128, qmax=127)  # [0, 25.5]
    values = np.array([0.0, 0.0, 1.0, 25.5, 30.0])
    assert relu.saturated(values) == 2  # 25.5 sits at qmax, 30 beyond; zeros are exact
    sym = QRange(scale=0.1, zero_point=0, qmin=-128, qmax=127)
    assert sym.saturated(np.array([-12.8, -20.0, 0.0, 12.7])) == 3


def test_output_metrics_and_targets():
    samples = [Sample((torch.zeros(1),), torch.tensor([1, 1]))]
    out = [np.array([[0.1, 0.9], [0.2, 0.1]])]  # predicts 1 then 0
    assert top1(out, samples, out) == 50.0
    assert cosine(out, samples, out) == pytest.approx(1.0)
    t = Target.parse("top1_drop<=1")
    assert t.max_drop == 1 and t.met(95.0, 96.0) and not t.met(94.5, 96.0)
    assert Target.parse("cosine>=0.99").met(0.995, 1.0)
    assert str(Target.parse(" sqnr >= 30 ")) == "sqnr>=30"
    with pytest.raises(QuantDebugError, match="unknown metric"):
        Target.parse("f1>=3")
    with pytest.raises(QuantDebugError, match="needs targets"):
        top1(out, [Sample((torch.zeros(1),))], out)


# ---- recipes ------------------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.conv2 = nn.Conv2d(4, 4, 3)
        self.block = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU())
        self.fc = nn.Linear(4, 2)


@pytest.mark.parametrize("text, key", [
    ("xnnpack:static", "xnnpack/static/pc"), ("xnnpack:dynamic:pt", "xnnpack/dynamic/pt"),
    ("xnnpack:8da4w:g64", "xnnpack/8da4w/g64"), ("portable:fp32", "portable/fp32"),
    ("ethos-u55-128:static", "ethos-u55-128/static/pc"), ("vgf:static", "vgf/static/pc"),
])
def test_recipes_parse_to_keys(text, key):
    assert Recipe.parse(text).key == key


@pytest.mark.parametrize("text, message", [
    ("xnnpack", "backend:scheme"), ("gpu:static", "unknown backend"),
    ("portable:8da4w", "XNNPACK only"), ("ethos-u55-128:dynamic", "static"),
    ("vgf:dynamic", "static"),
    ("xnnpack:static:x", "unknown option"),
])
def test_bad_recipes_say_what_to_write(text, message):
    with pytest.raises(QuantDebugError, match=message):
        Recipe.parse(text)


def test_float_modules_print_and_build_the_same_quantizer():
    model = Net()
    recipe = Recipe.parse("xnnpack:static").with_float_modules(["conv2"])
    code = quantizer_calls(recipe, model)
    assert code.splitlines()[-4:] == [
        "quantizer = XNNPACKQuantizer().set_global(config)",
        "quantizer.set_module_type(torch.nn.Conv2d, None)",
        "quantizer.set_module_name('conv1', config)",
        "quantizer.set_module_name('block.0', config)",
    ]
    q = make_quantizer(recipe, model)
    assert q.module_type_config == {nn.Conv2d: None}
    assert set(q.module_name_config) == {"conv1", "block.0"}
    assert q.module_name_config["conv1"] is q.global_config
    # the printed code builds the same quantizer (names exactly as printed)
    from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: F401
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    scope = {"torch": torch, "XNNPACKQuantizer": XNNPACKQuantizer,
             "get_symmetric_quantization_config": get_symmetric_quantization_config}
    exec(code, scope)  # our own generated code, not file content
    built = scope["quantizer"]
    assert built.module_type_config == q.module_type_config
    # configs hold observer constructors (compared by identity): the same names, each the
    # printed quantizer's own global config
    assert set(built.module_name_config) == set(q.module_name_config)
    assert all(c is built.global_config for c in built.module_name_config.values())


def test_unknown_float_module_and_the_a16w8_hook():
    with pytest.raises(QuantDebugError, match="not submodules"):
        make_quantizer(Recipe.parse("xnnpack:static").with_float_modules(["nope"]), Net())
    a16w8 = Recipe("static", "ethos-u55-128", float_modules=("conv2",), fallback="a16w8")
    config = fallback_config(a16w8)  # Arm's 16A8W: int16 activations, int8 weights
    assert config.input_activation.dtype == torch.int16
    assert config.output_activation.dtype == torch.int16
    assert config.weight.dtype == torch.int8
    with pytest.raises(FeatureNotAvailableError, match="a16w8"):
        fallback_config(Recipe("static", "xnnpack", float_modules=("conv2",), fallback="a16w8"))


def test_torchao_recipes_print_their_filter():
    code = quantizer_calls(Recipe("8da4w", "xnnpack", group_size=64,
                                  float_modules=("fc",)), Net())
    assert "PerGroup(64)" in code and "m.in_features % 64 == 0" in code
    assert "fqn not in {'fc'}" in code


# ---- outputs --------------------------------------------------------------------------------------


def test_model_output_is_the_first_tensor_of_whatever_the_model_returns():
    from edgetorch.devtools.quant_debug.capture import model_output

    modeling = pytest.importorskip("transformers.modeling_outputs")

    class Returns(nn.Module):
        def __init__(self, make):
            super().__init__()
            self.make = make

        def forward(self, x):
            return self.make(x)

    x = torch.arange(6.0).reshape(2, 3)
    for make in (lambda x: x * 2, lambda x: (x * 2, x), lambda x: [(x * 2,)],
                 lambda x: modeling.BaseModelOutput(last_hidden_state=x * 2)):
        torch.testing.assert_close(model_output(Returns(make), (x,)), x * 2)
    with pytest.raises(QuantDebugError, match="holds no tensor"):
        model_output(Returns(lambda x: modeling.BaseModelOutput()), (x,))
