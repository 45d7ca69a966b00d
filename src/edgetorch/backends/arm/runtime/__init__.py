"""The runtime half of the Arm backends (torch-free; tosa-tools from ``edgetorch[arm]``)."""
