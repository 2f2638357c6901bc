"""`isocompute predict`: the zero-variance rule on a synthetic world where the true rule is known,
its pieces exactly, and both command forms on tiny simulated pilots.

The synthetic world: n*(C) = (C / C0)^(1/gamma) (continuous); zero_var_frac z(n, C) = logistic((ln C - ln C0
- gamma ln n) / w), so every n reaches z* = 1/2 exactly when it becomes optimal; reward R(n, C) = 0.3 +
s ln(C / 1e3) - kappa (ln n - ln n*(C))^2 (the optimum n's curve is the highest, smaller n fall behind).
Pilots see C <= 5% of the budget only; the rule must recover gamma and n*(C) beyond them.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from studies.fit.predict import (
    SignalRule,
    crossing,
    hit_rate,
    predict_from_table,
    prediction_grid,
    snap,
    swept_n_star,
    upper_mask,
)

GAMMA, C0, W = 1.6, 200.0, 0.5
S, KAPPA = 0.03, 0.02
NS = [2, 4, 8, 16, 32, 64, 128, 256]
BUDGET = 2**20
BP = 32


def true_n_star(C):
    return (np.asarray(C, dtype=float) / C0) ** (1 / GAMMA)


def world(c_max: float, seeds: int = 3, points: int = 40, noise: float = 0.002, seed: int = 0
          ) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for n in NS:
        C = np.geomspace(BP * n, c_max, points)
        ln_star = np.log(true_n_star(C))
        R = 0.3 + S * np.log(C / 1e3) - KAPPA * (np.log(n) - ln_star) ** 2
        z = 1 / (1 + np.exp(-(np.log(C) - np.log(C0) - GAMMA * np.log(n)) / W))
        for s in range(seeds):
            parts.append(pd.DataFrame({"run_id": f"n{n}-s{s}", "compute": C, "n": n, "bp": BP, "seed": s,
                                       "val_mean": R + rng.normal(0, noise, C.size),
                                       "zero_var_frac": np.clip(z + rng.normal(0, noise, C.size), 0, 1)}))
    return pd.concat(parts, ignore_index=True)


def test_grid_and_helpers():
    C = prediction_grid(2**20)
    assert C.size == 21 and C[-1] == 2**20 and C[0] == 2**10
    up = upper_mask(C)
    assert up[-1] and not up[0] and up.sum() == 15  # the upper 70% of 10 octaves: 7 octaves, 2 points each
    assert snap(np.array([3.0, 5.9, 300.0]), [2, 4, 8, 256]).tolist() == [4.0, 8.0, 256.0]
    C = np.array([1.0, 10.0, 100.0])
    assert crossing(C, np.array([0.1, 0.3, 0.9]), 0.5) == pytest.approx(10 ** (1 + 1 / 3))
    assert crossing(C, np.array([0.6, 0.7, 0.9]), 0.5) is None  # above already at the first point
    assert crossing(C, np.array([0.1, 0.2, 0.3]), 0.5) is None
    h = hit_rate([4, 8, 64], [4, 32, 64], np.array([1.0, 10.0, 100.0]))
    assert h["points"] == 2 and h["hit_rate"] == 0.5  # the upper 70% holds 10 and 100; 8 vs 32 misses


def test_signal_rule_recovers_the_known_rule_beyond_the_pilots():
    pilots = world(0.05 * BUDGET)
    rule = SignalRule().fit(pilots)
    assert rule.ok_, rule.status_
    # the chosen n lies on a factor-2 grid, so its z along the frontier lies in logistic(+-gamma ln sqrt2 / W)
    band = 1 / (1 + math.exp(GAMMA * math.log(2) / (2 * W)))
    assert band < rule.z_star_ < 1 - band
    assert rule.gamma_ == pytest.approx(GAMMA, rel=0.1)
    rep = predict_from_table(pilots, BUDGET)
    assert rep["rule"] == "signal"
    C = np.array([p["compute"] for p in rep["n_star"]])
    truth = snap(np.clip(true_n_star(C), 2, 256), NS)
    pred = [p["n"] for p in rep["n_star"]]
    assert hit_rate(pred, truth, C)["hit_rate"] >= 0.9, (pred, truth.tolist())
    swept = swept_n_star(world(BUDGET), C)  # the estimator `evaluate` scores against
    assert hit_rate(pred, swept, C)["hit_rate"] >= 0.9, (pred, swept.tolist())
    assert C.max() == BUDGET and rep["pilots"]["fraction"] <= 0.05 + 1e-9
    assert max(pred) >= 128  # the rule reaches far beyond the pilot frontier's n*
    assert max(p["n"] for p in rep["pilots"]["frontier"]) <= 64


def test_fixed_level_and_missing_column():
    pilots = world(0.05 * BUDGET)
    rule = SignalRule(z_star=0.5).fit(pilots)
    assert rule.z_star_ == 0.5 and rule.a_ == pytest.approx(math.log(C0), abs=0.3)
    rep = predict_from_table(pilots.drop(columns="zero_var_frac"), BUDGET)
    assert rep["rule"] == "paper" and "zero_var_frac" in rep["status"]["signal"]


@pytest.fixture(scope="module")
def pilot_dir(tmp_path_factory):
    from isocompute.cli import main

    out = tmp_path_factory.mktemp("pilots")
    args = ["predict", "--backend", "sim", "--model", "interference", "--n", "2,4,8", "--bp", "8",
            "--budget", "2^14", "--pilot-fraction", "0.25", "--seeds", "1", "--d", "64", "--d-val", "64",
            "--jobs", "1", "--out", str(out), "--json", "--no-progress"]
    res = CliRunner().invoke(main, args, catch_exceptions=False, standalone_mode=False)
    return out, json.loads(res.output.strip().splitlines()[-1])


def test_predict_runs_pilots_within_the_fraction(pilot_dir):
    out, rep = pilot_dir
    assert rep["budget"] == 2**14 and rep["pilots"]["fraction"] <= 0.25
    assert [p["compute"] for p in rep["n_star"]][-1] == 2**14
    assert all(p["n"] in (2, 4, 8) for p in rep["n_star"])
    assert set(rep["alternatives"]) == {"signal", "paper"}


def test_predict_from_results_dir_equals_the_run_form(pilot_dir):
    from isocompute.cli import main

    out, rep = pilot_dir
    res = CliRunner().invoke(main, ["predict", str(out), "--budget", "2^14", "--json"],
                             catch_exceptions=False, standalone_mode=False)
    again = json.loads(res.output.strip().splitlines()[-1])
    assert again["n_star"] == rep["n_star"]


def test_the_cli_states_the_rules_and_pilot_fraction_of_the_module():
    """studies.cli keeps pandas out of start-up: it names predict's rules itself, and reads the default
    fraction from the module only when the help is shown."""
    from studies import cli
    from studies.fit import predict

    assert cli.PREDICT_RULES == predict.RULES
    fraction = next(p for p in cli.predict.params if p.name == "pilot_fraction")
    assert fraction.default is None and str(predict.PILOT_FRACTION) in fraction.code_default()


def test_report_predict_refuses_an_unknown_case_in_one_line(tmp_path):
    from isocompute.cli import main

    res = CliRunner().invoke(main, ["report", "predict", "--cases", "nope", "--out", str(tmp_path / "p.md"),
                                    "--results", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "unknown case(s) ['nope']" in res.output and not (tmp_path / "r").exists()
