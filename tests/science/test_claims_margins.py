"""What the claims report says about its own rules (isocompute/reports/claims/): every non-zero margin names
when it was chosen, the verdict at margin 0 stands beside the verdict it changes, the budget at which every n
reaches a common ceiling and which sections share it, and finding 1's computed readings beside its verdict
(record against final, speed or ceiling). Synthetic numbers whose answers are known; no runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isocompute.reports.claims import ceiling, nstar
from isocompute.reports.claims.judge import (
    MIN_GAIN,
    PROVENANCE,
    Interval,
    Rule,
    at_margin_zero,
    gain_rule,
    judge,
)
from isocompute.reports.claims.report import SECTIONS, Outcome, margin_lines, zero_cell

ROOT = Path(__file__).resolve().parents[2]
R, N, I = "reproduced", "not reproduced", "inconclusive"


def iv(est: float, half: float) -> Interval:
    return Interval(est, est - half, est + half, est - 0.8 * half, est + 0.8 * half, 8)


# ---------------------------------------------------------------------------------------- margins
def test_a_non_zero_threshold_needs_a_provenance_of_its_value():
    with pytest.raises(ValueError, match="provenance"):
        Rule("q", threshold=0.01)
    with pytest.raises(ValueError, match="provenance"):
        Rule("q", threshold=0.02, margin_of="MIN_GAIN")  # MIN_GAIN is 0.01
    assert Rule("q").provenance is None
    assert Rule("q", kind="equivalent").provenance.name == "EQUIVALENCE_MARGIN"
    assert gain_rule("q").provenance is PROVENANCE["MIN_GAIN"]


def test_every_rule_of_the_report_with_a_margin_says_when_it_was_chosen():
    """Every section's rules: a non-zero margin has a provenance naming a commit of this repository and
    whether it was chosen before or after which data; MIN_GAIN was chosen after data that bear on it."""
    rules = [r for s in SECTIONS for r in s.rules]
    assert len(rules) >= 17 and any(r.margin_value for r in rules)
    for r in rules:
        if r.margin_value:
            pv = r.provenance
            assert pv is not None and pv.value == r.margin_value, r.quantity
            assert pv.when in ("before", "after"), r.quantity
            ok = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{pv.commit}^{{commit}}"])
            assert ok.returncode == 0, pv.commit
    assert PROVENANCE["MIN_GAIN"].when == "after" and PROVENANCE["MIN_GAIN"].value == MIN_GAIN
    lines = "\n".join(margin_lines(SECTIONS))
    assert "| f1 | " in lines and "MIN_GAIN = 0.01" in lines and "0 (none)" in lines
    assert lines.count("- MIN_GAIN = 0.01 (set in 35d7515; chosen after") == 1  # each provenance once


def test_the_verdict_at_margin_zero_is_shown_where_it_differs():
    small = iv(0.005, 0.003)  # [0.002, 0.008]: above 0, below MIN_GAIN
    j = judge(nstar.F1_RULE, small)
    assert (j.verdict, j.zero) == (N, R) and "(at margin 0: reproduced)" in j.text()
    j = judge(nstar.F1_RULE, iv(0.03, 0.01))
    assert (j.verdict, j.zero) == (R, R) and "margin 0" not in j.text()
    assert judge(Rule("q"), small).zero is None  # a rule at 0 has no second reading
    eq = Rule("q", kind="equivalent")
    assert judge(eq, iv(0.0, 0.005)).zero is None  # equivalence keeps its margin
    with at_margin_zero():
        assert judge(nstar.F1_RULE, small).verdict == R
        assert judge(eq, iv(0.0, 0.005)).verdict == R
    assert judge(nstar.F1_RULE, small).verdict == N  # the context ends with the block


def test_a_section_verdict_at_margin_zero():
    """The whole section read at margin 0 (as run_seed_set does): finding 1 with a gain resolved above 0 but
    below one point reads 'not reproduced' and, at margin 0, 'reproduced'; the table cell says so."""
    from test_claims_verdicts import _f1  # the same hand-made finding 1

    x = _f1(iv(0.005, 0.003))
    v, why = nstar.f1_verdict(x)
    with at_margin_zero():
        v0, _ = nstar.f1_verdict(x)
    assert (v, v0) == (N, R) and "(at margin 0: reproduced)" in why
    o = Outcome(nstar.F1, numbers=x, verdict=v, zero=v0, zero_by_set=(("0..7", R), ("8..15", I)))
    assert zero_cell(o) == "reproduced (reproduced / inconclusive)"
    assert zero_cell(Outcome(nstar.F1, numbers=x, verdict=N, zero=N)) == "same"


# ---------------------------------------------------------------------------------------- ceilings
def _curves(tops: dict[int, float], rate: dict[int, float], seeds: int = 4) -> pd.DataFrame:
    """Runs per n and seed whose val_mean rises as top * (1 - exp(-C / rate)) on compute 2^8..2^20."""
    rows = []
    for n, top in tops.items():
        for s in range(seeds):
            for c in 2.0 ** np.arange(8, 21):
                rows.append({"run_id": f"n{n}s{s}", "n": n, "seed": s, "bp": 32, "compute": c,
                             "val_mean": top * (1 - np.exp(-c / rate[n])) + 0.001 * s})
    return pd.DataFrame(rows)


def test_common_ceiling_finds_the_budget_where_every_n_is_within_the_margin():
    t = _curves({2: 0.85, 8: 0.85, 64: 0.85}, {2: 2.0**10, 8: 2.0**12, 64: 2.0**15})
    c = ceiling.common_ceiling(t, 2.0**20)
    assert c["ceiling"] == pytest.approx(0.8515, abs=1e-3)
    # n = 64 is within 0.01 of 0.85 where e^(-C / 2^15) <= 0.01, C >= 4.6 * 2^15: 2^18 on the grid
    assert c["reach"][2] <= 2.0**14 and c["reach"][64] == 2.0**18 and c["budget"] == 2.0**18
    assert "every n is within ±0.01 of the ceiling 0.851 (val_mean) by 2^18 (top 2^20)" in ceiling.note("", c)
    low = ceiling.common_ceiling(_curves({2: 0.80, 64: 0.85}, {2: 2.0**10, 64: 2.0**12}), 2.0**20)
    assert low["budget"] is None and low["reach"][2] is None
    assert low["gap"][2] == pytest.approx(0.05, abs=1e-3)
    said = ceiling.note("r", low)
    assert "not every n within ±0.01 of the best by 2^20 (n = 2 is 0.050 below the best" in said
    assert low["arms"] is None and "arms" not in ceiling.note("r", low)
    # the largest n lags, but the best small n (2) and the best large n (32) both reach the ceiling by 2^14:
    # the top-budget rule's two arms read the ceiling they share
    curves = _curves({2: 0.85, 32: 0.85, 512: 0.80}, {2: 2.0**10, 32: 2.0**11, 512: 2.0**12})
    lag = ceiling.common_ceiling(curves, 2.0**20)
    assert lag["budget"] is None and lag["arms"] == 2.0**14
    assert "the arms of the top-budget rule, both by 2^14" in ceiling.note("r", lag)
    assert "reads the ceiling they share" in ceiling.section_note({"r": lag})


def test_sections_that_read_the_same_ceiling_are_grouped():
    def c(v, budget=2.0**18):
        return {"ceiling": v, "budget": budget, "arms": budget}

    by = {"f1": {"recipe": c(0.852)}, "f3": {"B": c(0.848)}, "f8": {"dual": c(0.70)},
          "f10": {"t": c(0.855)}, "f11": {"ppo": c(0.85), "cispo": c(0.70, None)}, "theory": {"t": c(1.0)}}
    assert ceiling.shared(by) == [["f3", "f1", "f10"]]  # f11 has a study without a common ceiling
    text = ceiling.shared_text(by, {})
    assert "f3, f1, f10 (ceilings 0.848-0.855)" in text and "not independent" in text
    assert ceiling.shared({"a": {"x": c(0.5)}, "b": {"x": c(0.7)}}) == []


def test_every_top_budget_gain_section_declares_its_ceiling_studies():
    """The sections whose rules read a top-budget gain of large n name the studies that gain is read on."""
    from isocompute.reports.claims.common import FULL

    gain = {s.key for s in SECTIONS if any(r.provenance and r.provenance.name == "MIN_GAIN" for r in s.rules)}
    assert gain == {"f1", "f3", "f4", "f8", "f10", "f11"}
    for s in SECTIONS:
        if s.key in gain:
            assert s.ceiling is not None and s.ceiling(FULL), s.key


# ------------------------------------------------------------------------------------ finding 1's readings
def test_record_against_final_reads_each_n_against_its_own_best_lr():
    """n = 4 runs at 5x its best constant lr and falls 0.03 from its record; n = 64 runs at its best."""
    rows = []
    for n, lr, peak, end in ((4, 5e-3, 0.80, 0.77), (64, 1e-2, 0.85, 0.85)):
        for s in range(4):
            for c, v in ((2.0**16, peak), (2.0**22, end)):
                rows.append({"run_id": f"r{n}s{s}", "n": n, "seed": s, "compute": c, "val_mean": v, "lr": lr})
    recipe = pd.DataFrame(rows)
    env_rows = []
    for n in (4, 64):
        for i in (0, 1):
            good = (n == 4 and i == 0) or (n == 64 and i == 1)
            for s in range(4):
                env_rows.append({"run_id": f"e{n}{i}s{s}", "n": n, "seed": s, "arm_lr": i, "compute": 2.0**22,
                                 "val_mean": 0.9 if good else 0.5})
    rf = nstar.record_final(recipe, pd.DataFrame(env_rows), {0: 1e-3, 1: 1e-2}, 2.0**22)
    assert rf[4] == pytest.approx({"lr": 5e-3, "best_lr": 1e-3, "ratio": 5.0, "drop": 0.03, "edge": True})
    assert rf[64]["ratio"] == pytest.approx(1.0) and rf[64]["drop"] == pytest.approx(0.0)
    text = nstar.record_final_text({"record_final": rf}, {"n_small": "4/8", "n_large": 64})
    assert ("n = 4 ran at lr 0.005, 5.0x its own best constant lr 0.001 (a grid edge), and its final reward "
            "is 0.030 below its record") in text and "n = 64 ran at lr 0.01, 1.0x" in text


def test_lag_summary_sorts_the_pairs_by_what_they_say():
    def pair(n, speed, trend, ceil):
        return {"n": n, "lag": {"status": "ok", "speed": speed, "trend": trend}, "ceiling": {"verdict": ceil}}

    u = "undetermined"
    lag = {"reference": 2, "pairs": [pair(4, "same", "constant", "same"),
                                     pair(8, "slower", "constant", "same"),
                                     pair(64, "slower", "grows", "lower"), pair(512, u, u, u)]}
    text = nstar.lag_summary(lag)
    assert "each n against n = 2, 4 pairs" in text
    assert "a constant lag (speed, not ceiling, over the rewards both reach): n = 8;" in text
    assert "the same curve: n = 4;" in text and "(a lower ceiling, if it lasts): n = 64;" in text
    assert "not told apart: n = 512" in text and "val at matched train reward differs for n = 64" in text
    lag["pairs"][2]["lag"]["trend"] = "shrinks"
    lag["pairs"][2]["ceiling"]["verdict"] = "same"
    text = nstar.lag_summary(lag)
    assert "(it catches up and may rise higher): n = 64" in text and "lower ceiling" not in text
    assert "the same or not told apart for every pair" in text
    assert nstar.lag_summary({"status": "fewer than two n with data", "pairs": []}).endswith("with data")
