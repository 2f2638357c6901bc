"""Seed-bootstrap interval of n*(C) (studies/fit/bootstrap.py) on synthetic curves with a known n*.

Tolerances: the vectorised refit must give the n* of `FrontierFit` refitted on the same resampled seeds on
>= 90% of (replicate, budget) cells (the two optimisers start differently: three grid starts vs the point
fit); the 95% interval must cover the true n* on at least 95% - 3 Monte-Carlo SE of (data set, budget) cells
(n* is discrete, so the percentile interval is conservative rather than exact; measured 0.984 over 40 data
sets x 8 budgets) and, at the budget where n* is hardest, the 50% interval must cover clearly less often, so
the check can fail.
"""

import numpy as np
import pandas as pd
import pytest
from synthetic_curves import synthetic_table

from studies.fit.bootstrap import bootstrap_n_star, seed_weights, summarise
from studies.fit.frontier import FrontierFit
from studies.fit.sigmoid import sigmoid

BP = 32
SPECS = {  # as tests/studies/test_frontier.py: n*(C) rises from 4 to 64
    4: (0.25, 0.52, 1e4, 1.5),
    8: (0.25, 0.60, 3e4, 1.3),
    16: (0.25, 0.66, 1e5, 1.1),
    32: (0.25, 0.70, 3e5, 1.0),
    64: (0.25, 0.73, 1e6, 0.9),
}
C = np.geomspace(2e4, 5e7, 8)


def _true_n_star(C):
    keys = np.array(list(SPECS))
    T = np.array([sigmoid(C, *SPECS[k]) for k in keys])
    for i, k in enumerate(keys):
        T[i, C < BP * k] = -np.inf
    return keys[T.argmax(0)]


def _resampled(table, counts):
    parts = []
    for s, cnt in enumerate(counts):
        for c in range(int(cnt)):
            g = table.loc[table["seed"] == s].copy()
            g["run_id"] = g["run_id"] + f"-copy{c}"
            parts.append(g)
    return pd.concat(parts, ignore_index=True)


def test_vectorised_refit_matches_refitting_frontierfit():
    t = synthetic_table(SPECS, seeds=6, points=30, noise=0.03, rng=np.random.default_rng(3))
    ff = FrontierFit().fit(t)
    same = bootstrap_n_star(ff, t, C, weights=np.ones((1, 6)))
    np.testing.assert_array_equal(same["n_star"][0], ff.envelope_at(C)["n"].to_numpy(dtype=float))
    W = seed_weights(6, 5, np.random.default_rng(0))
    vec = bootstrap_n_star(ff, t, C, weights=W)["n_star"]
    ref = np.array([FrontierFit().fit(_resampled(t, w)).envelope_at(C)["n"].to_numpy(dtype=float)
                    for w in W])
    assert np.mean(vec == ref) >= 0.9


def test_interval_covers_a_known_n_star_at_the_nominal_rate():
    D, S, REPS = 40, 6, 100
    rng = np.random.default_rng(1)
    parts = []
    for d in range(D):
        t = synthetic_table(SPECS, seeds=S, points=24, noise=0.03, rng=rng)
        parts.append(t.assign(seed=t["seed"] + d * S, run_id=t["run_id"] + f"-d{d}"))
    big = pd.concat(parts, ignore_index=True)
    ff = FrontierFit().fit(parts[0])  # only the start values of the refits
    # one call for all data sets: replicate rows of data set d draw only d's seeds
    W = np.zeros((D * REPS, D * S))
    for d in range(D):
        W[d * REPS:(d + 1) * REPS, d * S:(d + 1) * S] = seed_weights(S, REPS, np.random.default_rng(d))
    ns = bootstrap_n_star(ff, big, C, weights=W)["n_star"]
    true = _true_n_star(C)
    cover = {0.95: [], 0.5: []}
    wide = []
    for d in range(D):
        for level in cover:
            s = summarise(ns[d * REPS:(d + 1) * REPS], [None] * C.size, list(SPECS), level)
            lo, hi = np.array(s["lo"]), np.array(s["hi"])
            cover[level].append((lo <= true) & (true <= hi))
            if level == 0.95:
                wide.append(hi > lo)
    c95, c50 = np.mean(cover[0.95]), np.mean(cover[0.5])
    se = np.sqrt(0.95 * 0.05 / (D * C.size))
    assert c95 >= 0.95 - 3 * se, c95  # measured 0.984 (n* is discrete: the interval is conservative)
    # where n* is hardest to pin down, a 50% interval covers clearly less often (measured 0.57 vs 0.88):
    # the check has teeth
    per95, per50 = np.mean(cover[0.95], axis=0), np.mean(cover[0.5], axis=0)
    j = int(np.argmin(per95))
    assert per50[j] < per95[j] - 0.15 and c50 < c95, (per50, per95)
    assert 0.2 < np.mean(wide) < 0.9  # the data leave n* uncertain at some budgets, not all (measured 0.55)


def test_undetermined_where_configurations_tie():
    same = {n: (0.25, 0.6, 1e5, 1.0) for n in (4, 8, 16, 32, 64)}
    t = synthetic_table(same, seeds=6, points=30, noise=0.02, rng=np.random.default_rng(0))
    ff = FrontierFit().fit(t)
    out = bootstrap_n_star(ff, t, [3e6, 5e7], reps=100)
    assert all(out["undetermined"]), out
    clear = bootstrap_n_star(FrontierFit().fit(synthetic_table(SPECS, seeds=6, points=30, noise=0.005,
                                                               rng=np.random.default_rng(0))),
                             synthetic_table(SPECS, seeds=6, points=30, noise=0.005,
                                             rng=np.random.default_rng(0)), [5e7], reps=50)
    assert clear["lo"] == clear["hi"] == [64.0] and clear["undetermined"] == [False]


def test_bootstrap_refuses_pooled_fits_and_missing_seeds():
    t = synthetic_table(SPECS, seeds=2, points=20)
    with pytest.raises(ValueError, match="seed column"):
        bootstrap_n_star(FrontierFit().fit(t), t.drop(columns="seed"), C)
    with pytest.raises(ValueError, match="mean"):
        bootstrap_n_star(FrontierFit(aggregate="pool").fit(t), t, C)
