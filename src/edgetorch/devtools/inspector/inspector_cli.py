"""``python -m edgetorch.devtools.inspector.inspector_cli --etdump_path E [--etrecord_path R]
[--debug_buffer_path B] [--tsv_path T] [--source_time_scale ns] [--target_time_scale ms]
[--compare_results]``: ExecuTorch's Inspector CLI (also ``edgetorch inspector``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

_SCALES = ["ns", "us", "ms", "s", "cycles"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--etdump_path", required=True, help="ETDump file (.etdp)")
    parser.add_argument("--etrecord_path", default=None, help="ETRecord file")
    parser.add_argument("--debug_buffer_path", default=None,
                        help="debug buffer file (intermediate and program outputs)")
    parser.add_argument("--tsv_path", default=None, help="also write the table as TSV here")
    parser.add_argument("--source_time_scale", choices=_SCALES, default="ns",
                        help="time scale of the ETDump's timestamps (default: ns)")
    parser.add_argument("--target_time_scale", choices=_SCALES, default="ms",
                        help="time scale of the table (default: ms)")
    parser.add_argument("--compare_results", action="store_true",
                        help="compare each Execute block's outputs with the ETRecord's "
                             "reference outputs (SNR, MSE, cosine similarity), plotted to "
                             "<metric>_output_plot.png")


def run(args: argparse.Namespace) -> int:
    from ._compare import compare_results
    from ._inspector import Inspector, InspectorError

    inspector = Inspector(etdump_path=args.etdump_path, etrecord=args.etrecord_path,
                          debug_buffer_path=args.debug_buffer_path,
                          source_time_scale=args.source_time_scale,
                          target_time_scale=args.target_time_scale)
    inspector.print_data_tabular()
    if args.tsv_path:
        inspector.save_data_to_tsv(args.tsv_path)
    if args.compare_results:
        blocks = [b for b in inspector.event_blocks if b.name == "Execute"]
        if all(b.reference_output is None for b in blocks):
            raise InspectorError("--compare_results needs reference outputs: an ETRecord made "
                                 "from a BundledProgram, or one given update_reference_outputs()"
                                 ", and a debug buffer (--debug_buffer_path) for the run outputs")
        for block in blocks:
            reference = block.reference_output
            # one run's outputs: a list, or a lone tensor for a single-output method
            if not isinstance(reference, (list, tuple)):
                reference = [reference]
            compare_results(list(reference), block.run_output or [], plot=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
