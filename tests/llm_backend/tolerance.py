"""Tolerances for comparing two torch computations of one quantity in different summation orders (a packed
against a padded batch, a fused against a plain kernel), per dtype and reduction size (issue 22).

Why not bits: float reductions are not associative, and the order differs by layout and by CPU (oneDNN / MKL
pick kernels and blockings by ISA: AVX2 vs AVX-512 / AMX), so the last bits differ. Higham's bound for a sum
of T terms in any order is |error| <= (T - 1) u sum|x_i| (u = unit round-off, Accuracy and Stability of
Numerical Algorithms, eq. 4.4); we take sum|x_i| ~ max|result| of the tensor. Seen: a packed vs padded
gradient differed by 1.1 u max|g| on an AMD EPYC (AVX2) and by 38 u max|g| (1.29e-6, T ~ 100 tokens) on an
Intel Xeon (AVX-512), both inside the tolerance below (2 u T max|g|, 200 u max|g| at T = 100)."""

from __future__ import annotations

import torch

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11,
                 torch.float64: 2.0**-53}


def reduction_atol(reference: torch.Tensor, terms: int, dtype: torch.dtype | None = None) -> float:
    """Absolute tolerance for `reference` (any tensor) recomputed in another order: 2 u T max|reference|
    (2 u = machine epsilon), T the number of terms summed into each element (tokens of the loss, >= 2)."""
    u = UNIT_ROUNDOFF[dtype or reference.dtype]
    return 2.0 * u * max(terms, 2) * float(reference.detach().abs().max())


def assert_close_reordered(got: torch.Tensor, want: torch.Tensor, terms: int, rtol: float = 1e-4) -> None:
    """`got` equals `want` up to the round-off of reordering a T-term reduction (reduction_atol)."""
    torch.testing.assert_close(got, want, atol=reduction_atol(want, terms), rtol=rtol)
