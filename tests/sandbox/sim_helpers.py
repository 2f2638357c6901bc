"""Helpers shared by the sandbox tests (a uniquely named module, not conftest, so suites never collide)."""

from __future__ import annotations

import itertools
import math

import numpy as np


def compositions(n: int, K: int):
    """Every count vector (K,) of n rollouts over K answers, with its multinomial coefficient."""
    for cut in itertools.combinations(range(n + K - 1), K - 1):
        prev = -1
        counts = []
        for c in cut:
            counts.append(c - prev - 1)
            prev = c
        counts.append(n + K - 2 - prev)
        coef = math.factorial(n)
        for c in counts:
            coef //= math.factorial(c)
        yield np.array(counts, dtype=np.int64), coef


# Across CPUs (AVX2 vs AVX-512: numpy's SIMD exp/log/power, numba's host codegen and vector width, OpenBLAS's
# GEMM kernel) a simulator's floats differ in the last bits, and those differences stay at round-off over a
# short run: no multinomial draw flips unless a uniform lands within ~1e-15 of a cumulative probability (odds
# ~1e-10 for the runs tested here). docs/CONTRACTS.md, "Determinism". Counts, steps and compute are exact.
XCPU_RTOL = 1e-9
XCPU_ATOL = 1e-12


def assert_close_across_cpus(got, want, err_msg: str = "") -> None:
    """A simulator output against a reference made on another machine: integers and strings exactly, floats
    within XCPU_RTOL / XCPU_ATOL (NaN equal to NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, err_msg
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=XCPU_RTOL, atol=XCPU_ATOL, equal_nan=True, err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
