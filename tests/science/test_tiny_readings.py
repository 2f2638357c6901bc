"""isocompute.reports.tiny_readings: the interpolated record reading against a hand computation, the step
reading beside it, the plateau arithmetic on known lines, and the contrasts' pairing by seed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from isocompute.reports.claims.groupstd import records
from isocompute.reports.tiny_readings import contrasts, gains, interp_records, plateau_at


def curve(run: str, n: int, seed: int, points: dict[float, float]) -> pd.DataFrame:
    return pd.DataFrame({"run_id": run, "n": n, "seed": seed, "compute": list(points),
                         "val_mean": list(points.values())})


def test_interpolated_record_is_linear_in_log2_compute():
    """Between evaluations at 2^10 (0.4) and 2^12 (0.6) the record at 2^11 reads 0.5 interpolated and 0.4
    stepwise; a dip after a record keeps the record; past the last point the last record."""
    t = curve("a", 4, 0, {0: 0.1, 1024: 0.4, 4096: 0.6, 8192: 0.55})
    r = interp_records(t, [2048, 4096, 6000, 2**20]).set_index("budget")["reward"]
    assert r[2048] == pytest.approx(0.5)
    assert r[4096] == pytest.approx(0.6) and r[6000] == pytest.approx(0.6) and r[2**20] == pytest.approx(0.6)
    step = records(t, [2048], "val_mean", keys=("n", "seed"))
    assert step["reward"].iloc[0] == pytest.approx(0.4)


def test_before_the_first_point_reads_step_zero():
    t = curve("a", 4, 0, {0: 0.2, 1024: 0.4})
    assert interp_records(t, [512])["reward"].iloc[0] == pytest.approx(0.2)


def test_plateau_arithmetic_on_a_known_line():
    """Gains falling by 0.015 per octave from 0.07 at 2^17: 0.01 is reached at 2^21."""
    gs = [{"budget": 2.0**e, "gain": 0.07 - 0.015 * (e - 17)} for e in range(17, 21)]
    assert plateau_at(gs) == pytest.approx(21.0)
    rising = [{"budget": 2.0**e, "gain": 0.02 + 0.01 * (e - 17)} for e in range(17, 21)]
    assert plateau_at(rising) is None
    assert plateau_at(gs[:1]) is None


def test_contrasts_pair_by_seed_and_gains_read_octaves():
    """Two seeds whose offsets cancel in the paired difference: the contrast is exact with a zero-width
    interval; a gain is the seed-mean record at C minus at C/2."""
    rows = []
    for s, off in ((0, 0.0), (1, 0.2)):
        rows.append(curve(f"4-{s}", 4, s, {0: 0.1 + off, 1024: 0.5 + off, 2048: 0.6 + off}))
        rows.append(curve(f"16-{s}", 16, s, {0: 0.1 + off, 1024: 0.45 + off, 2048: 0.58 + off}))
    t = pd.concat(rows, ignore_index=True)
    rec = interp_records(t, [1024, 2048])
    c = contrasts(rec, [2048], [4, 16])[0]
    assert c["mean"] == pytest.approx(-0.02) and c["hi"] - c["lo"] == pytest.approx(0.0, abs=1e-12)
    g = gains(rec, [2048], 4)[0]
    assert g["gain"] == pytest.approx(0.1)
    assert np.isfinite(c["lo"])
