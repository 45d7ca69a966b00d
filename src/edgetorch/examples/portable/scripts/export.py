"""Export an example model to ``<model_name>.pte`` for the portable runtime.

    python -m edgetorch.examples.portable.scripts.export --model_name=add [--output_dir DIR]
        [--strict/--no-strict] [--segment_alignment 0x1000] [--external_constants]

ExecuTorch's ``examples/portable/scripts/export.py`` (same flags), on edgetorch's compiler.
Model names: ``edgetorch.examples.models.MODEL_NAME_TO_MODEL``.
"""

from __future__ import annotations

import argparse
import logging

from ...models import MODEL_NAME_TO_MODEL, create_model

FORMAT = "[%(levelname)s %(asctime)s %(filename)s:%(lineno)s] %(message)s"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model_name", required=True,
                        help=f"provide a model name. Valid ones: {sorted(MODEL_NAME_TO_MODEL)}")
    parser.add_argument("-s", "--strict", action=argparse.BooleanOptionalAction,
                        help="whether to export with strict mode. Default: non-strict (ExecuTorch's "
                        "script says True but passes None, which torch.export takes as False)")
    parser.add_argument("-a", "--segment_alignment", required=False,
                        help="specify segment alignment in hex. Default is 0x1000. Use 0x4000 for iOS")
    parser.add_argument("-e", "--external_constants", action=argparse.BooleanOptionalAction,
                        default=False, help="Save constants in external .ptd file. Default is False")
    parser.add_argument("-o", "--output_dir", default=".", help="output directory")
    return parser


def main(argv: list[str] | None = None) -> str:
    """Run the script; returns the path of the written ``.pte``."""
    import torch

    from ....exir import ExecutorchBackendConfig
    from ....extension.export_util.utils import export_to_exec_prog, save_pte_program

    args = build_parser().parse_args(argv)
    if args.model_name not in MODEL_NAME_TO_MODEL:
        raise RuntimeError(f"Model {args.model_name} is not a valid name. "
                           f"Available models are {sorted(MODEL_NAME_TO_MODEL)}.")
    model, example_inputs, _, dynamic_shapes = create_model(args.model_name)
    backend_config = ExecutorchBackendConfig(external_constants=args.external_constants)
    if args.segment_alignment is not None:
        backend_config.segment_alignment = int(args.segment_alignment, 16)
    with torch.no_grad():
        prog = export_to_exec_prog(model, example_inputs, dynamic_shapes=dynamic_shapes,
                                   backend_config=backend_config,
                                   strict=bool(args.strict))
    return save_pte_program(prog, args.model_name, args.output_dir)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=FORMAT)
    main()
