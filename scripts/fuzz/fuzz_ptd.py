#!/usr/bin/env python3
"""Fuzz the runtime with mutated ptd inputs (see harness.py for flags and limits)."""

from harness import main

if __name__ == "__main__":
    main("ptd")
