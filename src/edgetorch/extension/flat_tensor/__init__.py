"""The ``.ptd`` FlatTensor format as ExecuTorch's ``extension.flat_tensor`` offers it."""
