"""ExecuTorch's ``backends.xnnpack.partition.config`` package. ExecuTorch keeps one config
class per operator there; edgetorch keeps each operator's check next to its lowering
(``RULES[op].check``), so this package holds the shared names only."""
