"""`isocompute plan` (studies.fit.plan): recommendations from pilot runs whose true curves are known."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic_curves import synthetic_table

from isocompute.cli import main
from studies.config import StudiesError
from studies.fit.nstar import REPS
from studies.fit.plan import make_plan
from studies.fit.sigmoid import sigmoid

# larger n: higher plateau, reached later -> the compute-optimal n grows with C (docs/PAPER.md finding 1)
SPECS = {2: (0.1, 0.55, 2e3, 1.5), 4: (0.1, 0.65, 5e3, 1.5), 8: (0.1, 0.75, 1.5e4, 1.5),
         16: (0.1, 0.85, 5e4, 1.5)}


def true_best(C):
    return max(SPECS, key=lambda n: sigmoid(np.array([C]), *SPECS[n])[0])


@pytest.fixture(scope="module")
def table():
    return synthetic_table(SPECS, seeds=4, points=40, c_max=1e6, bp=32, noise=0.003,
                           rng=np.random.default_rng(1))


def test_plan_recommends_the_true_best_n_inside_the_pilots_and_says_how_sure(table):
    for C in (3e4, 1e6):
        p = make_plan(table, C, bootstrap=30)
        r = p["recommended"]
        assert r["n"] == true_best(C), (C, r)
        assert r["bp"] == 32 and r["m"] == int(C // (32 * r["n"])) and r["batch"] == 32 * r["n"]
        lo, hi = p["n_interval"]
        assert lo <= r["n"] <= hi
        exp = sigmoid(np.array([C]), *SPECS[r["n"]])[0]
        assert p["expected_reward"] == pytest.approx(exp, abs=0.02)
        assert p["reward_interval"][0] - 0.01 <= exp <= p["reward_interval"][1] + 0.01
        # inside the pilots nothing is refitted: the set is measured, runs resampled as `fit` does
        assert p["inside_pilots"] and p["bootstrap"]["ok"] == p["bootstrap"]["reps"] == REPS
        assert p["pilots"]["runs_per_n"] == {"2": 4, "4": 4, "8": 4, "16": 4}
        assert not any("more than 4x" in w for w in p["warnings"])


def test_plan_beyond_the_pilots_warns_and_reports_the_pilots_own_extrapolation_error(table):
    p = make_plan(table, 2**23, max_compute=1e5, bootstrap=10)
    assert p["pilots"]["max_compute"] <= 1e5
    assert p["extrapolation_factor"] == pytest.approx(2**23 / p["pilots"]["max_compute"])
    assert any("more than 4x" in w for w in p["warnings"])
    ex = p["extrapolation_check"]
    assert ex["frac"] == pytest.approx(max(1 / 64, p["pilots"]["max_compute"] / 2**23))
    assert "mean_abs_error_steps" in ex


def test_plan_bp_max_caps_bp_and_single_runs_give_no_interval(table):
    p = make_plan(table, 1e5, bp_max=8, bootstrap=5)
    assert p["recommended"]["bp"] == 8 and any("--bp-max" in w for w in p["warnings"])
    one = table.loc[table["seed"] == 0]
    p = make_plan(one, 1e5, bootstrap=5)
    assert p["reward_interval"] == [None, None] and any(">= 2 runs" in w for w in p["warnings"])
    with pytest.raises(StudiesError, match="one value of n"):
        make_plan(table.loc[table["n"] == 4], 1e5)


def test_plan_cli_prints_one_json_object(table, tmp_path):
    f = tmp_path / "pilots.csv"
    table.to_csv(f, index=False)
    r = CliRunner().invoke(main, ["plan", str(f), "--budget", "2^17", "--bootstrap", "10", "--json"])
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)
    assert p["recommended"]["n"] == true_best(2**17) and p["budget"] == 2**17
    r = CliRunner().invoke(main, ["plan", str(f), "--budget", "2^17", "--bootstrap", "5"])
    assert r.exit_code == 0 and "recommended: n = " in r.output
    r = CliRunner().invoke(main, ["plan", str(f), "--budget", "-3"])
    assert r.exit_code == 2
