"""Every load pass against the kernels: one program loaded with each pass alone and with all of
them, each compared with the program loaded with none (``optimize=False``: every instruction
runs its kernel, the reference). A pass that promises the same bits must give them; one that
declares a tolerance must stay within it (``runtime.optimize.Tolerance``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgetorch.runtime import Runtime
from edgetorch.runtime.optimize import PASSES, Tolerance

# Calls per load: two (the second on the memory the first left behind); three with delegates
# (XNNPACK's plans: the first call of a shape runs the reference, the second builds the plan,
# the third runs it).
CALLS, DELEGATE_CALLS = 2, 3


def selections() -> list[tuple[str, set[str] | bool]]:
    """(label, ``optimize=``) for each pass alone, then all of them."""
    return [(p.name, {p.name}) for p in PASSES] + [("all", True)]


def _tolerance(selected: set[str] | bool) -> Tolerance | None:
    """The loosest tolerance among the selected passes (None: all promise the same bits)."""
    names = set(PASSES.names()) if selected is True else set(selected)
    tols = [p.tolerance for p in PASSES if p.name in names and p.tolerance is not None]
    if not tols:
        return None
    return Tolerance(max(t.rtol for t in tols), max(t.atol for t in tols), "combined")


def _outputs(method, inputs) -> list[np.ndarray]:
    return [np.array(o, copy=True) for o in method.execute(list(inputs))]


def assert_passes_match_the_kernels(pte: bytes | Path, inputs, name: str,
                                    method: str = "forward") -> dict[str, int]:
    """Load ``pte`` once per selection, run it on ``inputs``, compare with the reference;
    returns how many instructions (or nodes) each pass replaced, by pass name. A pass that
    replaced nothing leaves the kernels' closures to run: that load is not run again."""
    program = Runtime.get().load_program(pte)
    reference = _outputs(program.load_method(method, optimize=False), inputs)
    delegates = any(p.delegates for p in program.program.execution_plan)
    changed: dict[str, int] = {}
    for label, selected in selections():
        m = program.load_method(method, optimize=selected)
        assert not m.load_report.failed, f"{name} [{label}]: {m.load_report}"
        if label != "all":
            changed[label] = sum(r.changed for r in m.load_report.results if r.name == label)
            if not changed[label]:
                continue
        tol = _tolerance(selected)
        for call in range(DELEGATE_CALLS if delegates else CALLS):
            got = _outputs(m, inputs)
            assert len(got) == len(reference)
            for k, (g, want) in enumerate(zip(got, reference)):
                where = f"{name} [{label}] call {call} output {k}"
                assert g.shape == want.shape and g.dtype == want.dtype, where
                if tol is None or want.dtype.kind not in "fc":
                    assert g.tobytes() == want.tobytes(), f"{where}: not the kernels' bits"
                else:
                    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
                    np.testing.assert_allclose(g, want, rtol=tol.rtol, atol=tol.atol * scale,
                                               err_msg=where)
    return changed
