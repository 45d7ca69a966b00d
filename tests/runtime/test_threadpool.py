"""The runtime's thread-count option sizes NumPy's BLAS pool and validates its argument."""

import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from edgetorch.errors import InvalidArgumentError  # noqa: E402
from edgetorch.runtime import threadpool  # noqa: E402


def test_set_and_restore_thread_count():
    before = threadpool.get_num_threads()
    previous = threadpool.set_num_threads(1)
    try:
        assert previous == before
        assert threadpool.get_num_threads() == 1
        a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        np.testing.assert_allclose(a @ np.eye(64, dtype=np.float32), a, rtol=1e-6)
    finally:
        threadpool.set_num_threads(before)
    assert threadpool.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_rejects_non_positive_or_non_int(bad):
    with pytest.raises(InvalidArgumentError, match="positive int"):
        threadpool.set_num_threads(bad)
