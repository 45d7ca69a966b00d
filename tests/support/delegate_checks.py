"""What the tests of a delegate that runs on a PC share: ExecuTorch's exports of the same
models (made by a script in the reference venv, two at a time, once per session), running a
``.pte`` in edgetorch's runtime, eager outputs, and fp16's rounding bound."""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import ref_process
from refenv import _clean_env, ref_python  # tests/compat

FP16_UNIT_ROUNDOFF = 2.0 ** -11


class RefExports:
    """``get(model, *extras)``: the path of the ``.pte`` that ``script export MODEL OUT``
    writes in the reference venv, with each extra passed as the matching flag of ``flags``
    (dicts as JSON; an empty or None extra is left out, so it keys the same export)."""

    def __init__(self, root: Path, script: Path, flags: tuple[str, ...] = ()) -> None:
        self.root, self.script, self.flags = root, script, flags
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.futures: dict[tuple, Future] = {}

    def submit(self, model: str, *extras) -> Future:
        values = [json.dumps(e, sort_keys=True) if isinstance(e, dict) else e
                  for e in (*extras, *[None] * (len(self.flags) - len(extras)))]
        values = [v if v not in ("{}", "") else None for v in values]
        key = (model, *values)
        if key not in self.futures:
            out = self.root / f"{model}-{len(self.futures)}.pte"
            cmd = [str(ref_python()), str(self.script), "export", model, str(out)]
            for flag, value in zip(self.flags, values):
                cmd += [flag, value] if value is not None else []
            self.futures[key] = self.pool.submit(self._run, cmd, out)
        return self.futures[key]

    @staticmethod
    def _run(cmd: list[str], out: Path) -> Path:
        r = ref_process.run(cmd, env=_clean_env(), capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise RuntimeError(f"ExecuTorch's export failed: {' '.join(cmd)}\n"
                               f"{r.stderr[-3000:]}")
        return out

    def get(self, model: str, *extras) -> Path:
        return self.submit(model, *extras).result()


def same_hash_seed_as_reference() -> None:
    """Skip (fail under CI) a byte-for-byte comparison when this process hashes strings with a
    random seed: ExecuTorch's delegation iterates sets of node names, so the .pte's node order
    follows the seed, and the reference's exports run with ``PYTHONHASHSEED=0`` (set by
    tests/conftest.py and the Makefile; a plain ``pytest`` run without xdist lacks it)."""
    import sys

    from refenv import in_ci

    if sys.flags.hash_randomization:
        why = "this process hashes with a random seed: run with PYTHONHASHSEED=0 (make does)"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)


def run(pte: bytes, inputs: tuple) -> tuple[list[np.ndarray], list]:
    """Outputs of ``forward`` in edgetorch's runtime, and the delegates' handles."""
    from edgetorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    outs = method.execute([t.numpy() for t in inputs])
    return list(outs), [h for _, h in method._delegate_handles]


def eager(model, inputs: tuple) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = model(*inputs)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def fp16_tolerance(reference: np.ndarray, rounding_ops: int) -> float:
    """fp16 storage rounds every operator's result (relative error <= 2**-11); through
    ``rounding_ops`` operators whose gains stay near one that bounds the output's error by
    ``rounding_ops * 2**-11 * max|output|``."""
    return rounding_ops * FP16_UNIT_ROUNDOFF * float(np.abs(reference).max())


def params(cases: list, slow: set[str], ids: list[str] | None = None) -> list:
    """``pytest.param`` per case (a model name, or a tuple starting with one); the models in
    ``slow`` are marked slow (they run with ``-m slow``, ``make test-vulkan-coreml-slow``)."""
    out = []
    for k, case in enumerate(cases):
        values = case if isinstance(case, tuple) else (case,)
        out.append(pytest.param(*values, id=ids[k] if ids else None,
                                marks=[pytest.mark.slow] if values[0] in slow else []))
    return out
