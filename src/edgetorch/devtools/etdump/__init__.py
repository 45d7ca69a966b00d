"""ETDump files (``executorch.devtools.etdump``): the schema and (de)serializer live in
``edgetorch.schema.etdump``; this package gives them ExecuTorch's import path."""
