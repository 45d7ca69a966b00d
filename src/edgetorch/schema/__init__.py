"""The ExecuTorch file formats, torch-free (stdlib, flatbuffers, numpy).

``fbs`` is the one flatbuffer engine: every schema below is declared there as data and gets its
writer and bounds-checked reader from it. ``program`` + ``flatbuffer`` (``program.fbs``),
``pte`` (the .pte container: extended header and segments), ``ptd`` (FlatTensor),
``etdump`` (ETDump, ``ED00``), ``bundled_program`` (.bpte, ``BP08``); the XNNPACK delegate
schema lives with its backend (``edgetorch.backends.xnnpack.serialization``).
"""
