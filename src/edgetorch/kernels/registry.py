"""The operator registry: kernels keyed by the operator string a ``.pte`` stores.

A kernel is a plain function registered with ``@kernel("aten::add.out")``. The runtime calls it
with the instruction's arguments in schema order, *without* the trailing return slot that
ExecuTorch's emitter appends to every ``KernelCall``:

* tensors arrive as ``numpy.ndarray`` (planned ones are views into the method's arena),
* ``Int``/``Double``/``Bool``/``String``/``Null`` as ``int``/``float``/``bool``/``str``/``None``,
* ``IntList``/``DoubleList``/``BoolList`` as Python lists, ``TensorList`` as a list of arrays,
  ``OptionalTensorList`` as a list of arrays or ``None``.

A kernel returns its result: the ``out`` array itself when it wrote into it, otherwise a fresh
array that the runtime copies into ``out`` (resizing a dynamic tensor within its planned bound).
Ops with several outputs return a tuple; scalar ops (``executorch_prim::*``) return the scalar.

A kernel may also have a *preparer* (``@prepares("aten::add.out")``): called once at
``load_method`` with the instruction's arguments when every tensor among them keeps its memory
and sizes from call to call (constants, static planned tensors), it returns the zero-argument
callables (typically ``functools.partial`` of NumPy ufuncs with ``out=``) that compute exactly
what the kernel computes, or None to keep the kernel. That moves dtype promotion, shape checks
and view building out of ``execute``; the kernel stays the oracle the preparer is tested against.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from ..errors import OperatorMissingError, RegistrationError, near_matches

KernelFn = Callable[..., object]
# (*arguments, out) at load time -> the steps that run the call, or None to run the kernel.
Preparer = Callable[..., Sequence[Callable[[], object]] | None]


@dataclass(frozen=True)
class KernelEntry:
    name: str
    fn: KernelFn
    num_args: int  # schema arguments, out arguments included; the return slot excluded
    prepare: Preparer | None = None  # load-time specialisation of this very kernel (see above)
    # The preparer takes None for an out argument that nothing reads (see ``prepares``).
    prepare_unread: bool = False

    def __str__(self) -> str:
        return f"{self.name} -> {self.fn.__module__}.{self.fn.__qualname__}"


KERNELS: dict[str, KernelEntry] = {}


class Copy(partial):
    """A prepared step that copies ``source`` into ``target`` (``np.copyto``, the keywords
    given), called as fast as the ``partial`` it is."""

    __slots__ = ()

    def __new__(cls, target: np.ndarray, source: np.ndarray, **keywords: object) -> Copy:
        return super().__new__(cls, np.copyto, target, source, **keywords)

    @property
    def target(self) -> np.ndarray:
        return self.args[0]

    @property
    def source(self) -> np.ndarray:
        return self.args[1]

    @property
    def plain(self) -> bool:
        """A copy of every element as it is (no cast, no mask)."""
        return not self.keywords

# Operators ExecuTorch's emitter calls *without* the return slot: its map/scan loops emit
# ``et_copy_index(copy_to, copy_from, index)``, whose C++ kernel grows ``copy_to`` in place.
# The runtime hands such a kernel its first argument at full planned size and takes the
# kernel's result as that argument's new (resized) value.
NO_RETURN_SLOT = frozenset({"executorch_prim::et_copy_index.tensor"})


def kernel(*names: str) -> Callable[[KernelFn], KernelFn]:
    """Register ``fn`` under each operator string in ``names``.

    Registering a name twice is an error; pass ``override=True`` to :func:`register` to replace
    the portable kernel deliberately (faster kernels keep the portable one as the oracle).
    """

    def deco(fn: KernelFn) -> KernelFn:
        for name in names:
            register(name, fn)
        return fn

    return deco


def register(name: str, fn: KernelFn, *, override: bool = False) -> None:
    if "::" not in name:
        raise RegistrationError(f"operator name {name!r} must be 'namespace::op.overload'")
    if name in KERNELS and not override:
        raise RegistrationError(
            f"operator {name!r} is already registered ({KERNELS[name]}); "
            "pass override=True to replace it on purpose"
        )
    params = inspect.signature(fn).parameters.values()
    num = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    KERNELS[name] = KernelEntry(name, fn, num)


def prepares(*names: str, unread_outputs: bool = False) -> Callable[[Preparer], Preparer]:
    """Attach a load-time preparer to the kernels already registered under ``names``.

    The preparer belongs to that kernel function: a later ``register(..., override=True)``
    drops it with the kernel it was written for. ``unread_outputs=True``: of a kernel with
    several outputs, an out argument that nothing reads (no later instruction, no method
    output, no view of its bytes) comes to the preparer as None, so its steps may skip it
    (``max_pool2d_with_indices``'s indices after a network's first pooling).
    """

    def deco(prep: Preparer) -> Preparer:
        for name in names:
            entry = KERNELS.get(name)
            if entry is None:
                raise RegistrationError(f"cannot attach a preparer to {name!r}: no kernel is "
                                        "registered under that name yet")
            if entry.prepare is not None:
                raise RegistrationError(f"{name!r} already has a preparer "
                                        f"({entry.prepare.__module__}.{entry.prepare.__name__})")
            KERNELS[name] = replace(entry, prepare=prep, prepare_unread=unread_outputs)
        return prep

    return deco


def get_kernel(name: str) -> KernelEntry:
    try:
        return KERNELS[name]
    except KeyError:
        hint = near_matches(name, KERNELS)
        near = f" Similar registered operators: {', '.join(hint)}." if hint else ""
        raise OperatorMissingError(
            f"no kernel is registered for operator {name!r}.{near} "
            "Register one with @edgetorch.kernels.kernel(name), or lower that part of the "
            "model to a backend that supports it."
        ) from None


def operator_names() -> list[str]:
    return sorted(KERNELS)
