"""The graph form the Developer Tools hand to viewers and the Inspector (ExecuTorch's
``devtools.debug_format``): a tree of named value and operator nodes built from an FX graph."""
