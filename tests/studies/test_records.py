"""Record-breaking extractor (paper Section 4, Fig 5) on hand-made curves and against a plain loop."""

import numpy as np
import pandas as pd
import pytest

from studies.fit.records import record_breaking


def _run(values, run="r", compute=None):
    compute = np.arange(1, len(values) + 1) * 100.0 if compute is None else compute
    return pd.DataFrame({"run_id": run, "compute": compute, "val_mean": values})


def _kept(values, **kw):
    return record_breaking(_run(values), **kw)["val_mean"].tolist()


def test_increasing_keeps_every_new_bin():
    assert _kept([0.10, 0.20, 0.30, 0.40]) == [0.10, 0.20, 0.30, 0.40]


def test_flat_keeps_first_point_only():
    out = record_breaking(_run([0.5] * 6))
    assert out["compute"].tolist() == [100.0]


def test_decreasing_keeps_first_point_only():
    assert _kept([0.5, 0.4, 0.3, 0.2]) == [0.5]


def test_noisy_within_bin_is_not_a_record():
    # bins of 0.005: 100, 100, 100, 101, 100, 102 -> the first entries of bins 100, 101, 102
    vals = [0.500, 0.503, 0.501, 0.506, 0.5049, 0.512]
    assert _kept(vals) == [0.500, 0.506, 0.512]


def test_dip_then_recovery_needs_a_higher_bin_than_the_old_best():
    assert _kept([0.5, 0.3, 0.4, 0.502, 0.52]) == [0.5, 0.52]


def test_nan_points_are_skipped_and_do_not_count_as_earlier():
    vals = [np.nan, 0.2, np.nan, 0.3, 0.25, np.inf]
    out = record_breaking(_run(vals))
    assert out["val_mean"].tolist() == [0.2, 0.3]
    assert out["compute"].tolist() == [200.0, 400.0]


def test_bin_edges_are_robust_to_rounding():
    # 0.3 / 0.005 = 59.999... in floating point; 0.3 and 0.305 are in adjacent bins, 0.3049 is not
    assert _kept([0.3, 0.305]) == [0.3, 0.305]
    assert _kept([0.3, 0.3049]) == [0.3]
    assert _kept([0.3, 0.31], bin_width=0.01) == [0.3, 0.31]


def test_unsorted_input_and_several_runs():
    a = _run([0.1, 0.3, 0.2], run="a", compute=np.array([300.0, 100.0, 200.0]))  # sorted: 0.3, 0.2, 0.1
    b = _run([0.1, 0.2, 0.3], run="b")
    out = record_breaking(pd.concat([a, b]))
    assert out.loc[out.run_id == "a", "val_mean"].tolist() == [0.3]
    assert out.loc[out.run_id == "b", "val_mean"].tolist() == [0.1, 0.2, 0.3]


def test_empty_and_all_nan_runs():
    assert record_breaking(_run([np.nan, np.nan])).empty
    assert record_breaking(_run([])).empty


def test_bad_arguments_raise_one_line_errors():
    with pytest.raises(ValueError, match="bin_width"):
        record_breaking(_run([0.1]), bin_width=0)
    with pytest.raises(ValueError, match="lacks column"):
        record_breaking(_run([0.1]), metric="val_best_k")


def test_vectorised_equals_reference_loop():
    rng = np.random.default_rng(3)
    parts = []
    for r in range(40):
        v = np.cumsum(rng.normal(0.002, 0.01, 50))
        v[rng.random(50) < 0.05] = np.nan
        parts.append(_run(v, run=f"r{r}"))
    table = pd.concat(parts, ignore_index=True)
    got = record_breaking(table, bin_width=0.005)
    want = []
    for _r, g in table.groupby("run_id", sort=True):
        best = -np.inf
        for i, v in zip(g.index, g["val_mean"], strict=True):
            if not np.isfinite(v):
                continue
            k = np.floor(v / 0.005 + 1e-9)
            if k > best:
                want.append(i)
                best = k
    assert sorted(got.index) == sorted(want)
