"""Pieces shared by the Arm backends (TOSA, Ethos-U): the compile-spec base and pipeline config."""
