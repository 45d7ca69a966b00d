"""``XNNPACKPass``: an ``ExportPass`` that also sees the whole ExportedProgram (its weights and
signature), as ExecuTorch's XNNPACK passes do."""

from __future__ import annotations

from torch.export import ExportedProgram

from ....exir.pass_base import ExportPass


class XNNPACKPass(ExportPass):
    def __init__(self, exported_program: ExportedProgram) -> None:
        super().__init__()
        self._exported_program = exported_program

    @property
    def exported_program(self) -> ExportedProgram:
        return self._exported_program
