"""Tolerances for comparing two torch computations of one quantity in different summation orders (a packed
against a padded batch, a fused against a plain kernel), per dtype and reduction size.

Why not bits: float reductions are not associative, and the order differs by layout and by CPU (oneDNN / MKL
pick kernels and blockings by ISA: AVX2 vs AVX-512 / AMX), so the last bits differ. Higham's bound for a sum
of T terms in any order is |error| <= (T - 1) u sum|x_i| (u = unit round-off, Accuracy and Stability of
Numerical Algorithms, eq. 4.4); we take sum|x_i| ~ max|result| of the tensor. Seen: a packed vs padded
gradient differed by 1.1 u max|g| on an AMD EPYC (AVX2) and by 38 u max|g| (1.29e-6, T ~ 100 tokens) on an
Intel Xeon (AVX-512), both inside the tolerance below (2 u T max|g|, 200 u max|g| at T = 100).

An optimiser step does not just carry that error: Adam divides each gradient element by its own magnitude, so
an element near Adam's eps turns a reordering error of 1e-11 into a parameter difference of 1e-6
(adam_first_step_atol)."""

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


def adam_first_step_atol(grad: torch.Tensor, grad_atol: float, lr: float, eps: float = 1e-8) -> torch.Tensor:
    """Per-element tolerance for one Adam(W) step from zero moments (no weight decay) when the gradient is
    known only within +-grad_atol. At t = 1 the bias corrections cancel the moments' (1 - beta) factors
    (Kingma & Ba 2015, Algorithm 1), so the step is lr * f(g) with f(g) = g / (|g| + eps), whose slope is
    eps / (|g| + eps)^2; by the mean-value theorem over [|g| - d, |g| + d] the step moves by at most
    lr * d * eps / ((|g| - d)+ + eps)^2, and never by more than 2 lr (|f| < 1). Elements with |g| >> eps are
    pinned tightly (the step is lr * sign(g)); those near eps are not, because their step really is that
    sensitive: measured on an Intel Xeon (AVX-512), g = -3.6e-8 differed by 2.7e-11 between a packed and a
    padded batch and the parameter after the step by 1.29e-6."""
    g = grad.detach().abs().double()
    slope_max = eps / ((g - grad_atol).clamp(min=0.0) + eps) ** 2
    return (lr * grad_atol * slope_max).clamp(max=2.0 * lr).to(grad.dtype)
