"""``from executorch.exir.backend.test.demos.rpc.executor_backend_preprocess import
ExecutorBackend``: the class lives in ``edgetorch.backends.demo.compiler`` (one class per
backend id)."""

from ......backends.demo.compiler import ExecutorBackend

__all__ = ["ExecutorBackend"]
