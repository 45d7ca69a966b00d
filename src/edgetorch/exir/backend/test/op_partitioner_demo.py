"""``from executorch.exir.backend.test.op_partitioner_demo import ...``"""

from ....backends.demo.compiler import AddMulPartitionerDemo

__all__ = ["AddMulPartitionerDemo"]
