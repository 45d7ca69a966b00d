"""Runs under the reference Python (ExecuTorch 1.5.1): load a .pte (and .ptd / .bpte) with
ExecuTorch's portable_lib and print what the pybindings API reports, as JSON; outputs go to
an .npz. Driven by test_pybindings_compat.py through tests/compat/refenv.py."""

import json
import sys

import numpy as np
import torch
from executorch.extension.pybindings import portable_lib as rt


def main() -> None:
    pte, ptd, inputs_npz, out_npz, bpte = sys.argv[1:6]
    with np.load(inputs_npz) as data:
        inputs = [torch.from_numpy(data[f"arr_{i}"]) for i in range(len(data.files))]
    # The test exports 4-D inputs channels-last; ExecuTorch wants them in that dim order.
    inputs = [t.to(memory_format=torch.channels_last) if t.dim() == 4 else t for t in inputs]
    module = rt._load_for_executorch(pte, ptd or None)
    meta = module.method_meta("forward")
    report = {
        "method_meta": str(meta),
        "inputs": [repr(meta.input_tensor_meta(i)) for i in range(meta.num_inputs())],
        "dtypes": [meta.input_tensor_meta(i).dtype() for i in range(meta.num_inputs())],
        "method_names": sorted(module.method_names()),
        "num_attributes": meta.num_attributes(),
    }
    outputs = module.forward(inputs)
    report["output_strides"] = [list(o.stride()) for o in outputs]
    np.savez(out_npz, *[o.numpy() for o in outputs])
    errors = {}
    for name, call in {
        "bad_method": lambda: module.run_method("nope", inputs),
        "list_input": lambda: module.forward([list(inputs)]),
        "too_many": lambda: module.forward([*inputs, inputs[0]]),
    }.items():
        try:
            call()
            errors[name] = None
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            errors[name] = type(e).__name__
    report["errors"] = errors
    if bpte:
        with open(bpte, "rb") as f:
            bundle = rt._load_bundled_program_from_buffer(f.read())
        report["bundled_outputs"] = len(
            bundle.verify_result_with_bundled_expected_output("forward", 0))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
