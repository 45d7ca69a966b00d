"""CMSIS-NN facts the ahead-of-time compiler needs (backends and scratch-buffer sizes)."""
