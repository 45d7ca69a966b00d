"""Progress bars (tqdm) for edgetorch's long jobs: export, lowering, calibration, Vela,
``export_llm``, ``aot_arm_compiler``.

Bars go to stderr and show only when stderr is a terminal, so logs and pipes stay clean.
``EDGETORCH_PROGRESS=1`` forces them on, ``EDGETORCH_PROGRESS=0`` off. Without tqdm installed
(it comes with ``edgetorch[compiler]``) nothing is drawn.

Two shapes: :func:`bar` counts the items of a loop (calibration samples, partitions, layers);
:func:`steps` names the stages of a job, and its clock keeps moving during a long stage.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

ENV = "EDGETORCH_PROGRESS"
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")
TICK_SECONDS = 1.0  # how often a stage's clock is redrawn


def enabled(stream: Any = None) -> bool:
    """Whether bars are drawn: ``$EDGETORCH_PROGRESS`` if set, else whether stderr is a
    terminal."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced in _ON or forced in _OFF:
        return forced in _ON and _tqdm() is not None
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and _tqdm() is not None


def _tqdm():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def bar(iterable: Iterable | None = None, *, desc: str, total: int | None = None,
        unit: str = "it", leave: bool = False):
    """``tqdm(iterable, ...)`` when bars are on; otherwise the iterable itself (or, without
    one, an object whose ``update``/``close`` do nothing)."""
    if not enabled():
        return iterable if iterable is not None else _NoBar()
    return _tqdm()(iterable, desc=desc, total=total, unit=unit, leave=leave, file=sys.stderr,
                   dynamic_ncols=True)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_description_str(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class Steps:
    """The stages of one job: ``next(name)`` finishes the current stage and starts ``name``."""

    def __init__(self, desc: str, names: Sequence[str]) -> None:
        self.desc, self.names, self.done = desc, list(names), -1
        self._bar: Any = None
        self._stop = threading.Event()
        if enabled():
            self._bar = _tqdm()(total=len(self.names), desc=desc, file=sys.stderr, leave=False,
                                dynamic_ncols=True,
                                bar_format="{desc} {n_fmt}/{total_fmt} [{elapsed}]")
            threading.Thread(target=self._tick, daemon=True).start()

    def next(self, name: str | None = None) -> None:
        self.done += 1
        name = name or (self.names[self.done] if self.done < len(self.names) else "")
        if self._bar is not None:
            if self.done:
                self._bar.update(1)
            self._bar.set_description_str(f"{self.desc}: {name}")

    def _tick(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self._bar.refresh()

    def close(self) -> None:
        self._stop.set()
        if self._bar is not None:
            self._bar.close()


@contextlib.contextmanager
def steps(desc: str, names: Sequence[str]) -> Iterator[Steps]:
    """A bar over the named stages of a job (cleared when the job ends). What the job prints
    meanwhile goes above the bar (tqdm.write), not into its line."""
    s = Steps(desc, names)
    try:
        if s._bar is None:
            yield s
        else:
            from tqdm.contrib import DummyTqdmFile

            with contextlib.redirect_stdout(DummyTqdmFile(sys.stdout)):
                yield s
    finally:
        s.close()
