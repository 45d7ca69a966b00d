"""The load passes: what ``load_method`` does to a method beyond running its kernels.

The kernels are the reference: with ``load_method(name, optimize=False)`` every instruction
runs its kernel through the record's closure, and that is what every pass is compared against
(the test suite runs that way by default). The passes below then replace instructions' steps
for the plain loop (``instructions.run_steps``), in this order, each declaring whether it gives
the kernels' very bits or results within a stated tolerance (``str(PASSES)`` lists them)::

    fold_batch_norm       convolution + BatchNorm (+ relu/hardtanh) -> one folded convolution
    fuse_conv_activation  convolution + relu/hardtanh -> the clamp in the convolution's epilogue
    fuse_safe_softmax     an attention's six-instruction safe-softmax tail -> one pass
    fold_constants        instructions on constants run once, at load
    prepare_kernels       kernels on fixed tensors -> their preparer's NumPy calls
    skip_unread_outputs   preparers skip outputs nothing reads
    forward_copies        a copy's source written straight into the copy's target
    drop_unread_copies    copies of folded results nothing reads are dropped
    touch_planned_memory  each page of the planned memory written once (not by the first call)

A backend declares the passes its ``init`` runs the same way (``PASSES.add(Pass(...,
backend=...))``; XNNPACK's plan, fusions, clamp folding and arena) and runs them through
``context.optimize.guard``. One switch for all of them: ``load_method(name, optimize=True |
False | {names})``, or the ``EDGETORCH_OPTIMIZE`` environment variable (``1``/``all``,
``0``/``off``, or comma-separated names; read at each load). What ran and what failed is in
``method.load_report``; ``EDGETORCH_OPTIMIZE_STRICT=1`` turns a failing pass into an error.
Traced runs (an event tracer) and methods with jumps always run the records' closures.
"""

from __future__ import annotations

from .batch_norm import fold_batch_norm, fuse_conv_activation
from .constants import drop_unread_copies, fold_constants
from .dataflow import Dataflow
from .forward_copies import forward_copies
from .pipeline import (
    ENV_VAR,
    FLOAT_ROUNDING,
    STRICT_ENV_VAR,
    LoadReport,
    Options,
    Pass,
    PassList,
    PassResult,
    Tolerance,
    default_options,
    describe,
    options,
)
from .prepare import prepare_kernels, skip_unread_outputs
from .safe_softmax import fuse_safe_softmax
from .steps import Step, StepPlan
from .touch_memory import touch_planned_memory


def _pass(run, tolerance: Tolerance | None = None) -> Pass:
    return Pass(run.__name__, run, tolerance, doc=describe(run))


PASSES = PassList([
    _pass(fold_batch_norm, FLOAT_ROUNDING),
    _pass(fuse_conv_activation, FLOAT_ROUNDING),
    _pass(fuse_safe_softmax),
    _pass(fold_constants, Tolerance(
        1e-5, 1e-5, "a large folded copy of a transposed weight is read in place by its "
        "readers' matrix products, which may sum in another order (float32 rounding)")),
    _pass(prepare_kernels),
    _pass(skip_unread_outputs),
    _pass(forward_copies),
    _pass(drop_unread_copies),
    _pass(touch_planned_memory),
])


def run_passes(flow: Dataflow, opts: Options) -> tuple[list[Step], list[int]] | None:
    """The plain loop's (steps, instruction of each step) after the enabled method passes,
    or None when none is enabled (the records' closures run)."""
    report = opts.report
    report.forget(p.name for p in PASSES if p.backend is None)  # (run again after a warm-up)
    plan = StepPlan(flow, opts)
    ran = False
    for p in PASSES:
        if p.backend is not None:
            continue
        if p.name not in opts:
            report.add(PassResult(p.name, "off"))
            continue
        before = plan.snapshot()
        plan.current = p
        if opts.guard(p, p.run, flow, plan, fallback=False) is False:
            plan.restore(before)
        else:
            report.add(PassResult(p.name, "ran", plan.changed_since(before)))
        ran = True
    plan.current = None
    return plan.flat() if ran else None


__all__ = ["ENV_VAR", "FLOAT_ROUNDING", "PASSES", "STRICT_ENV_VAR", "Dataflow", "LoadReport",
           "Options", "Pass", "PassResult", "StepPlan", "Tolerance", "default_options", "options",
           "run_passes"]
