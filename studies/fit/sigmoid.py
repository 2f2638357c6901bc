"""Monotone sigmoid of reward vs compute, the ScaleRL form used by the IsoCompute analysis workflow.

R(C) = R0 + (A - R0) / (1 + (C_mid / C)^b)   (docs/PAPER.md "Analysis workflow" step 2, ScaleRL arXiv
2510.13786)

In x = ln C this is a logistic curve, R0 + (A - R0) * expit(b * (x - ln C_mid)), which is how it is fitted.
The same class fits log2 n*(C) against C (step 4), since that curve has the same shape in log C.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import least_squares
from scipy.special import expit

PARAM_NAMES = ("R0", "A", "C_mid", "b")


def sigmoid(C: np.ndarray | float, R0: float, A: float, C_mid: float, b: float) -> np.ndarray:
    """Evaluate R(C) = R0 + (A - R0) / (1 + (C_mid / C)^b); C <= 0 gives the C -> 0 limit R0."""
    C = np.asarray(C, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(C > 0, np.log(np.where(C > 0, C, 1.0)), -np.inf)
        return R0 + (A - R0) * expit(b * (x - math.log(C_mid)))


FIT_OK = "ok"
"""The fit status (`SigmoidFit.status_`, the "status" of a fit report's curves) of a usable fit; otherwise
"degenerate: <reason>". A property of a fit of the data, not a run's status
(isocompute.contract.status.DONE...)."""


class SigmoidFit:
    """Least-squares fit of the monotone (non-decreasing) sigmoid R(C), scikit-learn shaped.

    Bounds (why: keep the four parameters identifiable on short or saturated curves):
    b in `b_bounds` (b > 0 makes the curve non-decreasing); C_mid in [min C / cmid_factor,
    max C * cmid_factor] (a midpoint far outside the data is not identified); R0 <= A, both in
    [min R - margin * span, max R + margin * span] with span = max R - min R, or in `y_bounds` when
    given (e.g. the n-grid for n*); always inside `limits` when given (a pass rate cannot exceed 1, so a
    rate metric is fitted with limits (0, 1) and its asymptote A never reads above 1).

    After `fit`: `params_` (dict R0, A, C_mid, b), `r2_` (nan when undefined), `ok_` (False for degenerate
    data: too few points or a constant target; then params_ describe a flat line at the mean, or are nan
    without data), `status_` (the fit status: FIT_OK or "degenerate: <reason>"), `at_bounds_` (names of
    parameters on a bound), `n_points_`, `compute_range_` (min, max of the fitted C).

    `points`: what the fitted points are, as the degenerate status names them ("record-breaking points" for
    the frontier's per-configuration fits: a curve of many evaluations can have few records).
    """

    def __init__(
        self,
        b_bounds: tuple[float, float] = (0.05, 20.0),
        cmid_factor: float = 10.0,
        margin: float = 0.05,
        y_bounds: tuple[float, float] | None = None,
        min_points: int = 5,
        n_starts: int = 3,
        limits: tuple[float, float] | None = None,
        points: str = "points",
    ):
        self.b_bounds = b_bounds
        self.cmid_factor = cmid_factor
        self.margin = margin
        self.y_bounds = y_bounds
        self.min_points = min_points
        self.n_starts = n_starts
        self.limits = limits
        self.points = points

    # ---- public API -------------------------------------------------------------------------------------
    def fit(self, C, R) -> SigmoidFit:
        """Fit R(C) on the finite points with C > 0; never raises on degenerate data (see class docstring)."""
        C = np.asarray(C, dtype=float).ravel()
        R = np.asarray(R, dtype=float).ravel()
        if C.shape != R.shape:
            raise ValueError(f"C and R differ in length: {C.size} vs {R.size}")
        keep = np.isfinite(C) & np.isfinite(R) & (C > 0)
        C, R = C[keep], R[keep]
        self.n_points_ = int(C.size)
        self.at_bounds_: list[str] = []
        self.r2_ = float("nan")
        if C.size == 0:
            self.compute_range_ = (float("nan"), float("nan"))
            self._degenerate("no points", float("nan"), float("nan"))
            return self
        self.compute_range_ = (float(C.min()), float(C.max()))
        geo = float(np.exp(np.log(C).mean()))
        if C.size < self.min_points or np.unique(C).size < 4:
            why = (f"too few {self.points} ({C.size}, {np.unique(C).size} distinct C; a sigmoid needs "
                   f"{self.min_points}, 4 distinct)")
            self._degenerate(why, float(R.mean()), geo)
            return self
        if np.ptp(R) <= 1e-12:
            self._degenerate("constant target", float(R.mean()), geo)
            return self
        self._fit_bounded(np.log(C), R)
        return self

    def predict(self, C) -> np.ndarray:
        """R(C) on the fitted parameters (nan everywhere when there was nothing to fit)."""
        p = self.params_
        return sigmoid(C, p["R0"], p["A"], p["C_mid"], p["b"])

    # ---- internals --------------------------------------------------------------------------------------
    def _degenerate(self, reason: str, level: float, c_mid: float) -> None:
        self.ok_ = False
        self.status_ = f"degenerate: {reason}"
        self.params_ = {"R0": level, "A": level, "C_mid": c_mid if np.isfinite(c_mid) else 1.0, "b": 1.0}

    def _y_limits(self, y: np.ndarray) -> tuple[float, float]:
        if self.y_bounds is not None:
            lo, hi = map(float, self.y_bounds)
        else:
            span = float(np.ptp(y))
            lo, hi = float(y.min()) - self.margin * span, float(y.max()) + self.margin * span
        if self.limits is not None:
            lo, hi = max(lo, float(self.limits[0])), min(hi, float(self.limits[1]))
        if not hi > lo:
            hi = lo + 1e-9
        return lo, hi

    def _fit_bounded(self, x: np.ndarray, y: np.ndarray) -> None:
        lo, hi = self._y_limits(y)
        width = hi - lo
        f = math.log(self.cmid_factor)
        mu_lo, mu_hi = float(x.min()) - f, float(x.max()) + f
        b_lo, b_hi = self.b_bounds

        # Parametrisation with box bounds only: A = lo + width * a, R0 = lo + (A - lo) * g, a, g in [0, 1],
        # so lo <= R0 <= A <= hi holds by construction (scipy's least_squares takes boxes, not R0 <= A).
        def unpack(p):
            a, g, mu, b = p
            A = lo + width * a
            return lo + (A - lo) * g, A, mu, b

        def resid(p):
            R0, A, mu, b = unpack(p)
            return R0 + (A - R0) * expit(b * (x - mu)) - y

        starts = self._starts(x, y, lo, hi, (mu_lo, mu_hi), (b_lo, b_hi))
        lb = [0.0, 0.0, mu_lo, b_lo]
        ub = [1.0, 1.0, mu_hi, b_hi]
        best = None
        for s in starts:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    sol = least_squares(resid, s, bounds=(lb, ub), method="trf", x_scale="jac", max_nfev=400)
                except (ValueError, FloatingPointError):
                    continue
            if np.all(np.isfinite(sol.x)) and (best is None or sol.cost < best.cost):
                best = sol
        if best is None:
            self._degenerate("optimiser failed", float(y.mean()), float(np.exp(x.mean())))
            return
        R0, A, mu, b = unpack(best.x)
        self.params_ = {"R0": float(R0), "A": float(A), "C_mid": float(math.exp(mu)), "b": float(b)}
        sse = float(np.sum(resid(best.x) ** 2))
        sst = float(np.sum((y - y.mean()) ** 2))
        self.r2_ = 1.0 - sse / sst if sst > 0 else float("nan")
        tol = 1e-6
        names = []
        if A >= hi - tol * width:
            names.append("A")
        if R0 <= lo + tol * width:
            names.append("R0")
        if mu <= mu_lo + 1e-6 or mu >= mu_hi - 1e-6:
            names.append("C_mid")
        if b <= b_lo * (1 + 1e-6) or b >= b_hi * (1 - 1e-6):
            names.append("b")
        self.at_bounds_ = names
        self.ok_ = True
        self.status_ = FIT_OK

    def _starts(self, x, y, lo, hi, mu_rng, b_rng) -> list[np.ndarray]:
        """Robust start values: a grid over (ln C_mid, b) with R0, A solved by linear least squares.

        Given (mu, b) the model is linear in (R0, A), so every grid cell gets its best levels in closed form;
        the `n_starts` best cells (after clipping to the bounds) seed the bounded nonlinear fit.
        """
        qs = np.quantile(x, np.linspace(0.05, 0.95, 9))
        mus = np.clip(np.concatenate([qs, [x.min() - 1.0, x.max() + 1.0]]), *mu_rng)
        bs = np.clip(np.array([0.25, 0.5, 1.0, 2.0, 4.0, 8.0]), *b_rng)
        MU, B = np.meshgrid(mus, bs, indexing="ij")
        MU, B = MU.ravel(), B.ravel()
        S = expit(B[:, None] * (x[None, :] - MU[:, None]))  # (cells, points)
        # normal equations for y ~ R0 * (1 - S) + A * S, per cell
        U = 1.0 - S
        suu, sus, sss = (U * U).sum(1), (U * S).sum(1), (S * S).sum(1)
        suy, ssy = (U * y).sum(1), (S * y).sum(1)
        det = suu * sss - sus**2
        ok = np.abs(det) > 1e-12
        det = np.where(ok, det, 1.0)
        R0 = np.where(ok, (sss * suy - sus * ssy) / det, y.min())
        A = np.where(ok, (suu * ssy - sus * suy) / det, y.max())
        R0, A = np.clip(R0, lo, hi), np.clip(A, lo, hi)
        R0 = np.minimum(R0, A)
        sse = ((R0[:, None] + (A - R0)[:, None] * S - y[None, :]) ** 2).sum(1)
        order = np.argsort(sse)[: self.n_starts]
        width = hi - lo
        out = []
        for i in order:
            a = (A[i] - lo) / width
            g = (R0[i] - lo) / (A[i] - lo) if A[i] - lo > 1e-12 else 0.5
            out.append(np.array([np.clip(a, 0, 1), np.clip(g, 0, 1), MU[i], B[i]]))
        return out
