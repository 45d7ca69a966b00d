"""Both directions with ExecuTorch 1.5.1 (run in the separate reference environment):

* every example's ``.pte`` written by edgetorch runs in ExecuTorch's runtime = eager;
* the ``.pte`` ExecuTorch's ``to_edge(...).to_executorch()`` writes runs in edgetorch = eager;
* ours is no larger, and plans no more memory, than ExecuTorch's.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from refenv import ref_available, ref_export, ref_run  # noqa: E402

from edgetorch.examples import EXAMPLES, get_example  # noqa: E402
from edgetorch.exir import to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]

ATOL = 1e-5


def _eager(name):
    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    with torch.no_grad():
        out = model(*inputs)
    return model, inputs, [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_both_directions(name, tmp_path):
    model, inputs, expected = _eager(name)

    ours = tmp_path / f"{name}.edgetorch.pte"
    et = to_edge(torch.export.export(model, inputs)).to_executorch()
    ours.write_bytes(et.buffer)
    got = ref_run(ours, [x.numpy() for x in inputs])
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        np.testing.assert_allclose(g, w, atol=ATOL, rtol=0, err_msg=f"{name} in ExecuTorch")

    theirs = ref_export(name, tmp_path / f"{name}.executorch.pte")
    ref_inputs = theirs.inputs()
    for a, b in zip(ref_inputs, inputs):
        np.testing.assert_array_equal(a, b.numpy())
    out = Runtime.get().load_program(theirs.pte).load_method("forward").execute(ref_inputs)
    for g, w in zip(out, expected):
        np.testing.assert_allclose(
            g, w, atol=ATOL, rtol=0, err_msg=f"{name} ExecuTorch's pte in edgetorch"
        )

    ours_meta = Runtime.get().load_program(ours).metadata("forward")
    theirs_meta = Runtime.get().load_program(theirs.pte).metadata("forward")
    ours_plan = sum(
        ours_meta.memory_planned_buffer_size(i)
        for i in range(ours_meta.num_memory_planned_buffers())
    )
    theirs_plan = sum(
        theirs_meta.memory_planned_buffer_size(i)
        for i in range(theirs_meta.num_memory_planned_buffers())
    )
    assert ours.stat().st_size <= theirs.pte.stat().st_size, "our .pte is larger than ExecuTorch's"
    assert ours_plan <= theirs_plan, f"our plan {ours_plan} > ExecuTorch's {theirs_plan}"
