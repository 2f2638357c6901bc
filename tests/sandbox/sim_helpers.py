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
