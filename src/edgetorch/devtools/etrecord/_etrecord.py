"""ETRecord: what the compiler knew, saved next to a ``.pte`` so the Inspector can join runtime
events to the user's graph. A plain zip with ExecuTorch 1.5.1's entries (``ETRECORD_V0``, the
programs as export-serde blobs, JSON maps, tensors saved with ``torch.save``), so ExecuTorch's
``parse_etrecord`` reads ours and ours reads theirs.

Maps keep the keys they were given (a recorded program's are ints, a parsed file's are
strings, as in ExecuTorch); the Inspector reads both forms (``_graph.py`` normalises them).
"""

from __future__ import annotations

import copy
import io
import json
import os
import zipfile
from enum import Enum
from typing import IO, Any

import torch
from torch.export import ExportedProgram

from ...errors import EdgeTorchError, ETRecordError
from ...util.torch_files import load_tensors
from . import _serde

IDENTIFIER = "ETRECORD_V0"
EXPORTED_PROGRAM = "exported_program"
EDGE_PROGRAM = "edge_dialect_exported_program"
DEBUG_HANDLE_MAP = "debug_handle_map"
DELEGATE_MAP = "delegate_map"
NUM_OUTS_MAP = "instruction_id_to_num_outs_map"
REFERENCE_OUTPUTS = "reference_outputs"
REPRESENTATIVE_INPUTS = "representative_inputs"
EXPORT_GRAPH_ID = "export_graph_id"
_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")


class ETRecordReservedFileNames(str, Enum):
    """The zip entry names a caller's ``extra_recorded_export_modules`` may not take."""

    ETRECORD_IDENTIFIER = IDENTIFIER
    EXPORTED_PROGRAM = EXPORTED_PROGRAM
    EXPORT_GRAPH_ID = EXPORT_GRAPH_ID
    EDGE_DIALECT_EXPORTED_PROGRAM = EDGE_PROGRAM
    ET_DIALECT_GRAPH_MODULE = "et_dialect_graph_module"
    DEBUG_HANDLE_MAP_NAME = DEBUG_HANDLE_MAP
    DELEGATE_MAP_NAME = DELEGATE_MAP
    INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME = NUM_OUTS_MAP
    REFERENCE_OUTPUTS = REFERENCE_OUTPUTS
    REPRESENTATIVE_INPUTS = REPRESENTATIVE_INPUTS

    def __str__(self) -> str:  # the entry name itself, as a StrEnum prints
        return self.value


def _get_reference_outputs(bundled_program: Any) -> dict[str, list]:
    """``{method: [expected outputs of each test case]}`` from a ``BundledProgram``; a case
    without expected outputs is a ``ValueError`` (the Inspector could not compare it)."""
    out: dict[str, list] = {}
    for suite in bundled_program.method_test_suites:
        out[suite.method_name] = []
        for case in suite.test_cases:
            if not case.expected_outputs:
                raise ValueError("Missing at least one set of expected outputs for method "
                                 f"{suite.method_name}.")
            out[suite.method_name].append(case.expected_outputs)
    return out


def _get_representative_inputs(bundled_program: Any) -> list | None:
    """The inputs of ``forward``'s first test case, or ``None`` without a ``forward`` suite."""
    for suite in bundled_program.method_test_suites:
        if suite.method_name == "forward":
            if not suite.test_cases:
                raise ValueError("The 'forward' method is defined, but no corresponding input "
                                 "test cases are provided.")
            return suite.test_cases[0].inputs
    return None


class ETRecord:
    """ExecuTorch's ``ETRecord`` fields; maps have string keys (see the module docstring)."""

    def __init__(self, exported_program: ExportedProgram | None = None,
                 export_graph_id: int | None = None,
                 edge_dialect_program: ExportedProgram | dict[str, ExportedProgram] | None = None,
                 graph_map: dict[str, ExportedProgram] | None = None,
                 _debug_handle_map: dict | None = None, _delegate_map: dict | None = None,
                 _instruction_id_to_num_outs_map: dict | None = None,
                 _reference_outputs: dict[str, list] | None = None,
                 _representative_inputs: list | None = None) -> None:
        self.exported_program = exported_program
        self.export_graph_id = export_graph_id
        self.edge_dialect_program = edge_dialect_program
        self.graph_map = graph_map
        self._debug_handle_map = _debug_handle_map
        self._delegate_map = _delegate_map
        self._instruction_id_to_num_outs_map = _instruction_id_to_num_outs_map
        self._reference_outputs = _reference_outputs
        self._representative_inputs = _representative_inputs

    def copy(self) -> ETRecord:
        """The edge-stage part only (what ``to_executorch`` starts from)."""
        return ETRecord(self.exported_program, self.export_graph_id, self.edge_dialect_program,
                        self.graph_map)

    def add_exported_program(self, exported_program: Any) -> None:
        """Record the ATen program (``torch.export``'s, or ``{method: program}`` whose
        ``forward`` is kept); ``None`` records nothing. A second one is a ``RuntimeError``."""
        if self.exported_program is not None or self.export_graph_id is not None:
            raise RuntimeError("Exported program already exists in the ETRecord. Cannot add "
                               "exported program when it already exists.")
        if isinstance(exported_program, dict):
            exported_program = exported_program.get("forward")
        if isinstance(exported_program, ExportedProgram):
            self.exported_program = exported_program
            self.export_graph_id = id(exported_program.graph)

    def add_edge_dialect_program(self, edge_dialect_program: Any) -> None:
        """Record the Edge program(s) of an ``EdgeProgramManager``: the program itself for one
        method, ``{method: program}`` for several. A second one is a ``RuntimeError``."""
        if self.edge_dialect_program is not None:
            raise RuntimeError("Edge dialect program already exists in the ETRecord. Cannot "
                               "add edge dialect program when it already exists.")
        if isinstance(edge_dialect_program, ExportedProgram) or \
                not hasattr(edge_dialect_program, "methods"):
            raise RuntimeError("Unsupported type of edge_dialect_program passed in "
                               f"{type(edge_dialect_program)}.")
        methods = list(edge_dialect_program.methods)
        programs = {m: edge_dialect_program.exported_program(m) for m in methods}
        self.edge_dialect_program = programs[methods[0]] if len(methods) == 1 else programs

    def add_extra_export_modules(self, extra_recorded_export_modules: dict[str, Any]) -> None:
        """Add ``{name: program}`` to ``graph_map`` (``name/method`` per method); a name that
        contains one of :class:`ETRecordReservedFileNames` or an object that is not a program
        is a ``RuntimeError``."""
        if self.graph_map is None:
            self.graph_map = {}
        for name, module in extra_recorded_export_modules.items():
            if any(reserved.value in name for reserved in ETRecordReservedFileNames):
                raise RuntimeError(f"The name {name} provided in the "
                                   "extra_recorded_export_modules dict is a reserved name in "
                                   "the ETRecord namespace.")
            self.graph_map.update(_graph_map_entries(name, module))

    def add_executorch_program(self, et_program: Any) -> None:
        """Record the emitted program's maps (an ``ExecutorchProgramManager``, or a
        ``BundledProgram`` wrapping one, whose cases also give the representative inputs and
        reference outputs). Recording over existing data is a ``RuntimeError``."""
        if any(v is not None for v in (
                self._debug_handle_map, self._delegate_map,
                self._instruction_id_to_num_outs_map, self._reference_outputs,
                self._representative_inputs)):
            raise RuntimeError("Executorch program data already exists in the ETRecord. Cannot "
                               "add executorch program data when it already exists.")
        bundled = getattr(et_program, "method_test_suites", None) is not None
        manager = et_program.executorch_program if bundled else et_program
        self._debug_handle_map = manager.debug_handle_map
        self._delegate_map = manager.delegate_map
        self._instruction_id_to_num_outs_map = manager.instruction_id_to_num_outs_map
        if bundled:
            self._reference_outputs = _get_reference_outputs(et_program)
            self._representative_inputs = _get_representative_inputs(et_program)

    def update_representative_inputs(self, representative_inputs: Any) -> None:
        """Inputs for ``calculate_numeric_gap``: a list of tensors (one run), or a
        ``BundledProgram`` whose ``forward`` cases are used."""
        if getattr(representative_inputs, "method_test_suites", None) is not None:
            representative_inputs = _get_representative_inputs(representative_inputs)
        self._representative_inputs = representative_inputs

    def update_reference_outputs(self, reference_outputs: Any) -> None:
        """A list (``forward``'s outputs), ``{method: [outputs, ...]}`` or a BundledProgram."""
        if getattr(reference_outputs, "method_test_suites", None) is not None:
            reference_outputs = _get_reference_outputs(reference_outputs)
        elif isinstance(reference_outputs, list):
            reference_outputs = {"forward": reference_outputs}
        self._reference_outputs = reference_outputs

    def save(self, path: str | os.PathLike | IO[bytes]) -> None:
        """Write the zip (ExecuTorch's entries and order)."""
        if not (self.edge_dialect_program and self._debug_handle_map):
            raise RuntimeError("ETRecord must contain edge dialect program and executorch "
                               "program to be saved")
        if isinstance(path, (str, os.PathLike)):
            path = os.fspath(path)
        edge = self.edge_dialect_program
        edges = edge if isinstance(edge, dict) else {"forward": edge}
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(IDENTIFIER, "")
            if self.exported_program is not None:
                _write_program(z, EXPORTED_PROGRAM, self.exported_program)
            for method, ep in edges.items():
                _write_program(z, f"{EDGE_PROGRAM}/{method}", ep)
            for name, ep in (self.graph_map or {}).items():
                _write_program(z, name if "/" in name else f"{name}/forward", ep)
            z.writestr(DEBUG_HANDLE_MAP, json.dumps(self._debug_handle_map))
            if self._delegate_map is not None:
                z.writestr(DELEGATE_MAP, json.dumps(self._delegate_map))
            if self._instruction_id_to_num_outs_map is not None:
                z.writestr(NUM_OUTS_MAP, json.dumps(self._instruction_id_to_num_outs_map))
            for entry, value in ((REFERENCE_OUTPUTS, self._reference_outputs),
                                 (REPRESENTATIVE_INPUTS, self._representative_inputs)):
                if value is not None:
                    buf = io.BytesIO()
                    torch.save(value, buf)
                    z.writestr(entry, buf.getvalue())
            if self.export_graph_id is not None:
                z.writestr(EXPORT_GRAPH_ID, json.dumps(self.export_graph_id))

    def __repr__(self) -> str:
        methods = sorted(self._debug_handle_map or {})
        return (f"ETRecord(methods={methods}, exported_program="
                f"{self.exported_program is not None}, graph_map={sorted(self.graph_map or {})}, "
                f"representative_inputs={self._representative_inputs is not None})")


def _write_program(z: zipfile.ZipFile, base: str, ep: ExportedProgram) -> None:
    artifact = _serde.serialize(ep)
    z.writestr(base, artifact.exported_program)
    z.writestr(f"{base}_state_dict", artifact.state_dict)
    z.writestr(f"{base}_constants", artifact.constants)
    z.writestr(f"{base}_example_inputs", artifact.example_inputs)


# A saved ETRecord may come from anywhere: what is read from it is bounded (zip bombs) and
# checked (pickles, call targets) before torch sees it; any malformation is an ETRecordError.
MAX_ENTRIES = 10_000
MAX_ENTRY_BYTES = 1 << 30
MAX_TOTAL_BYTES = 2 << 30
_JSON_ENTRIES = (DEBUG_HANDLE_MAP, DELEGATE_MAP, NUM_OUTS_MAP, EXPORT_GRAPH_ID)


class _Reader:
    """The entries of an ETRecord zip, each read at most once and within the size limits."""

    def __init__(self, z: zipfile.ZipFile, max_bytes: int) -> None:
        infos = z.infolist()
        if len(infos) > MAX_ENTRIES:
            raise ETRecordError(f"ETRecord has {len(infos)} entries (at most {MAX_ENTRIES})")
        self.z = z
        self.sizes = {}
        for info in infos:
            # zipfile bounds a deflated (or stored) entry's output by its declared size as it
            # inflates; bzip2 and LZMA entries are decompressed a whole chunk at a time, and
            # 4 KB of bzip2 can expand to gigabytes before that bound applies. ExecuTorch and
            # edgetorch write stored entries.
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ETRecordError(
                    f"ETRecord entry {info.filename!r} uses zip compression method "
                    f"{info.compress_type}; an ETRecord's entries are stored or deflated")
            if info.file_size > min(MAX_ENTRY_BYTES, max_bytes):
                raise ETRecordError(
                    f"ETRecord entry {info.filename!r} decompresses to {info.file_size} bytes, "
                    f"over the limit of {min(MAX_ENTRY_BYTES, max_bytes)}; pass "
                    "parse_etrecord(path, max_bytes=...) to read larger records")
            self.sizes[info.filename] = info.file_size
        total = sum(self.sizes.values())
        if total > max_bytes:
            raise ETRecordError(f"ETRecord entries decompress to {total} bytes in all, over the "
                                f"limit of {max_bytes}; pass parse_etrecord(path, max_bytes=...) "
                                "to read larger records")

    def names(self) -> list[str]:
        return list(self.sizes)

    def read(self, name: str) -> bytes:
        if name not in self.sizes:
            raise ETRecordError(f"ETRecord entry {name!r} is missing")
        # With a size, zipfile inflates about that much and stops; ``z.read(name)`` would
        # inflate the whole entry first, whatever size the zip directory declares for it.
        with self.z.open(name) as f:
            data = f.read(self.sizes[name])
            if len(data) < self.sizes[name] or f.read(1):
                raise ETRecordError(f"ETRecord entry {name!r} does not hold the "
                                    f"{self.sizes[name]} bytes its zip directory declares")
        return data

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.read(name))
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
            raise ETRecordError(f"ETRecord entry {name!r} is not valid JSON ({e})") from e

    def program(self, base: str) -> ExportedProgram:
        blobs = [self.read(base + suffix) for suffix in ("", *_SUFFIXES)]
        try:
            return _serde.deserialize(_serde.SerializedArtifact(*blobs),
                                      f"ETRecord program {base!r}")
        except EdgeTorchError:
            raise
        except Exception as e:  # torch's deserializer on malformed JSON or graphs
            ours = _edgetorch_cause(e)
            if ours is not None:  # our own refusal, wrapped by torch (SerializeError)
                # raised as it was, torch's wrapper dropped: ``from e`` would close a cycle
                # (e's cause is ``ours``), and code walking the causes would never end
                e.__cause__ = e.__context__ = None
                raise ours from None
            raise ETRecordError(f"ETRecord program {base!r} cannot be deserialized "
                                f"({type(e).__name__}: {str(e)[:300]})") from e

    def tensors(self, name: str) -> Any:
        return load_tensors(self.read(name), f"ETRecord entry {name!r}")


def _edgetorch_cause(e: BaseException) -> EdgeTorchError | None:
    seen = 0
    cause: BaseException | None = e
    while cause is not None and seen < 32:
        if isinstance(cause, EdgeTorchError):
            return cause
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None


def _check_maps(fields: dict[str, Any]) -> None:
    """The JSON maps as the Inspector reads them: ``{method: {instruction: value}}``."""
    for name in (DEBUG_HANDLE_MAP, DELEGATE_MAP, NUM_OUTS_MAP):
        m = fields.get(name)
        if m is None:
            continue
        if not isinstance(m, dict) or not all(isinstance(v, dict) for v in m.values()):
            raise ETRecordError(f"ETRecord entry {name!r} is not a map of methods to maps")
    graph_id = fields.get(EXPORT_GRAPH_ID)
    if graph_id is not None and (not isinstance(graph_id, int) or isinstance(graph_id, bool)):
        raise ETRecordError(f"ETRecord entry {EXPORT_GRAPH_ID!r} is not an integer")
    outputs = fields.get(REFERENCE_OUTPUTS)
    if outputs is not None and not isinstance(outputs, dict):
        raise ETRecordError(f"ETRecord entry {REFERENCE_OUTPUTS!r} is not a map of methods")
    inputs = fields.get(REPRESENTATIVE_INPUTS)
    if inputs is not None and not isinstance(inputs, (list, tuple)):
        raise ETRecordError(f"ETRecord entry {REPRESENTATIVE_INPUTS!r} is not a list")


def parse_etrecord(etrecord_path: str | os.PathLike | IO[bytes], *,
                   max_bytes: int = MAX_TOTAL_BYTES) -> ETRecord:
    """Read an ETRecord written by edgetorch or by ExecuTorch.

    The file may come from anywhere: tensors are read with ``torch.load(weights_only=True)``
    only (a pickled object is refused, never run), graphs may call operators only, and no
    more than ``max_bytes`` is decompressed. Anything else is an :class:`ETRecordError` (a
    ``RuntimeError``, as ExecuTorch raises) or :class:`UnsafeFileError`."""
    try:
        z = zipfile.ZipFile(etrecord_path, "r")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError,
            NotImplementedError) as e:  # (a "version needed to extract" zipfile lacks)
        raise ETRecordError(f"Invalid etrecord file passed in ({e}).") from None
    with z:
        try:
            return _parse(_Reader(z, max_bytes))
        except EdgeTorchError:
            raise
        except (zipfile.BadZipFile, NotImplementedError, EOFError, OSError, ValueError,
                RuntimeError) as e:  # corrupt entries, CRC errors, unsupported compression
            raise ETRecordError(f"Invalid etrecord file passed in ({type(e).__name__}: "
                                f"{str(e)[:300]}).") from e


def _parse(r: _Reader) -> ETRecord:
    names = r.names()
    if IDENTIFIER not in names:
        raise ETRecordError("ETRecord identifier missing from etrecord file passed in. Either "
                            "an invalid file was passed in or the file is corrupt.")
    fields: dict[str, Any] = {}
    edges: dict[str, ExportedProgram] = {}
    graph_map: dict[str, ExportedProgram] = {}
    for name in names:
        if name == IDENTIFIER or name.endswith(_SUFFIXES):
            continue
        if name in _JSON_ENTRIES:
            fields[name] = r.json(name)
        elif name in (REFERENCE_OUTPUTS, REPRESENTATIVE_INPUTS):
            fields[name] = r.tensors(name)
        elif name == EXPORTED_PROGRAM:
            fields[name] = r.program(name)
        elif name == EDGE_PROGRAM:  # the older single-method layout
            edges["forward"] = r.program(name)
        elif name.startswith(EDGE_PROGRAM + "/"):
            edges[name[len(EDGE_PROGRAM) + 1:]] = r.program(name)
        else:
            graph_map[name] = r.program(name)
    _check_maps(fields)
    edge: Any = next(iter(edges.values())) if len(edges) == 1 else (edges or None)
    return ETRecord(fields.get(EXPORTED_PROGRAM), fields.get(EXPORT_GRAPH_ID, 0), edge,
                    graph_map, fields.get(DEBUG_HANDLE_MAP), fields.get(DELEGATE_MAP),
                    fields.get(NUM_OUTS_MAP), fields.get(REFERENCE_OUTPUTS),
                    fields.get(REPRESENTATIVE_INPUTS))


def generate_etrecord(et_record: str | os.PathLike | IO[bytes], edge_dialect_program: Any,
                      executorch_program: Any, exported_program: Any = None,
                      extra_recorded_export_modules: dict[str, Any] | None = None) -> None:
    """Write an ETRecord from a copy of the ``EdgeProgramManager`` taken before
    ``to_executorch`` (``copy.deepcopy(edge)``), the ``ExecutorchProgramManager`` (or a
    ``BundledProgram``) and optionally the ATen program and extra modules."""
    record = ETRecord()
    record.add_exported_program(exported_program)
    record.add_edge_dialect_program(edge_dialect_program)
    record.add_executorch_program(executorch_program)
    if extra_recorded_export_modules is not None:
        record.add_extra_export_modules(extra_recorded_export_modules)
    record.save(et_record)


def _graph_map_entries(name: str, module: Any) -> dict[str, ExportedProgram]:
    if isinstance(module, ExportedProgram):
        return {f"{name}/forward": module}
    from ...exir.program._program import EdgeProgramManager

    inner = getattr(module, "exported_program", None)
    if isinstance(inner, ExportedProgram):  # an ExirExportedProgram-like holder
        return {f"{name}/forward": inner}
    if isinstance(module, EdgeProgramManager):
        return {f"{name}/{m}": module.exported_program(m) for m in module.methods}
    raise RuntimeError(f"Unsupported graph module type. {type(module)}")


def _programs(p: Any) -> dict[str, ExportedProgram]:
    if isinstance(p, ExportedProgram):
        return {"forward": p}
    if isinstance(p, dict):
        return dict(p)
    return {m: p.exported_program(m) for m in sorted(p.methods)}


def record_for(exported_program: Any, edge_program: Any,
               extra: dict[str, Any] | None = None) -> ETRecord:
    """The edge-stage ETRecord (what ``generate_etrecord=True`` keeps on the edge manager)."""
    aten = _programs(exported_program) if exported_program is not None else {}
    edges = {m: copy.deepcopy(ep) for m, ep in _programs(edge_program).items()}
    record = ETRecord(edge_dialect_program=edges["forward"] if list(edges) == ["forward"]
                      else edges)
    record.add_exported_program(aten or None)
    if extra:
        record.add_extra_export_modules(extra)
    return record
