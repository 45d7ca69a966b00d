"""Backends, one folder each: a partitioner and ``preprocess`` (needs torch) plus a runtime
half registered with ``edgetorch.runtime.backends.backend`` (NumPy only). Import a backend's
package to register it; nothing is imported here."""
