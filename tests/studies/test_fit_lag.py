"""Speed or ceiling (studies/fit/lag.py) on synthetic tables with known answers: a known compute lag recovered
within its interval and read as constant, a lower ceiling read as a lag that grows toward the top, a
different generalisation read as val at matched train reward, both at once, no overlap of reward ranges
said (not extrapolated), the lr x steps axis, and `fit --where` selecting one experiment of a store.

Curves are sigmoids in log2 C (`curve`), evaluated every half octave from one step (bp * n rollouts) to
2^22, 4 seeds, Gaussian noise of sd 0.004 per point plus a per-seed offset of sd 0.004 shared by every n
(runs of one seed are paired). Measured over 60 noise seeds (30-89): the lag of n = 16 (1 octave) and n = 64
(2 octaves) off by 0.001 on average, sd 0.01 octave; the 90% interval held the truth in 88% and 83% of them;
the trend read "constant" and the ceiling "same" in all."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from isocompute.cli import main
from studies.config import StudiesError
from studies.fit.lag import CONSTANT, LR_STEPS, SAME_VAL, lag_report, with_lr_steps
from studies.fit.render import print_lag
from studies.fit.report import fit_report
from studies.io import select_runs

BP = 16
SEEDS = 4


def curve(log2c: np.ndarray, shift: float = 0.0, start: float = 0.3, top: float = 0.9, mid: float = 12.0,
          width: float = 1.5) -> np.ndarray:
    """A learning curve: a sigmoid in log2 C from `start` to `top`, centred at mid + shift octaves."""
    return start + (top - start) / (1.0 + np.exp(-(log2c - shift - mid) / width))


def table(specs: dict, seeds: int = SEEDS, noise: float = 0.004, rng_seed: int = 0, c_max: float = 2.0**22
          ) -> pd.DataFrame:
    """{n: f(log2 C) -> (train, val)} as a learning-curve table: compute 0 and every half octave from one step
    to c_max; lr by the sqrt rule (base 1e-4 at batch 64), so lr x steps = 1e-4 * C / (8 sqrt(n)) at bp 16."""
    rng = np.random.default_rng(rng_seed)
    offsets = rng.normal(0.0, noise, seeds)
    rows = []
    for n, f in specs.items():
        batch = BP * n
        C = batch * 2.0 ** np.arange(0.0, math.log2(c_max / batch) + 1e-9, 0.5)
        for s in range(seeds):
            train, val = f(np.log2(C))
            lr = 1e-4 * math.sqrt(batch / 64)
            rows.append(pd.DataFrame({
                "run_id": f"n{n}-s{s}", "n": n, "bp": BP, "batch": batch, "seed": s, "lr": lr,
                "compute": np.r_[0.0, C],
                "train_mean": np.r_[train[0], train] + offsets[s] + rng.normal(0.0, noise, C.size + 1),
                "val_mean": np.r_[val[0], val] + offsets[s] + rng.normal(0.0, noise, C.size + 1),
            }))
    return pd.concat(rows, ignore_index=True)


def same(shift: float = 0.0, gap: float = 0.0, **kw):
    """f(log2 C) -> (train, val): `curve` shifted by `shift` octaves, val = train - gap."""
    return lambda x: (curve(x, shift, **kw), curve(x, shift, **kw) - gap)


def pair(report: dict, n: int) -> dict:
    return next(p for p in report["pairs"] if p["n"] == n)


def test_a_known_lag_is_recovered_within_its_interval_and_read_as_speed():
    rep = lag_report(table({4: same(), 16: same(1.0), 64: same(2.0)}))
    assert rep["status"] == "ok" and rep["reference"] == 4
    for n, shift in ((16, 1.0), (64, 2.0)):
        p = pair(rep, n)
        lag = p["lag"]
        lo, hi = lag["interval"]
        assert lo <= shift <= hi, (n, lag["lag"], lag["interval"])
        assert lag["lag"] == pytest.approx(shift, abs=0.05)
        assert hi - lo < 0.3  # an interval, not the whole axis
        assert lag["trend"] == "constant"
        assert p["ceiling"]["verdict"] == "same"
        assert p["text"].startswith(f"n = {n} is n = 4 delayed by {lag['lag']:.2f} octaves")
        assert p["text"].endswith("n changes speed, not ceiling")


def test_no_lag_reads_the_same_speed_not_a_delay():
    rep = lag_report(table({4: same(), 64: same()}))
    lag = pair(rep, 64)["lag"]
    assert abs(lag["lag"]) < 0.05 and lag["speed"] == "same"
    assert pair(rep, 64)["text"].startswith("n = 64 and n = 4: the same speed, lag ")
    assert pair(rep, 64)["text"].endswith(": the same curve")


def test_a_lower_ceiling_is_a_lag_that_grows_toward_the_top():
    # n = 64 rises to 0.75 where n = 4 rises to 0.9, on the same compute scale: it falls ever further behind
    rep = lag_report(table({4: same(), 64: same(0.0, top=0.75)}))
    lag = pair(rep, 64)["lag"]
    assert lag["trend"] == "grows" and lag["change_interval"][0] > CONSTANT
    assert lag["range"][1] == pytest.approx(0.75, abs=0.01)  # levels stop at the lower curve's top
    assert "falls further behind as the reward rises: a lower ceiling" in pair(rep, 64)["text"]
    # and the mirror image: n = 64 rising higher catches up toward the top of the common range
    up = lag_report(table({4: same(0.0, top=0.75), 64: same(2.0)}))
    assert pair(up, 64)["lag"]["trend"] == "shrinks"
    assert "catches up as the reward rises" in pair(up, 64)["text"]


def test_a_different_generalisation_is_read_as_val_at_matched_train_reward():
    # the same train curve, but n = 64's val sits 0.04 below its train reward and n = 4's does not
    rep = lag_report(table({4: same(), 64: same(0.0, gap=0.04)}))
    ceil = pair(rep, 64)["ceiling"]
    assert ceil["train"] == "train_mean" and ceil["verdict"] == "lower"
    lo, hi = ceil["interval"]
    assert lo <= -0.04 <= hi and hi < -SAME_VAL
    assert ceil["contrast"] == pytest.approx(-0.04, abs=0.01)


def test_a_lag_and_a_ceiling_difference_at_once():
    rep = lag_report(table({4: same(), 64: same(2.0, gap=0.04, top=0.8)}))
    p = pair(rep, 64)
    assert p["lag"]["interval"][0] > 1.5  # delayed
    assert p["lag"]["trend"] == "grows"
    assert p["ceiling"]["verdict"] == "lower"
    assert "delayed by" in p["text"] and "a lower ceiling" in p["text"]


def test_reward_ranges_that_do_not_overlap_are_said_not_extrapolated():
    rep = lag_report(table({4: same(top=0.5, start=0.2), 64: same(start=0.6, top=0.9)}))
    p = pair(rep, 64)
    assert p["lag"]["status"] == "no overlap" and "lag" not in p["lag"]
    assert "records do not overlap" in p["text"] and "nothing extrapolated" in p["text"]
    assert p["ceiling"]["status"] == "no overlap"
    lines: list[str] = []
    print_lag(rep, lines.append)
    assert any("do not overlap" in line for line in lines)


def test_lr_steps_is_the_trapezoid_of_the_lr_over_steps():
    t = pd.DataFrame({"run_id": ["a"] * 4, "compute": [0, 10, 20, 40], "batch": 10,
                      "lr": [1.0, 1.0, 3.0, 3.0]})
    assert with_lr_steps(t)[LR_STEPS].tolist() == [0.0, 1.0, 3.0, 9.0]
    assert LR_STEPS not in with_lr_steps(t.drop(columns="lr")).columns


def test_the_sqrt_rule_accounts_for_a_lag_of_two_octaves_at_n_64():
    # a curve that is a function of lr x steps: at bp 16 the sqrt rule gives n = 64 a quarter of n = 4's lr x
    # steps per rollout, so it lags 2 octaves of compute and not at all in lr x steps
    rep = lag_report(table({4: same(), 64: same(2.0)}))
    p = pair(rep, 64)
    lr = p["lr_steps"]
    assert lr["status"] == "ok" and lr["speed"] == "same" and abs(lr["lag"]) < 0.05
    assert p["lag"]["lag"] - lr["lag"] == pytest.approx(2.0, abs=1e-9)


def test_one_run_per_configuration_gives_no_interval_and_says_so():
    rep = lag_report(table({4: same(), 64: same(2.0)}, seeds=1))
    assert rep["status"] == "one run per configuration: no intervals"
    lag = pair(rep, 64)["lag"]
    assert lag["interval"] == [lag["lag"], lag["lag"]]


def test_fit_report_carries_the_lag_only_when_asked():
    t = table({4: same(), 64: same(2.0)})
    assert "lag" not in fit_report(t, extrapolate=False, reps=20)
    assert fit_report(t, extrapolate=False, reps=20, lag=True)["lag"]["pairs"][0]["n"] == 64


def test_select_runs_by_config_or_constant_column():
    t = table({4: same(), 64: same(2.0)})
    got = select_runs(t, {"seed": ["1", "2"], "n": ["64"]})
    assert sorted(got["run_id"].unique()) == ["n64-s1", "n64-s2"]
    t.attrs["configs"] = {r: {"n": int(r[1:].split("-")[0]), "seed": 0, "options": {"warmup": 10}}
                          for r in t["run_id"].unique()}
    assert set(select_runs(t, {"warmup": ["1e1"]})["run_id"]) == set(t["run_id"])  # an option, as a number
    with pytest.raises(StudiesError, match="selects no run"):
        select_runs(t, {"seed": ["3"]})  # the record says seed 0 for every run, whatever the column holds
    with pytest.raises(StudiesError, match="no run setting or column"):
        select_runs(t, {"dataset": ["easy"]})


def test_fit_where_selects_one_experiment_and_json_carries_the_lag(tmp_path):
    t = pd.concat([table({4: same(), 64: same(2.0)}).assign(dataset="easy"),
                   table({4: same(), 64: same(1.0)}, rng_seed=1).assign(dataset="hard")
                   .assign(run_id=lambda d: d["run_id"] + "-hard")], ignore_index=True).drop(columns="lr")
    path = tmp_path / "curves.csv"
    t.to_csv(path, index=False)
    runner = CliRunner()
    refused = runner.invoke(main, ["fit", str(path)])
    assert refused.exit_code == 2 and "differ in dataset" in refused.output
    r = runner.invoke(main, ["fit", str(path), "--where", "dataset=easy", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    lag = rep["lag"]["pairs"][0]["lag"]
    assert lag["lag"] == pytest.approx(2.0, abs=0.05) and lag["speed"] == "slower"
    text = runner.invoke(main, ["fit", str(path), "--where", "dataset=hard"])
    assert text.exit_code == 0 and "speed or ceiling:" in text.stdout
    assert "n = 64 is n = 4 delayed by" in text.stdout
    bad = runner.invoke(main, ["fit", str(path), "--where", "dataset"])
    assert bad.exit_code == 2 and "--where takes FIELD=VALUE" in bad.output
