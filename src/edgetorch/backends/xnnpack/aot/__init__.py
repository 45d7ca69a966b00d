"""The ahead-of-time half of the XNNPACK backend (needs torch): the rules that turn each Edge
operator into XNNPACK nodes (``builder.py`` and the rule modules ``ops.py``, ``nn.py``,
``quant.py``), used by ``xnnpack_preprocess.XnnpackBackend`` and the partitioner."""
