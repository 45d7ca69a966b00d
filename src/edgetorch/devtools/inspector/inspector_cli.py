"""``python -m edgetorch.devtools.inspector.inspector_cli --etdump_path E [--etrecord_path R]
[--debug_buffer_path B] [--tsv_path T]``: print the Inspector's table (ExecuTorch's CLI)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--etdump_path", required=True, help="ETDump file (.etdp)")
    parser.add_argument("--etrecord_path", default=None, help="ETRecord file")
    parser.add_argument("--debug_buffer_path", default=None, help="debug buffer file")
    parser.add_argument("--tsv_path", default=None, help="also write the table as TSV here")
    parser.add_argument("--source_time_scale", default="ns")
    parser.add_argument("--target_time_scale", default="ms")


def run(args: argparse.Namespace) -> int:
    from ._inspector import Inspector

    inspector = Inspector(etdump_path=args.etdump_path, etrecord=args.etrecord_path,
                          debug_buffer_path=args.debug_buffer_path,
                          source_time_scale=args.source_time_scale,
                          target_time_scale=args.target_time_scale)
    inspector.print_data_tabular()
    if args.tsv_path:
        inspector.save_data_to_tsv(args.tsv_path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
