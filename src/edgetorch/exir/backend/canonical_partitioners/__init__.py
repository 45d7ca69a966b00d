"""Ready-made partitioning helpers (ExecuTorch's ``exir.backend.canonical_partitioners``)."""
