"""Device placement of delegate tensors (ExecuTorch's ``exir.passes.propagate_device_pass``).

A partitioner asks for a device by adding the compile spec ``TARGET_DEVICE_COMPILE_SPEC_KEY``
(``CompileSpec("target_device", b"cuda:0")``); the key is ExecuTorch's. edgetorch's runtime
runs every tensor in host memory, so edgetorch plans every tensor on the CPU and does not
move delegate tensors to other devices: the spec is carried to the backend unchanged.
"""

TARGET_DEVICE_COMPILE_SPEC_KEY = "target_device"
