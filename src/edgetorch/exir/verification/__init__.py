"""Dialect verifiers (ExecuTorch's ``exir.verification``)."""
