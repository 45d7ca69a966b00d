"""DuplicateDynamicQuantChainPass on real PT2E dynamic-quantization graphs (torchao's
prepare/convert with edgetorch's XNNPACKQuantizer)."""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

from edgetorch.backends.transforms.duplicate_dynamic_quant_chain import (  # noqa: E402
    DuplicateDynamicQuantChainPass,
)

QD = "quantized_decomposed."
CHAIN = [QD + "choose_qparams.tensor", QD + "quantize_per_tensor.tensor",
         QD + "dequantize_per_tensor.tensor"]


class TwoFanOutLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(8, 16, bias=False)
        self.linear2 = torch.nn.Linear(8, 16)

    def forward(self, x):
        return self.linear1(x) + self.linear2(x)


class ThreeFanOutLinears(TwoFanOutLinears):
    def __init__(self):
        super().__init__()
        self.linear3 = torch.nn.Linear(8, 16)

    def forward(self, x):
        return super().forward(x) * self.linear3(x)


class TwoLinears(torch.nn.Module):  # linear -> linear: nothing to duplicate
    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(8, 8)
        self.linear2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.linear2(self.linear1(x))


def _dynamic_quantized(model):
    # edgetorch's own quantizer: importing torchao's reference copy (torchao.testing.pt2e)
    # changes what later conversions produce in the same process.
    from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    torch.manual_seed(0)
    example = (torch.randn(9, 8),)
    gm = torch.export.export(model.eval(), example, strict=True).module()
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    gm = prepare_pt2e(gm, quantizer)
    gm(*example)
    return convert_pt2e(gm, fold_quantize=True), example


def _counts(gm) -> Counter:
    return Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")


def _chain_per_linear(gm) -> bool:
    """Each linear reads its own dequantize, fed by its own quantize and choose_qparams."""
    linears = [n for n in gm.graph.nodes if str(n.target) == "aten.linear.default"]
    dqs = [n.args[0] for n in linears]
    chooses = [dq.args[0].args[1].args[0] for dq in dqs]
    return len(set(dqs)) == len(linears) and len(set(chooses)) == len(linears)


@pytest.mark.parametrize("model, n", [(TwoFanOutLinears(), 2), (ThreeFanOutLinears(), 3)])
def test_each_consumer_gets_its_own_chain(model, n):
    gm, example = _dynamic_quantized(model)
    before = _counts(gm)
    assert [before[op] for op in CHAIN] == [1, 1, 1]
    expected = gm(*example)
    result = DuplicateDynamicQuantChainPass()(gm)
    assert result.modified
    after = _counts(result.graph_module)
    assert [after[op] for op in CHAIN] == [n, n, n]
    assert after["<built-in function getitem>"] == 2 * n
    assert after[QD + "dequantize_per_channel.default"] == before[QD + "dequantize_per_channel.default"]
    assert _chain_per_linear(result.graph_module)
    torch.testing.assert_close(result.graph_module(*example), expected, rtol=0, atol=0)


def test_nothing_to_duplicate():
    gm, _ = _dynamic_quantized(TwoLinears())
    before = _counts(gm)
    result = DuplicateDynamicQuantChainPass()(gm)
    assert not result.modified and _counts(result.graph_module) == before


def test_unannotated_consumer_keeps_the_shared_chain():
    gm, example = _dynamic_quantized(TwoFanOutLinears())
    linear = next(n for n in gm.graph.nodes if str(n.target) == "aten.linear.default")
    del linear.meta["quantization_annotation"]
    before = _counts(gm)
    assert not DuplicateDynamicQuantChainPass()(gm).modified
    assert _counts(gm) == before


def test_sym_size_readers_do_not_count_and_keep_the_original():
    gm, _ = _dynamic_quantized(TwoFanOutLinears())
    dq = next(n for n in gm.graph.nodes if str(n.target) == CHAIN[2])
    with gm.graph.inserting_after(dq):
        size = gm.graph.call_function(torch.ops.aten.sym_size.int, (dq, 0))
    output = next(n for n in gm.graph.nodes if n.op == "output")
    output.args = ((*output.args[0], size),)  # keep the reader alive
    result = DuplicateDynamicQuantChainPass()(gm)
    assert result.modified
    assert [_counts(result.graph_module)[op] for op in CHAIN] == [2, 2, 2]
    assert _chain_per_linear(result.graph_module)
    assert size.args[0] is dq and dq in result.graph_module.graph.nodes
