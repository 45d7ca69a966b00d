"""The portable kernel library: NumPy implementations of ExecuTorch's portable operators.

Importing this package registers every kernel; each family lives in its own module.
"""

from . import creation  # noqa: F401, I001  (one line per family, on purpose)
from . import dim_order  # noqa: F401
from . import elementwise  # noqa: F401
from . import fft  # noqa: F401
from . import indexing  # noqa: F401
from . import inplace  # noqa: F401
from . import linalg  # noqa: F401
from . import nn  # noqa: F401
from . import padding  # noqa: F401
from . import pooling  # noqa: F401
from . import prim  # noqa: F401
from . import rand  # noqa: F401
from . import reduction  # noqa: F401
from . import resample  # noqa: F401
from . import shape  # noqa: F401
from . import sort  # noqa: F401
from . import prepared  # noqa: F401  (load-time fast paths of the kernels above; last)
