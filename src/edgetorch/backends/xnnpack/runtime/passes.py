"""XNNPACK's load passes: the backend plan, declared in ``runtime.optimize.PASSES``.

Each node of a delegate's graph is compiled by its rule (``nodes*.py``) into a step that calls
the NumPy kernels: the reference, always there. These passes make the delegate faster on top
of it; each gives the reference's very bits, can be switched off by name like any load pass
(``load_method(name, optimize=...)``, ``EDGETORCH_OPTIMIZE``), and runs under the load's guard
(a failure is reported in the method's ``load_report``, or raised in strict mode).
"""

from __future__ import annotations

from typing import Any

from ....runtime.optimize import PASSES, Pass, default_options
from ....runtime.optimize.pipeline import Options

BACKEND_ID = "XnnpackBackend"


def _declare(name: str, doc: str) -> Pass:
    return PASSES.add(Pass(name, None, backend=BACKEND_ID, doc=doc))


FOLD_CLAMPS = _declare("xnnpack.fold_clamps", "an int8 clamp after a convolution or fully "
                       "connected node clips in that node's requantization")
ARENA = _declare("xnnpack.arena", "float convolution and pooling outputs placed in one arena "
                 "by liveness")
FUSE_CHAINS = _declare("xnnpack.fuse_chains", "RoPE, RMSNorm's tail, the scaled masked softmax "
                       "and the heads' matmuls each one step of a plan")
PLAN = _declare("xnnpack.plan", "one generated function over preallocated buffers per input "
                "shape: for the declared (static) shapes of a graph of at most 1 MB of weights "
                "built at load, otherwise at a shape's second call")


def options_of(context: Any) -> Options:
    """The load's pass options, from the init context (every pass, strict, without one)."""
    opts = getattr(context, "optimize", None) if context is not None else None
    return opts if opts is not None else default_options("XNNPACK delegate")
