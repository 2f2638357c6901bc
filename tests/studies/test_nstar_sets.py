"""n*(C) as a set (studies/fit/nstar.py) on synthetic tables whose answer is known, through every reader:
`fit` (JSON and text), `plot`, `plan` and the claims report.

Three tables (synthetic_curves.synthetic_table, log-spaced evaluations from one step to c_max):
- PLATEAU: n = 2, 4, 8, 16 on one curve saturating at 0.70 (n = 2 never worse), 3 seeds, noise sd 0.01. No
  n is better than another at any compute: nothing may report a rise, and plan must recommend the smallest
  n or the set. The paper's reading (the arg-max of the fitted envelope) and the plain arg-max of the
  measured records both show a rise on these tables (asserted below), so the tests fail if either comes back.
- RISE: n = 4..64, larger n plateau higher and later (true n* 4 -> 64), 4 seeds, noise 0.005: the rise must
  be reported with its factor, and the best's interval must hold the true reward.
- NOISY_RISE: the same shape with plateaus 0.005 apart, 3 seeds, noise 0.03: the seeds cannot resolve it, so
  no rise, and n* at the largest compute is a set of several n.
Measured over noise draws of these tables (the parameters above): no rise on 40 PLATEAU draws (and none on 40
with 8 seeds), the rise on 10 of 10 RISE draws, none on 20 NOISY_RISE draws.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic_curves import synthetic_table

from isocompute.cli import main
from studies.fit.frontier import FrontierFit
from studies.fit.nstar import (
    NStar,
    change,
    intervals,
    record_samples,
    set_text,
    small_sample_factor,
)
from studies.fit.plan import make_plan
from studies.fit.plots import plot_frontier
from studies.fit.report import fit_report
from studies.fit.sigmoid import sigmoid

PLATEAU = {n: (0.2, 0.70, 3e3, 1.5) for n in (2, 4, 8, 16)}
RISE = {4: (0.25, 0.52, 1e4, 1.5), 8: (0.25, 0.60, 3e4, 1.3), 16: (0.25, 0.66, 1e5, 1.1),
        32: (0.25, 0.70, 3e5, 1.0), 64: (0.25, 0.73, 1e6, 0.9)}
NOISY_RISE = {4: (0.25, 0.600, 1e4, 1.5), 8: (0.25, 0.605, 3e4, 1.3), 16: (0.25, 0.61, 1e5, 1.1),
              32: (0.25, 0.615, 3e5, 1.0), 64: (0.25, 0.62, 1e6, 0.9)}


def plateau(seed: int = 0):
    return synthetic_table(PLATEAU, seeds=3, points=30, c_max=2**18, noise=0.01,
                           rng=np.random.default_rng(seed))


def rise(seed: int = 0):
    return synthetic_table(RISE, seeds=4, points=30, noise=0.005, rng=np.random.default_rng(seed))


def noisy_rise(seed: int = 0):
    return synthetic_table(NOISY_RISE, seeds=3, points=30, noise=0.03, rng=np.random.default_rng(seed))


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# ------------------------------------------------------------------------------------------ the estimator
def test_a_rise_needs_every_later_set_above_the_earlier_one():
    C = [1, 2, 3, 4]
    up = change(C, [[2], [2, 4], [8], [8, 16]], [4, 4, 4, 4])
    assert up["rise"]["factor"] == 4 and up["rise"]["from"]["set"] == [2] and up["fall"] is None
    back = change(C, [[2], [8], [16], [2, 16]], [4, 4, 4, 4])  # the last set falls back to 2: no rise
    assert back["rise"] is None
    alone = change(C, [[2], [8], [8], [8]], [1, 4, 4, 4])  # the first compute had one competitor only
    assert alone["rise"] is None
    down = change(C, [[16], [16], [2], [2, 4]], [4, 4, 4, 4])
    assert down["fall"]["factor"] == 4 and down["rise"] is None
    assert change(C, [["a"], ["b"], ["b"], ["b"]], [2, 2, 2, 2]) == {"rise": None, "fall": None}


def test_set_text_joins_neighbours_on_the_grid_only():
    grid = [2, 4, 8, 16, 32]
    assert set_text([4], grid) == "4" and set_text([2, 4, 8], grid) == "2-8"
    assert set_text([2, 8, 16], grid) == "2,8-16" and set_text([2, 8, 16]) == "2,8,16"


def test_small_samples_widen_the_interval_and_many_do_not():
    assert small_sample_factor(3) > 2 > small_sample_factor(4) > small_sample_factor(8) > 1
    assert small_sample_factor(200) < 1.02 and small_sample_factor(1) == 1.0


def test_a_curve_is_read_between_its_evaluations_so_where_it_was_evaluated_does_not_pick_n_star():
    """Two n on one rising curve, evaluated at different computes: at a compute between n = 2's points the
    record is read on the line between them, not held at the last one (which would hand the win to whichever
    n happened to be evaluated just below)."""
    import pandas as pd

    rows = [{"run_id": "a", "compute": c, "n": 2, "val_mean": v} for c, v in ((100, 0.1), (1000, 0.5))]
    rows += [{"run_id": "b", "compute": c, "n": 4, "val_mean": v} for c, v in ((300, 0.3), (3000, 0.7))]
    keys, point, _ = record_samples(pd.DataFrame(rows), "val_mean", "n", [300.0], reps=0)
    np.testing.assert_allclose(point[0], [0.1 + 0.4 * np.log(3) / np.log(10), 0.3])


def test_sets_hold_every_configuration_that_qualifies_and_one_computation_gives_every_number():
    """No qualifying n is skipped (the sets are exactly the rule's), and each frontier row's reward, interval,
    best and set come from one NStar, with the certainty line equal to the last row."""
    t = noisy_rise(1)
    rep = fit_report(t, extrapolate=False)
    ff = FrontierFit().fit(t)
    ns: NStar = ff.nstar_
    lo, hi = intervals(ns.point, ns.samples, ns.level)
    for j, f in enumerate(rep["frontier"]):
        k = ns.keys.index(f["n"])
        assert f["reward"] == pytest.approx(ns.point[j, k]) == pytest.approx(max(np.nanmax(ns.point[j]), -1))
        assert f["reward_interval"] == pytest.approx([lo[j, k], hi[j, k]])
        qual = [v for i, v in enumerate(ns.keys) if np.isfinite(ns.point[j, i])
                and (hi[j, i] >= lo[j, k] or ns.point[j, k] - ns.point[j, i] <= 0.005)]
        assert f["set"] == qual and f["n"] in f["set"]
        assert f["reward_interval"][0] <= f["reward"] <= f["reward_interval"][1]
    last, cert = rep["frontier"][-1], rep["certainty"]
    assert (cert["n_star"], cert["flat_set"], cert["reward_interval"]) == (last["n"], last["set"],
                                                                           last["reward_interval"])


# ------------------------------------------------------------------------------------ all on one plateau
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plateau_reports_no_rise_anywhere_though_the_arg_max_would(seed):
    t = plateau(seed)
    ff = FrontierFit().fit(t)
    env = ff.envelope_at(ff.grid_)["n"].to_numpy(dtype=float)
    best = np.array(ff.nstar_.best, dtype=float)
    assert env.max() > env.min() and best[1:].max() > 2  # the paper's reading and the plain arg-max move
    rep = fit_report(t)
    assert rep["n_star"]["change"] == {"rise": None, "fall": None}
    assert rep["n_star_fit"]["shape"] == "flat"
    assert not any(f["determined"] and f["n"] > 2 for f in rep["frontier"])
    assert rep["frontier"][-1]["set"] == [2, 4, 8, 16] and rep["frontier"][-1]["tie"]
    assert rep["certainty"]["edge"] is None  # no "extend the grid" for a tie that includes every n


def test_plateau_through_the_cli_plot_plan_and_claims(tmp_path):
    from isocompute.reports.claims.common import growth, n_star_rows

    t = plateau(0)
    path = tmp_path / "plateau.csv"
    t.to_csv(path, index=False)
    text = invoke("fit", path).stdout
    assert "no determined rise of n*" in text and " rises " not in text
    assert "sigmoid on the" not in text and "log2 n* vs log C: flat" in text
    assert "within it: n = 2-16" in text and "extend the grid" not in text
    fig = plot_frontier(t)
    assert not any("sigmoid fit" in ln.get_label() for ln in fig.axes[1].get_lines())
    assert "no determined rise" in " ".join(x.get_text() for x in fig.axes[1].texts)
    for budget in (2**15, 2**20):  # inside the pilots, and beyond them (the demo's 2^20)
        p = make_plan(t, budget, bootstrap=20)
        assert p["recommended"]["n"] == 2 and set(p["recommended_set"]) >= {2, 4, 8, 16}
        assert not any("extend the grid" in w for w in p["warnings"])
    rows = n_star_rows(t, [2**12, 2**14, 2**16, 2**18])
    assert growth(rows) == 1.0 and all(2 in r["set"] for r in rows) and rows[-1]["set"] == [2, 4, 8, 16]


# ------------------------------------------------------------------------------------------------ a true rise
def test_a_true_rise_is_reported_with_its_factor_and_interval():
    from isocompute.reports.claims.common import growth, n_star_rows

    t = rise(0)
    rep = fit_report(t)
    r = rep["n_star"]["change"]["rise"]
    assert r["from"]["set"] == [4] and r["to"]["set"] == [64] and r["factor"] == 16
    assert rep["n_star_fit"]["shape"] == "sigmoid" and rep["n_star"]["change"]["fall"] is None
    last = rep["frontier"][-1]
    true = sigmoid(last["compute"], *RISE[64])
    assert last["set"] == [64] and last["reward_interval"][0] <= true <= last["reward_interval"][1]
    text = invoke_fit_text(t)
    assert "n* rises from {4} at C = 2^11 to {64}" in text and "(at least 16x)" in text
    rows = n_star_rows(t, [2e3, 2e4, 2e5, 2e6, 1e8])
    assert rows[1]["set"] == [4] and rows[-1]["set"] == [64] and growth(rows) == 16


def invoke_fit_text(t):
    from studies.files import jsonable
    from studies.fit.render import print_fit_report

    lines: list[str] = []
    print_fit_report(jsonable(fit_report(t)), lines.append)
    return "\n".join(lines)


# ------------------------------------------------------------------------ a rise the seeds cannot resolve
@pytest.mark.parametrize("seed", [0, 1])
def test_a_noisy_rise_is_undetermined(seed):
    t = noisy_rise(seed)
    true = {n: sigmoid(1e8, *spec) for n, spec in NOISY_RISE.items()}
    assert max(true, key=true.get) == 64 and true[64] - true[4] < 0.025  # a rise, smaller than the noise
    rep = fit_report(t)
    assert rep["n_star"]["change"]["rise"] is None and rep["n_star_fit"]["shape"] == "flat"
    assert len(rep["frontier"][-1]["set"]) >= 3
    assert "no determined rise" in invoke_fit_text(t)


# ---------------------------------------------------------------------------------------- degenerate fits
def test_degenerate_fits_are_said_first_and_leave_no_n_star_fit_or_verdict(tmp_path):
    """A sweep with three evaluations per run (the README's tiny LLM sweep): the first line says the per-n
    fits are degenerate, and no n*(C) fit or extrapolation verdict follows; --json carries the same."""
    t = synthetic_table({2: (0.3, 0.6, 200, 1.5), 4: (0.3, 0.62, 300, 1.5)}, seeds=2, points=3, c_max=512,
                        bp=2, noise=0.01, rng=np.random.default_rng(0))
    path = tmp_path / "llm.csv"
    t.to_csv(path, index=False)
    r = invoke("fit", path)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("every per-n sigmoid fit(s) degenerate")
    assert "too few record-breaking points" in lines[0]
    assert not any(ln.startswith(("log2 n*", "extrapolation")) for ln in lines)
    assert len([ln for ln in lines if ln[:12].strip() and ln.split()[0][0].isdigit()]) <= 3 * 2
    rep = json.loads(invoke("fit", path, "--json").stdout)
    assert rep["fits"]["usable"] is False and set(rep["fits"]["degenerate"]) == {"2", "4"}
    assert rep["n_star_fit"]["status"].startswith("not fitted") and rep["n_star_fit"]["params"] is None
    assert rep["extrapolation"]["status"].startswith("not checked")
    assert "predictable" not in rep["extrapolation"]


# ------------------------------------------------------------------------------------------------------ plan
def test_plan_is_coherent_with_fit(tmp_path):
    """The recommended n is in the set; its expected reward is never below what the pilots measured for it
    at lower compute; inside the pilots nothing says "extrapolation"; beyond them predictability is worded
    by fit's own function; progress is reported."""
    from studies.fit.extrapolation import extrapolation_verdict
    from studies.fit.plan import print_plan

    t = rise(0)
    seen = []
    inside = make_plan(t, 2**20, bootstrap=10, progress=lambda what, d, n: seen.append(what))
    assert inside["inside_pilots"] and inside["recommended"]["n"] in inside["recommended_set"]
    assert inside["extrapolation_check"] is None and seen
    lines: list[str] = []
    print_plan(inside, echo=lines.append)
    assert not any("extrapolation" in ln for ln in lines) and any("inside the pilots" in ln for ln in lines)
    cap = 2**21
    seen.clear()
    beyond = make_plan(t, 2**24, max_compute=cap, bootstrap=10, progress=lambda what, d, n: seen.append(d))
    n = beyond["recommended"]["n"]
    assert n in beyond["recommended_set"] and len(seen) >= 10
    own = t.loc[(t["n"] == n) & (t["compute"] <= cap)].groupby("compute")["val_mean"].mean().max()
    assert beyond["expected_reward"] >= own - 1e-12
    lines = []
    print_plan(beyond, echo=lines.append)
    assert any(extrapolation_verdict(beyond["extrapolation_check"]) in ln for ln in lines)
    r = invoke_plan_cli(tmp_path, t)
    assert r.exit_code == 0 and "plan: bootstrap refits" in r.stderr
    assert json.loads(r.stdout)["budget"] == 2**24


def invoke_plan_cli(tmp_path, t):
    path = tmp_path / "pilots.csv"
    t.to_csv(path, index=False)
    return invoke("plan", path, "--budget", "2^24", "--max-compute", "2^21", "--bootstrap", "4", "--json")


# ------------------------------------------------------------------------------------------------------ help
def test_help_defaults_are_read_from_the_code_that_applies_them():
    from llm_backend.config import TINY_DEFAULTS, LLMConfig
    from sandbox.config import SimConfig

    text = " ".join(invoke("run", "--help").stdout.split())
    assert f"sim {SimConfig.n_evals}, llm {LLMConfig.n_evals}]" in text
    assert f"llm {LLMConfig.d_val}, tiny LMs {TINY_DEFAULTS['d_val']}]" in text
    from studies.fit.plan import WARN_FACTOR

    assert f"[default: {WARN_FACTOR} (studies.fit.plan.WARN_FACTOR)]" in " ".join(
        invoke("plan", "--help").stdout.split())


def test_an_edge_beside_a_tie_set_names_the_set_not_a_lone_n_star():
    from studies.fit.certainty import edge_note

    grid = [16, 32, 64, 128, 256]
    lone = edge_note(256, grid)
    assert lone.startswith("n* at the budget is 256, the largest n tried") and "extend the grid" in lone
    tied = edge_note(256, grid, members=[16, 32, 64, 128, 256])
    assert "n* at the budget is 256" not in tied
    assert tied.startswith("the best measured n at the budget is 256, inside the set {16-256}")
    assert "extend the grid" in tied
    assert edge_note(64, grid, members=[16, 64]) is None  # no edge, no line


@pytest.mark.parametrize("table, rises", [(plateau, False), (noisy_rise, False), (rise, True)])
def test_gallery_lines_say_sigmoid_only_for_a_determined_rise(table, rises):
    """The figures' gallery lines read n* through the same sets: their n*-fit words are `fit`'s
    (nstar_fit_text) and their spans run between determined points; "sigmoid" only where the rise is."""
    from paper_figs.plots import determined_span, frontier_numbers
    from studies.fit.render import nstar_fit_text

    rep = fit_report(table(), metric="val_mean", extrapolate=False)
    v = frontier_numbers(rep)
    assert v["fit"] == nstar_fit_text(rep)
    assert v["fit"].startswith("sigmoid r2") == rises, v["fit"]
    span = determined_span(v)
    assert span == ("undetermined (ties)" if v["determined"] == 0 else
                    f"{int(v['n_lo'])} -> {int(v['n_hi'])}")
    if rises:
        assert span == "4 -> 64"
