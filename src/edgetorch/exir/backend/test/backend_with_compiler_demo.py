"""``from executorch.exir.backend.test.backend_with_compiler_demo import ...``"""

from ....backends.demo.compiler import BackendWithCompilerDemo

__all__ = ["BackendWithCompilerDemo"]
