"""``executorch.exir.backend.test.demos.rpc``: the nested-program backend (ExecuTorch's RPC demo)."""
