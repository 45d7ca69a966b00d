#!/usr/bin/env python3
"""Fuzz edgetorch with mutated .bpte (bundled program) inputs (see harness.py for flags and limits)."""

from harness import main

if __name__ == "__main__":
    main("bpte")
