"""The ExecuTorch file formats: program.fbs dataclasses, flatbuffer I/O, .pte/.ptd containers."""
