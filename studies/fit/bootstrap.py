"""Bootstrap interval of the fitted envelope's arg-max over seeds: resample seeds, refit the curves.

`fit`, `plot`, `plan` and the claims report read n* as a set of measured configurations
(studies.fit.nstar); this module keeps the paper's reading, the arg-max of the fitted envelope, with its seed
interval, for the group-std study that compares arms by their fitted curves.

n* is an arg-max over configurations, so near saturation it jumps between n whose rewards differ by far less
than their seed noise; a point n* then overstates what the data say. The percentile bootstrap over seeds
(Efron & Tibshirani 1993, ch. 13) resamples whole seeds with replacement (a seed is the unit that is
independent: its runs share problems and initial policy across n), rebuilds each configuration's seed-mean
curve, its record-breaking points, its sigmoid and the upper envelope, and reads n* at the budgets.

Refitting with `FrontierFit` costs ~0.1 s per configuration (scipy least squares from three starts), so
200 replicates of a 9-n table would take minutes. The refit here is the same estimator, vectorised over
replicates: the same record rule (bins of `bin_width`, first entry into a higher bin), the same
parametrisation and box bounds as `SigmoidFit`, a projected Levenberg-Marquardt from the point fit's
parameters (a replicate is a small perturbation of the data, so one start from the point estimate is the
right one), the same range rule and tie rule for the envelope. A configuration whose point fit is degenerate
enters through its record points joined in log C, as in `FrontierFit.record_curve`.
`tests/studies/test_frontier.py` checks it against refitting `FrontierFit` on the same replicates, and the
interval's coverage of a known n* on synthetic curves.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import expit

REPS = 200
LEVEL = 0.95
UNDETERMINED_SPAN = 0.5
"""n* is 'undetermined' where its interval spans more than this share of the configuration grid (in log2):
the data then do not say which n is best."""
_EDGE_EPS = 1e-9  # as studies.fit.records: a value on a bin edge counts in the upper bin


def seed_weights(seeds: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, seeds) multinomial counts: how often each seed is drawn in each replicate."""
    draws = rng.integers(0, seeds, size=(reps, seeds))
    W = np.zeros((reps, seeds))
    np.add.at(W, (np.arange(reps)[:, None], draws), 1.0)
    return W


def _config_arrays(df: pd.DataFrame, by, x, metric, seed_col, seeds):
    """{config: (sorted x values (T,), metric (S, T) nan where a seed lacks the point)}."""
    out = {}
    for v, g in df.groupby(by, sort=True, observed=True):
        piv = g.pivot_table(index=seed_col, columns=x, values=metric, aggfunc="mean")
        piv = piv.reindex(index=seeds)
        out[v] = (piv.columns.to_numpy(dtype=float), piv.to_numpy(dtype=float))
    return out


def _records(M: np.ndarray, bin_width: float) -> np.ndarray:
    """Record mask of each row of M (nan = no point): the first finite point, then each entry into a higher
    bin than all earlier finite points (studies.fit.records.record_breaking, row-wise)."""
    bins = np.floor(M / bin_width + _EDGE_EPS)
    fin = np.isfinite(bins)
    b = np.where(fin, bins, -np.inf)
    prev = np.maximum.accumulate(b, axis=1)
    prev = np.concatenate([np.full((M.shape[0], 1), -np.inf), prev[:, :-1]], axis=1)
    return fin & (b > prev)


def _limits(y: np.ndarray, w: np.ndarray, sig) -> tuple[np.ndarray, np.ndarray]:
    """Per row lo, hi of SigmoidFit._y_limits over the points with weight 1."""
    big = np.where(w > 0, y, np.nan)
    ymin, ymax = np.nanmin(big, axis=1), np.nanmax(big, axis=1)
    if sig.y_bounds is not None:
        lo, hi = np.full_like(ymin, sig.y_bounds[0]), np.full_like(ymin, sig.y_bounds[1])
    else:
        span = ymax - ymin
        lo, hi = ymin - sig.margin * span, ymax + sig.margin * span
    if sig.limits is not None:
        lo, hi = np.maximum(lo, sig.limits[0]), np.minimum(hi, sig.limits[1])
    hi = np.where(hi > lo, hi, lo + 1e-9)
    return lo, hi


def batched_sigmoid(x: np.ndarray, Y: np.ndarray, W: np.ndarray, start: dict, sig, iters: int = 30):
    """Least-squares sigmoid fits of many rows at once: x (T,) = ln C, Y (N, T), W (N, T) 0/1 weights, a
    start {R0, A, C_mid, b} (the point fit), `sig` a SigmoidFit for its bounds. Returns (R0, A, mu, b) (N,)
    arrays. Same parametrisation as SigmoidFit (A = lo + width a, R0 = lo + (A - lo) g, a, g in [0, 1])."""
    N = Y.shape[0]
    lo, hi = _limits(Y, W, sig)
    width = hi - lo
    xs = np.where(W > 0, x[None, :], np.nan)
    f = math.log(sig.cmid_factor)
    mu_lo, mu_hi = np.nanmin(xs, axis=1) - f, np.nanmax(xs, axis=1) + f
    b_lo, b_hi = sig.b_bounds
    A0 = np.clip(start["A"], lo, hi)
    R00 = np.minimum(np.clip(start["R0"], lo, hi), A0)
    a = np.clip((A0 - lo) / width, 0, 1)
    g = np.where(A0 - lo > 1e-12, (R00 - lo) / np.maximum(A0 - lo, 1e-300), 0.5)
    p = np.stack([a, np.clip(g, 0, 1), np.clip(np.full(N, math.log(start["C_mid"])), mu_lo, mu_hi),
                  np.clip(np.full(N, start["b"]), b_lo, b_hi)], axis=1)
    plo = np.stack([np.zeros(N), np.zeros(N), mu_lo, np.full(N, b_lo)], axis=1)
    phi = np.stack([np.ones(N), np.ones(N), mu_hi, np.full(N, b_hi)], axis=1)
    Yz = np.where(W > 0, Y, 0.0)

    def model(p):
        s = expit(p[:, 3:4] * (x[None, :] - p[:, 2:3]))
        m = lo[:, None] + width[:, None] * p[:, 0:1] * (p[:, 1:2] + (1 - p[:, 1:2]) * s)
        return m, s

    def cost(p):
        m, _ = model(p)
        return (W * (m - Yz) ** 2).sum(1)

    lam = np.full(N, 1e-3)
    c = cost(p)
    for _ in range(iters):
        m, s = model(p)
        a_, g_, mu, b = (p[:, i : i + 1] for i in range(4))
        wd = width[:, None]
        ds = s * (1 - s)
        J = np.stack([wd * (g_ + (1 - g_) * s), wd * a_ * (1 - s), -wd * a_ * (1 - g_) * ds * b,
                      wd * a_ * (1 - g_) * ds * (x[None, :] - mu)], axis=2) * np.sqrt(W)[:, :, None]
        r = (m - Yz) * np.sqrt(W)
        Jt = J.transpose(0, 2, 1)
        JTJ = Jt @ J
        JTr = (Jt @ r[:, :, None])[:, :, 0]
        D = JTJ[:, np.arange(4), np.arange(4)] + 1e-12
        A_ = JTJ + (lam[:, None] * D)[:, :, None] * np.eye(4)[None]
        step = np.linalg.solve(A_, -JTr[:, :, None])[:, :, 0]
        pn = np.clip(p + step, plo, phi)
        cn = cost(pn)
        better = cn < c
        p = np.where(better[:, None], pn, p)
        c = np.where(better, cn, c)
        lam = np.where(better, lam / 3, lam * 10)
    A = lo + width * p[:, 0]
    R0 = lo + (A - lo) * p[:, 1]
    return R0, A, p[:, 2], p[:, 3]


def _record_interp(lnC: np.ndarray, x: np.ndarray, M: np.ndarray, rec: np.ndarray) -> np.ndarray:
    """Rows of record points (running max) joined linearly in ln C, at lnC: (N, len(lnC))."""
    out = np.full((M.shape[0], lnC.size), np.nan)
    for i in range(M.shape[0]):
        k = rec[i]
        if k.any():
            out[i] = np.interp(lnC, x[k], np.maximum.accumulate(M[i, k]))
    return out


def bootstrap_n_star(ff, table: pd.DataFrame, C, reps: int = REPS, level: float = LEVEL, rng_seed: int = 0,
                     seed_col: str = "seed", weights: np.ndarray | None = None) -> dict:
    """n* of `reps` seed-resampled refits of the fitted FrontierFit `ff` at computes C.

    Returns {"n_star": (reps, len(C)) array of configuration values (nan where no curve covers C), "lo",
    "hi" (the level interval per C, on the configuration grid), "share" (share of replicates whose n* is the
    point n*), "undetermined" (interval wider than UNDETERMINED_SPAN of the grid), "reps", "seeds"}.
    `weights` (reps, seeds) replaces the multinomial draw (tests pass the identity to reproduce the fit).
    """
    from studies.fit.sigmoid import SigmoidFit

    if getattr(ff, "aggregate_", None) != "mean":
        raise ValueError("the seed bootstrap needs aggregate 'mean' (runs sharing evaluation points)")
    by, x, metric = ff.by, ff.x, ff.metric
    if seed_col not in table.columns:
        raise ValueError(f"table lacks the seed column {seed_col!r}")
    df = table[[by, x, metric, seed_col]].copy()
    df[x] = pd.to_numeric(df[x], errors="coerce")
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    df = df.loc[df[by].notna() & (df[x] > 0) & np.isfinite(df[metric].to_numpy(dtype=float))]
    seeds = sorted(df[seed_col].unique())
    C = np.atleast_1d(np.asarray(C, dtype=float))
    if weights is None:
        weights = seed_weights(len(seeds), int(reps), np.random.default_rng(rng_seed))
    Wt = np.asarray(weights, dtype=float)
    R = Wt.shape[0]
    arrays = _config_arrays(df, by, x, metric, seed_col, seeds)
    keys = [k for k in ff.curves_ if k in arrays]
    lnC = np.log(C)
    P = np.full((R, len(keys), C.size), np.nan)
    kw = dict(ff.sigmoid or {})
    vals = df[metric].to_numpy(dtype=float)
    if "limits" not in kw and vals.size and vals.min() >= 0.0 and vals.max() <= 1.0:
        kw["limits"] = (0.0, 1.0)
    sig = SigmoidFit(**kw)
    for j, k in enumerate(keys):
        xv, Y = arrays[k]
        have = np.isfinite(Y)
        num = Wt @ np.where(have, Y, 0.0)
        den = Wt @ have.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            M = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        rec = _records(M, ff.bin_width)
        lx = np.log(xv)
        npts = rec.sum(1)
        distinct = npts  # record points of one curve have distinct x
        fit = ff.curves_[k]
        good = (npts >= sig.min_points) & (distinct >= 4) & fit.ok_
        if fit.ok_:
            span = np.nanmax(np.where(rec, M, np.nan), 1) - np.nanmin(np.where(rec, M, np.nan), 1)
            good &= span > 1e-12
        lo_c, hi_c = ff.ranges_[k]
        inside = (C >= lo_c * (1 - 1e-9)) & (C <= hi_c * ff.extend * (1 + 1e-9))
        if good.any():
            r0, a, mu, b = batched_sigmoid(lx, np.where(rec, M, 0.0)[good], rec[good].astype(float),
                                           fit.params_, sig)
            pred = r0[:, None] + (a - r0)[:, None] * expit(b[:, None] * (lnC[None, :] - mu[:, None]))
            P[good, j, :] = np.where(inside[None, :], pred, np.nan)
        if (~good).any():
            P[~good, j, :] = np.where(inside[None, :], _record_interp(lnC, lx, M[~good], rec[~good]), np.nan)
    filled = np.where(np.isfinite(P), P, -np.inf)
    top = filled.max(axis=1)
    idx = np.argmax(filled >= top[:, None, :] - ff.tie_tol, axis=1)
    kv = np.asarray(keys, dtype=float)
    ns = np.where(np.isfinite(top), kv[idx], np.nan)
    point = ff.envelope_at(C)[by].to_numpy()
    return summarise(ns, point, kv, level) | {"reps": int(R), "seeds": len(seeds)}


def summarise(ns: np.ndarray, point, grid, level: float = LEVEL) -> dict:
    """Percentile interval on the grid, agreement share, undetermined mark of replicate n* (reps, C)."""
    q = (1 - level) / 2
    lo, hi, share, und = [], [], [], []
    l2 = np.log2(np.asarray(grid, dtype=float))
    span = float(l2.max() - l2.min()) if l2.size else 0.0
    for j in range(ns.shape[1]):
        v = ns[:, j]
        v = v[np.isfinite(v)]
        if v.size == 0:
            lo.append(None), hi.append(None), share.append(float("nan")), und.append(True)
            continue
        a = float(np.quantile(v, q, method="inverted_cdf"))
        b = float(np.quantile(v, 1 - q, method="inverted_cdf"))
        lo.append(a), hi.append(b)
        p = point[j]
        share.append(float(np.mean(v == float(p))) if p is not None else float("nan"))
        und.append(bool(span > 0 and (math.log2(b) - math.log2(a)) > UNDETERMINED_SPAN * span))
    return {"n_star": ns, "lo": lo, "hi": hi, "share": share, "undetermined": und}
