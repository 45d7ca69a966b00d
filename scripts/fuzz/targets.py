"""What the fuzzers run on one input, and what counts as a finding (shared by the atheris
harnesses ``fuzz_*.py``, ``replay.py`` and the corpus replay test
``tests/reliability/test_fuzz_corpus.py``).

A target takes the bytes of one file and drives edgetorch the way a user would: for a
``.pte``, ``load_program`` + ``load_method`` + one ``execute`` of each method; for a ``.ptd``,
a fixed program that reads its weights from the fuzzed data file; for an XNNPACK blob, the
backend's ``init`` (with the named data of the seed programs) and one ``execute``; for a
``.bpte``, ``load_bundled_program`` and the verification of each bundled test case; for an
ETDump, the Inspector with and without the seed's debug buffer; for an ETRecord,
``parse_etrecord`` and an Inspector joining it with a seed ETDump; for a GGUF file, its
tokenizer converted to tokenizer.json, loaded, and used, and its chat template rendered; for a
chat template, compiling and rendering it (with small limits, so that a hostile template stops
in well under a second).

Success is an ``edgetorch.errors.EdgeTorchError`` or no error at all. Anything else escaping is
a finding; so is a typed error that wraps a ``MemoryError`` or ``RecursionError`` (an
allocation or a recursion the file controls), except ``MemoryAllocationError``: the runtime
saying that a planned buffer (bounded, and checked before use) could not be allocated.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgetorch.errors import EdgeTorchError, MemoryAllocationError, OptimizationError
from edgetorch.runtime import Runtime
from edgetorch.runtime.data_map import DataMap
from edgetorch.runtime.program import Program
from edgetorch.schema.ptd import PtdFile

REPO = Path(__file__).resolve().parents[2]
FUZZ_DIR = REPO / "tests" / "fixtures" / "fuzz"
MAX_METHODS = 4  # methods executed per program
MAX_INPUT_BYTES = 16 << 20  # the harness does not build bigger inputs than this
FATAL_CAUSES = (MemoryError, RecursionError)


class Finding(Exception):
    """An input made the runtime fail in a way it must not (the message says how)."""


def check(exc: BaseException) -> None:
    """Raise ``Finding`` unless ``exc`` is an acceptable (typed, bounded) error."""
    if not isinstance(exc, EdgeTorchError):
        raise Finding(f"untyped {type(exc).__name__} escaped: {exc}") from exc
    if isinstance(exc, MemoryAllocationError):
        return  # the runtime's own report that a planned allocation failed: by design
    if isinstance(exc, OptimizationError):  # (the harness runs the load passes strict)
        raise Finding(f"a load pass failed on the file instead of declining it: {exc}") from exc
    cause, seen = exc.__cause__, {id(exc)}
    while cause is not None:
        if id(cause) in seen:
            raise Finding(f"{type(exc).__name__}'s chain of causes is a cycle: {exc}")
        seen.add(id(cause))
        if isinstance(cause, FATAL_CAUSES):
            raise Finding(f"{type(exc).__name__} wraps {type(cause).__name__}: {exc}") from exc
        cause = cause.__cause__


# Set by replay.py for seed files: a seed is a valid file, so any error at all is a finding
# (this is what keeps the seeds exercising the whole path rather than its first check). Not for
# the .ptd target, whose seeds include ExecuTorch's, written for another program.
STRICT = False
SEEDS_RUN_CLEAN = frozenset({"pte", "xnnpack", "bpte", "etdump", "etrecord", "gguf",
                             "chat_template"})


def _guarded(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # classified, re-raised as a Finding when it is one
        if STRICT:
            raise Finding(f"a seed failed: {type(e).__name__}: {e}") from e
        check(e)
        return None


# ---- inputs ----------------------------------------------------------------------------


def _inputs_for(method: Any) -> list[Any] | None:
    """Inputs of the declared types and sizes (None when they would be too big to build)."""
    from edgetorch.runtime.meta import TensorInfo
    from edgetorch.schema.scalar_type import to_numpy_dtype

    meta = method.metadata
    out: list[Any] = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        if isinstance(info, TensorInfo):
            try:
                dtype = np.dtype(to_numpy_dtype(info.dtype()))
            except Exception:  # a dtype NumPy has no type for: the harness cannot build it
                return None
            sizes = info.sizes()
            if any(s < 0 for s in sizes) or float(np.prod(sizes, dtype=np.float64)) * dtype.itemsize > MAX_INPUT_BYTES:
                return None
            n = int(np.prod(sizes, dtype=np.int64))
            out.append((np.arange(n) % 7).astype(dtype).reshape(sizes))
        else:
            out.append({"Int": 1, "Double": 1.0, "Bool": True}.get(info.kind))
    return out


def _run_methods(program: Program) -> int:
    """Load and execute up to MAX_METHODS methods; returns how many executed cleanly."""
    ran = 0
    for name in sorted(program.method_names)[:MAX_METHODS]:
        method = _guarded(lambda n=name: program.load_method(n))
        if method is None:
            continue
        inputs = _guarded(lambda m=method: _inputs_for(m))
        if inputs is None:
            continue
        if _guarded(lambda m=method, x=inputs: m.execute(x)) is not None:
            ran += 1
    return ran


# ---- targets ---------------------------------------------------------------------------


def run_pte(data: bytes) -> None:
    """One ``.pte``: load it, then load and execute its methods."""
    program = _guarded(lambda: Runtime.get().load_program(data))
    if program is not None:
        _run_methods(program)


class _PtdTarget:
    """A fixed program whose constants live in a ``.ptd``; the fuzzed bytes are that file
    (parsed as ``load_data_map`` parses a file, without the round trip through the disk)."""

    def __init__(self) -> None:
        self.pte = (FUZZ_DIR / "ptd_program.pte").read_bytes()

    def __call__(self, data: bytes) -> None:
        data_map = _guarded(lambda: DataMap([("<fuzzed .ptd>", PtdFile.parse(data))]))
        if data_map is None:
            return
        program = _guarded(lambda: Runtime.get().load_program(self.pte))
        if program is None:
            raise Finding("the fixed .ptd program itself failed to load")
        program._data_map = data_map  # what load_program(data_path=...) does
        _run_methods(program)


class _XnnpackTarget:
    """An XNNPACK blob through ``XnnpackBackend.init`` (with the named data of the seed
    programs, where ExecuTorch 1.5 keeps the weights) and one ``execute``."""

    def __init__(self) -> None:
        from edgetorch.backends.xnnpack.runtime import XnnpackBackend

        self.backend = XnnpackBackend()
        self.named: dict[str, bytes] = {}
        for pte in sorted((FUZZ_DIR / "xnnpack_context").glob("*.pte")):
            program = Runtime.get().load_program(pte.read_bytes())
            for key in program._pte.named_data_keys():
                self.named[key] = bytes(program.named_data(key))

    def _named_data(self, key: str) -> bytes:
        from edgetorch.errors import ExternalDataError

        try:
            return self.named[key]
        except KeyError:
            raise ExternalDataError(f"no named data {key!r}") from None

    def __call__(self, data: bytes) -> None:
        from types import SimpleNamespace

        context = SimpleNamespace(named_data=self._named_data)
        handle = _guarded(lambda: self.backend.init(data, {}, context))
        if handle is None:
            return
        values = self._arguments(data, handle)
        if values is not None:
            args = list(range(len(values)))
            _guarded(lambda: self.backend.execute(handle, values, args, None))
        self.backend.destroy(handle)

    @staticmethod
    def _arguments(blob: bytes, handle: Any) -> list[Any] | None:
        """The delegate call's values, indexed by external id, at the sizes the graph declares
        (None when the harness would build something too big)."""
        from edgetorch.backends.xnnpack.runtime import backend as xr
        from edgetorch.backends.xnnpack.serialization import deserialize_xnnpack_binary

        values: list[Any] = [None] * handle.num_args
        for value in deserialize_xnnpack_binary(blob).graph.xvalues:  # init parsed it already
            t = value.tensor
            dtype = xr._DTYPES.get(t.datatype)
            if not t.flags or dtype is None or t.external_id >= len(values):
                continue
            shape = tuple(int(d) for d in t.dims)
            if float(np.prod(shape, dtype=np.float64)) * dtype.itemsize > MAX_INPUT_BYTES:
                return None
            values[t.external_id] = (np.arange(int(np.prod(shape, dtype=np.int64))) % 5).astype(
                dtype).reshape(shape)
        return values


MAX_CASES = 4  # bundled test cases verified per method


def run_bpte(data: bytes) -> None:
    """A ``.bpte``: load it, then verify (load inputs, execute, compare) each test case."""
    from edgetorch.runtime.bundled import load_bundled_program

    bundled = _guarded(lambda: load_bundled_program(data))
    if bundled is None:
        return
    for name in bundled.method_names[:MAX_METHODS]:
        count = _guarded(lambda n=name: bundled.num_test_cases(n)) or 0
        for idx in range(min(count, MAX_CASES)):
            _guarded(lambda n=name, i=idx: bundled.verify_result_with_bundled_expected_output(n, i))


def _inspect(inspector: Any) -> None:
    """What a user reads from an Inspector: each event's statistics and values."""
    for block in inspector.event_blocks:
        for event in block.events:
            if event.perf_data is not None and event.perf_data.raw:
                event.perf_data.p50, event.perf_data.max  # noqa: B018
            for value in event.debug_data:
                repr(value)


class _EtdumpTarget:
    """The Inspector on the fuzzed ETDump, without and with the seed run's debug buffer."""

    def __init__(self) -> None:
        from edgetorch.devtools.inspector import Inspector

        self.inspector = Inspector
        self.buffer = str(FUZZ_DIR / "etdump_debug_buffer.bin")

    def __call__(self, data: bytes) -> None:
        for buffer in (None, self.buffer):
            inspector = _guarded(lambda b=buffer: self.inspector(etdump_data=data,
                                                                  debug_buffer_path=b))
            if inspector is not None:
                _guarded(lambda i=inspector: _inspect(i))


class _EtrecordTarget:
    """``parse_etrecord`` on the fuzzed zip, then an Inspector joining it with a seed ETDump
    (the maps it reads come from the file)."""

    def __init__(self) -> None:
        from edgetorch.devtools.etrecord import parse_etrecord
        from edgetorch.devtools.inspector import Inspector

        self.parse, self.inspector = parse_etrecord, Inspector
        self.etdump = (FUZZ_DIR / "etdump" / "seed-simple_model-profile.etdp").read_bytes()

    def __call__(self, data: bytes) -> None:
        import io

        record = _guarded(lambda: self.parse(io.BytesIO(data)))
        if record is not None:
            _guarded(lambda: _inspect(self.inspector(etdump_data=self.etdump, etrecord=record)))


# Small limits: a hostile template stops within a fraction of a second (the defaults, 10 s and
# a million steps, are tested in tests/extension/llm/test_chat_template_sandbox.py).
_FUZZ_TEMPLATE_LIMITS = dict(max_steps=20_000, max_value_chars=200_000, max_output_chars=200_000,
                             max_built_chars=2_000_000, max_seconds=2.0)
_MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
             {"role": "assistant", "content": "4"}, {"role": "user", "content": "héllo 😀"}]
_TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def _render(source: str, name: str) -> None:
    from edgetorch.extension.llm.tokenizers.chat_template import ChatTemplate, TemplateLimits

    template = _guarded(lambda: ChatTemplate(source, name,
                                             TemplateLimits(**_FUZZ_TEMPLATE_LIMITS)))
    if template is not None:
        for tools in (None, _TOOLS):
            _guarded(lambda t=tools: template.render(
                messages=_MESSAGES, tools=t, add_generation_prompt=True,
                bos_token="<s>", eos_token="</s>", date_string="26 Jul 2024"))


class _ChatTemplateTarget:
    def __init__(self) -> None:
        import edgetorch.extension.llm.tokenizers.chat_template  # noqa: F401  (instrumented)

    def __call__(self, data: bytes) -> None:
        _render(data.decode("utf-8", "replace"), "the fuzzed chat template")


class _GgufTarget:
    """A GGUF tokenizer: tokenizer.json + config written by ``gguf_to_tokenizer_json``, loaded
    with ``load_tokenizer``, one encode / decode, and the file's chat template rendered."""

    def __init__(self) -> None:
        import tempfile

        from edgetorch.extension.llm import tokenizers

        self.tokenizers = tokenizers
        self.out = tempfile.mkdtemp(prefix="edgetorch-fuzz-gguf-")

    def __call__(self, data: bytes) -> None:
        path = _guarded(lambda: self.tokenizers.gguf_to_tokenizer_json(data, self.out))
        if path is None:
            return
        tok = _guarded(lambda: self.tokenizers.load_tokenizer(path))
        if tok is None:
            return
        ids = _guarded(lambda: tok.encode("Hello wörld 😀 <|im_end|>", bos=0))
        if ids is not None:
            _guarded(lambda: tok.decode(ids))
        if tok.chat_template:
            _render(tok.chat_template, "the fuzzed GGUF's chat template")


TARGETS: dict[str, Callable[[], Callable[[bytes], None]]] = {
    "pte": lambda: run_pte,
    "ptd": _PtdTarget,
    "xnnpack": _XnnpackTarget,
    "bpte": lambda: run_bpte,
    "etdump": _EtdumpTarget,
    "etrecord": _EtrecordTarget,
    "gguf": _GgufTarget,
    "chat_template": _ChatTemplateTarget,
}


def mutate_zip_entry(data: bytes, max_size: int, seed: int) -> bytes:
    """libFuzzer custom mutator for zips (ETRecords): mutate one entry's bytes (or its name,
    or drop / repeat an entry) and zip again with valid CRCs, so the mutations reach the
    readers behind the zip instead of stopping at its checksum. Anything that is not a zip is
    mutated as plain bytes."""
    import io
    import random
    import zipfile

    import atheris

    rng = random.Random(seed)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            entries = [[info.filename, z.read(info)] for info in z.infolist()]
    except Exception:  # not a zip (any more): plain byte mutations
        return atheris.Mutate(data, max_size)
    if not entries or rng.random() < 0.05:
        return atheris.Mutate(data, max_size)
    k = rng.randrange(len(entries))
    roll = rng.random()
    if roll < 0.85:
        blob = entries[k][1]
        entries[k][1] = atheris.Mutate(blob, max(2 * len(blob), 256))
    elif roll < 0.92:
        entries[k][0] = atheris.Mutate(entries[k][0].encode(), 128).decode("utf-8", "replace")
    elif roll < 0.96:
        del entries[k]
    else:
        entries.append(list(entries[k]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, blob in entries:
            # (ZipInfo drops leading slashes and drive letters: "/" would become "", which
            # writestr cannot take)
            z.writestr(zipfile.ZipInfo(name).filename or "_", blob)
    data = out.getvalue()
    return data if len(data) <= max_size else atheris.Mutate(data[:max_size], max_size)


# Structure-aware mutation where plain byte flips would stop at a checksum.
MUTATORS: dict[str, Callable[[bytes, int, int], bytes]] = {"etrecord": mutate_zip_entry}
# What atheris instruments for coverage, per target (edgetorch always): a template's paths
# run through jinja2's parser and compiler, a GGUF's through its chat template's.
INSTRUMENT: dict[str, list[str]] = {"chat_template": ["jinja2"], "gguf": ["jinja2"]}


def corpus_files(target: str) -> list[Path]:
    """The checked-in corpus of ``target`` plus its regression inputs."""
    files = sorted((FUZZ_DIR / target).glob("*"))
    files += sorted((FUZZ_DIR / "regressions" / target).glob("*"))
    return [f for f in files if f.is_file() and f.name != "README.md" and not f.name.startswith(".")]
