"""The Core ML backend's ahead-of-time half (needs coremltools, the ``coreml`` extra)."""

from .coreml_preprocess import CoreMLBackend

__all__ = ["CoreMLBackend"]
