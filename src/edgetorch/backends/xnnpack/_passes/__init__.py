"""Graph passes for XNNPACK lowering (ExecuTorch's ``backends/xnnpack/_passes``) and
``XNNPACKPassManager``, which runs a list of them on an ExportedProgram.

ExecuTorch runs seventeen graph passes before its XNNPACK preprocess (linear and SDPA
recognition, batch-norm fusion, activation fusion, channels-last tagging ...). edgetorch does
that work inside its preprocess, while building the XNNPACK graph (``preprocess_*.py``), so
the default list here holds only the passes that are graph rewrites in edgetorch too.
"""

from __future__ import annotations

from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassBase

from ....errors import PassError
from ....exir.program._program import _transform
from .fuse_batch_norm import FuseBatchNormPass
from .remove_noop_expand_copy_pass import RemoveNoopExpandCopyPass
from .xnnpack_pass import XNNPACKPass

DEFAULT_PASSES: list[type] = [RemoveNoopExpandCopyPass]


class XNNPACKPassManager:
    """Run pass *classes* on ``exported_program`` in order (all of ``DEFAULT_PASSES`` when
    ``passes`` is empty); an ``XNNPACKPass`` is made with the program, any other pass with no
    arguments. ``transform()`` returns the transformed program."""

    def __init__(self, exported_program: ExportedProgram, passes: list[type] | None = None):
        self._exported_program = exported_program
        self.passes = list(passes) if passes else list(DEFAULT_PASSES)

    @property
    def exported_program(self) -> ExportedProgram:
        return self._exported_program

    def transform(self) -> ExportedProgram:
        ep = self.exported_program
        for pass_ in self.passes:
            if isinstance(pass_, type) and issubclass(pass_, XNNPACKPass):
                instance = pass_(ep)
            elif isinstance(pass_, type) and issubclass(pass_, PassBase):
                instance = pass_()
            else:
                raise PassError(f"XNNPACKPassManager takes pass classes (ExportPass or "
                                f"XNNPACKPass subclasses), got {pass_!r}")
            ep = _transform(ep, instance)
        return ep


__all__ = ["DEFAULT_PASSES", "FuseBatchNormPass", "RemoveNoopExpandCopyPass", "XNNPACKPass",
           "XNNPACKPassManager"]
