"""BundledProgram (``executorch.devtools.bundled_program``): a program plus test cases.

``config`` holds MethodTestCase / MethodTestSuite, ``core`` the BundledProgram, ``serialize``
the ``.bpte`` writer and reader, ``schema`` the flatbuffer dataclasses. The runtime side
(loading a ``.bpte`` and verifying outputs) is ``edgetorch.runtime.bundled``.
"""
