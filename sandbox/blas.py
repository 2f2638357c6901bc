"""One BLAS thread for every simulator kernel call (docs/DESIGN.md determinism).

Numba's `np.dot` runs in scipy's OpenBLAS, whose own thread pool (one thread per core by default) splits a
GEMM above its size threshold (K = 1024 policies, evaluations of 1024 problems) in a way that changes the
floating-point result with the thread count: the same seed gave different curves on machines with different
core counts. Inside a sweep's worker processes or numba threads that pool also oversubscribes the cores
(measured at K = 1024, d = 256, n = 8 on this 2-core machine: 7x the CPU time of one thread). So each
public entry point runs with that pool at one thread (threadpoolctl), restored on return; other BLAS
libraries of the process (torch's) are left alone.
"""

from __future__ import annotations

import functools

import scipy.linalg.cython_blas  # noqa: F401  loads the library numba's dot calls, so threadpoolctl sees it
from threadpoolctl import threadpool_limits

PREFIX = "libscipy_openblas"
"""threadpoolctl's prefix of scipy's (and numpy's) OpenBLAS builds."""


def one_blas_thread(fn):
    """Run fn with scipy's/numpy's OpenBLAS pools at one thread."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits={PREFIX: 1}):
            return fn(*args, **kwargs)

    return wrapper
