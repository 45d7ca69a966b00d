"""Reading logged tensors from an ETDump debug buffer (the Inspector's ``_runs._tensor``)."""

import numpy as np

from edgetorch.devtools.inspector._runs import _tensor
from edgetorch.schema import etdump as E
from edgetorch.schema.scalar_type import ScalarType


def test_strides_are_honoured():
    data = np.arange(6, dtype=np.float32)
    got = _tensor(E.Tensor(ScalarType.FLOAT, [2, 3], [1, 2], 0), data.tobytes())
    np.testing.assert_array_equal(got, data.reshape(3, 2).T)


def test_a_strides_list_not_matching_the_rank_reads_contiguous():
    """Our writer once logged a 0-dim value with strides [1]; the Inspector then failed with
    NumPy's "mismatch in length of strides and shape". Such a file still reads."""
    data = np.arange(24, dtype=np.float32)
    got = _tensor(E.Tensor(ScalarType.FLOAT, [2, 3, 4], [12, 4], 0), data.tobytes())
    np.testing.assert_array_equal(got, data.reshape(2, 3, 4))


def test_zero_dim_values_are_logged_without_strides():
    from edgetorch.runtime.etdump import _DebugBuffer
    from edgetorch.runtime.etdump import _tensor as logged

    buf = _DebugBuffer(1 << 10)
    t = logged(np.array(2.5, np.float32), buf)
    assert t.sizes == [] and t.strides == []
    assert logged(np.zeros((2, 3, 4), np.float32), buf).strides == [12, 4, 1]
    assert float(_tensor(t, bytes(buf.data[:buf.used]))) == 2.5


def test_empty_tensors_read_without_their_offset():
    """ExecuTorch logs batch norm's empty mean/var outputs as sizes [0] at offset -1; reading
    them failed as "outside the debug buffer" (issue 33's BatchNorm CNN)."""
    got = _tensor(E.Tensor(ScalarType.FLOAT, [0], [1], -1), b"\0" * 64)
    assert got.shape == (0,) and got.dtype == np.float32
