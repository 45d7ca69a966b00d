"""Passes from ExecuTorch's documentation (docs/source/compiler-custom-compiler-passes.md),
written against edgetorch with only the imports renamed (and matching the Edge op names that
ExecuTorch users match on Edge graphs), plus the models they run on.

The compat test runs this very file under ExecuTorch with ``edgetorch`` replaced by
``executorch`` (``CASES``), so the passes are checked to be ExecuTorch code as well.
"""

import torch

from edgetorch.exir.dialects._ops import ops as exir_ops
from edgetorch.exir.pass_base import ExportPass, PassBase, PassResult

# ---- the passes, as the documentation writes them -------------------------------------------


class ReplaceAddWithMulSub(ExportPass):
    """Original: x + y.  After the pass: z = x * y; z - y  (one-to-X)."""

    def call_operator(self, op, args, kwargs, meta):
        if op != exir_ops.edge.aten.add.Tensor:
            return super().call_operator(op, args, kwargs, meta)

        x, y = args

        mul_res = super().call_operator(
            exir_ops.edge.aten.mul.Tensor,
            args,
            {},
            meta
        )

        return super().call_operator(
            exir_ops.edge.aten.sub.Tensor,
            (mul_res, y),
            {},
            meta
        )


class ReplaceAddWithMul(ExportPass):
    """One-to-one."""

    def call_operator(self, op, args, kwargs, meta):
        if op != exir_ops.edge.aten.add.Tensor:
            return super().call_operator(op, args, kwargs, meta)
        return super().call_operator(exir_ops.edge.aten.mul.Tensor, args, kwargs, meta)


class RemoveClonePass(ExportPass):
    """One-to-none: the documentation's RemoveDetachPass, for the copy ops an Edge graph has."""

    def call_operator(self, op, args, kwargs, meta):
        if op not in (
            exir_ops.edge.aten.clone.default,
            exir_ops.edge.dim_order_ops._clone_dim_order.default,
        ):
            return super().call_operator(op, args, kwargs, meta)

        assert len(args) == 1
        return args[0]


class ReplaceAddPass(PassBase):

    def __init__(self, replace_op):
        self.replace_op = replace_op

    def call(self, graph_module):
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and node.target == exir_ops.edge.aten.add.Tensor:
                node.target = self.replace_op

    # Optional to implement, will be called before call()
    def requires(self, graph_module) -> None:
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and node.target == exir_ops.edge.aten.add.Tensor:
                return
        raise ValueError("No torch.add ops!")

    # Optional to implement, will be called after call()
    def ensures(self, graph_module: torch.fx.GraphModule) -> None:
        pass


class ReplaceDivPass(PassBase):
    def __init__(self, replace_op):
        self.replace_op = replace_op

    def call(self, graph_module):
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and node.target == exir_ops.edge.aten.div.Tensor:
                node.target = self.replace_op
        return PassResult(graph_module, True)


# ---- models -------------------------------------------------------------------------------


class LinearPlusInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) + x


class CloneThenAdd(torch.nn.Module):
    def forward(self, x, y):
        return torch.sigmoid(x).clone() + y


def _inputs(seed, *shapes, positive=False):
    g = torch.Generator().manual_seed(seed)
    return tuple((torch.rand(s, generator=g) + 0.5) if positive and i else
                 torch.randn(s, generator=g) for i, s in enumerate(shapes))


def _linear_model():
    torch.manual_seed(0)
    return LinearPlusInput().eval()


# name -> (model, inputs, passes): what both compilers run and compare.
CASES = {
    "one_to_many": (_linear_model(), _inputs(1, (3, 4)), lambda: [ReplaceAddWithMulSub()]),
    "one_to_one_and_none": (CloneThenAdd(), _inputs(2, (2, 5), (2, 5)),
                            lambda: [RemoveClonePass(), ReplaceAddWithMul()]),
    "pass_base": (CloneThenAdd(), _inputs(3, (4,), (4,), positive=True),
                  lambda: [ReplaceAddPass(exir_ops.edge.aten.div.Tensor)]),
}
