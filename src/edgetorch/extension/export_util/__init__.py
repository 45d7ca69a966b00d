"""Export helpers (``executorch.extension.export_util``)."""
