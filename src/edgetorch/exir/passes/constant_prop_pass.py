"""``constant_prop_pass`` (ExecuTorch's ``exir.passes.constant_prop_pass``): every operator
whose inputs are all weights or constants is computed now and becomes a lifted constant
``_prop_tensor_constant<N>`` (N counts every fold, intermediate ones included, so the
numbers may differ from ExecuTorch's), whatever its size (``to_executorch``'s own folding only takes
folds that do not grow the file); constants nothing reads any more are dropped."""

from __future__ import annotations

from torch.export import ExportedProgram

from .constant_fold import fold_constants


def constant_prop_pass(exported_program: ExportedProgram,
                       custom_skip_targets: set | None = None,
                       _skip_dim_order: bool = True) -> ExportedProgram:
    """Fold ``exported_program`` in place and return it; ``custom_skip_targets``: operators
    to leave as they are."""
    fold_constants(exported_program, grow=True, skip=frozenset(custom_skip_targets or ()),
                   name_of=lambda i: f"_prop_tensor_constant{i}")
    return exported_program
