"""Tools over ``.pte`` files (ExecuTorch's ``devtools.pte_tool``): :mod:`.diff_pte`."""
