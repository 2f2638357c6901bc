"""No measured number in README.md is typed by hand: every decimal or ± outside code and marked
blocks fails, and the generated blocks equal what isocompute.reports.readme makes from their data files."""

from __future__ import annotations

import json
from pathlib import Path

from isocompute.reports import readme

ROOT = Path(__file__).resolve().parents[2]


def test_the_rule_flags_prose_numbers_only():
    text = "\n".join([
        "n = 256 beats n = 8 by +0.0264 ± 0.0106 at 3.6e7 rollouts/s.",
        "Python 3.11, arXiv 2603.12151, budget 2^18, 8 seeds, SmolLM2-135M.",
        "```bash", "isocompute run --lr 0.03", "```",
        "inline `--lr 0.1` is code.",
        "<!-- x:begin -->", "generated 0.5", "<!-- x:end -->",
        "<!-- y -->", "generated 1.25", "<!-- y -->",
        "v1.2 of a file name like a.b.c is not a number; 0.75 is.",
        "Ray >= 2.59 is a version, so is version 1.5; 2.5 is not.",
    ])
    got = readme.stray_numbers(text)
    assert got == [(1, "+0.0264"), (1, "±"), (1, "0.0106"), (1, "3.6e7"), (13, "0.75"), (14, "2.5")], got


def test_readme_has_no_typed_numbers():
    stray = readme.stray_numbers((ROOT / "README.md").read_text())
    assert not stray, f"README numbers outside generated blocks (line, number): {stray}"


def test_readme_blocks_are_generated_from_their_data():
    text = (ROOT / "README.md").read_text()
    cj = ROOT / readme.CLAIMS_JSON
    summary = json.loads(cj.read_text()) if cj.exists() else None
    assert f"{readme.CLAIMS_BEGIN}\n{readme.claims_paragraph(summary)}\n{readme.CLAIMS_END}" in text
    assert f"{readme.CAPTION_BEGIN}\n{readme.headline_caption(summary)}\n{readme.CAPTION_END}" in text
    assert f"{readme.ROLLOUT_MARK}\n{readme.rollout_text(ROOT)}\n{readme.ROLLOUT_MARK}" in text
    assert readme.rollout_text(ROOT).startswith("Measured on 20")  # the date a reader sees first


def _gain(est, lo, hi):
    return {"n_small": 8, "n_large": 256, "estimate": est, "lo": lo, "hi": hi, "lo90": lo, "hi90": hi,
            "seeds": 8}


def _top(nstar: str, tie: bool, stake: tuple[float, float, float] | None = None) -> dict:
    st = None if stake is None else {"estimate": stake[0], "lo": stake[1], "hi": stake[2], "within": False}
    return {"budget": 2.0**22, "set": nstar, "tie": tie, "stake": st}


def _summary(f1: str, gain: dict) -> dict:
    pre_gain = _gain(0.0264, 0.0158, 0.0370)
    headline = {"mode": "full", "bp": 32, "top": 2**22, "ns": [2, 8, 32, 256], "rows": [
        {"key": "recipe", "lr": None, "gain": gain,
         "roles": {"interference": {"base_lr": 0.001, "top": _top("32-128", True, (0.0, 0.0, 0.0))},
                   "tabular": {"base_lr": 0.01, "top": _top("2", False, (0.0, 0.0, 0.0))}}},
        {"key": "constant", "lr": 0.1, "gain": pre_gain,
         "roles": {"interference": {"base_lr": None, "top": _top("256", False, (0.0213, 0.0101, 0.0325))},
                   "tabular": {"base_lr": None, "top": _top("2-4", True)}}}]}
    return {"version": readme.SUMMARY_VERSION, "plan": "full", "seeds": 8, "seed_sets": ["0..7", "8..15"],
            "verdicts": {"theory": "reproduced", "f1": f1, "f5": "reproduced"}, "tabular_lr": 0.1,
            "base_lr_grid": [0.0001, 0.001, 0.01],
            "f1": {"recipe": {"base_lr": 0.001, "gain": gain, "n_star": ["2", "2-4", "32-128"],
                              "stake_top": {"estimate": 0.0004, "lo": -0.0002, "hi": 0.001, "within": True}},
                   "envelope": {"gain": _gain(-0.0005, -0.0014, 0.0004), "grid": [0.01, 0.1]},
                   "preset": {"lr": 0.1, "gain": pre_gain, "n_star": ["8", "64", "256"]}},
            "headline": headline, "mechanisms": {"rises": [], "of": 7}}


def test_claims_paragraph_quotes_the_summary_and_says_which_lr():
    s = _summary("inconclusive", _gain(-0.0000, -0.0018, 0.0018))
    p = readme.claims_paragraph(s)
    assert "base lr 0.001 chosen on tuning seeds" in p and "Easy): inconclusive" in p
    s["by_set"] = {"f1": [["0..7", "inconclusive"], ["8..15", "reproduced"]]}
    s["verdicts"]["f1"] = "does not replicate"
    p2 = readme.claims_paragraph(s)
    assert "Easy): does not replicate (seeds 0..7: inconclusive; seeds 8..15: reproduced)" in p2
    assert "(numbers: seeds 0..7)" in p2
    assert "-0.0000 [-0.0018, +0.0018] (95% CI over 8 seeds, not distinguishable from 0)" in p
    assert "+0.0004 [-0.0002, +0.0010] (inside the equivalence margin)" in p
    assert "lr envelope" in p and "-0.0005 [-0.0014, +0.0004]" in p
    assert "constant lr 0.1 (a sensitivity row, not a verdict)" in p and "+0.0264 [+0.0158, +0.0370]" in p
    assert "two disjoint sets of 8 seeds (0..7 and 8..15)" in p and "0 of the 7" in p
    # what each lr choice was: the theory's constant, the recipe's grid, the envelope's grid, the others'
    assert "preset constant lr 0.1): reproduced" in p and "from the grid 0.0001, 0.001, 0.01" in p
    assert "each n's lr of the grid 0.01, 0.1 chosen on held-out seeds" in p
    assert "each study with its own base lr chosen on tuning seeds" in p


def test_headline_caption_quotes_both_lr_choices_and_says_grows_only_where_the_recipe_reproduces():
    no = readme.headline_caption(_summary("inconclusive", _gain(0.0, -0.002, 0.002)))
    assert "grows with compute" not in no and "verdict on finding 1: inconclusive" in no
    top, bottom = no.split("Bottom, ")
    assert "base lr 0.001 (interference) and 0.01 (tabular) chosen on tuning seeds" in top
    assert "interference n* at 2^22 is {32-128} (a tie), with nothing at stake" in top
    assert "+0.0000 [-0.0020, +0.0020]" in top and "tabular n* at 2^22 is 2." in top
    assert bottom.startswith("the preset's constant lr 0.1 (a sensitivity row, not a verdict)")
    assert "interference n* at 2^22 is 256, gaining +0.0213 [+0.0101, +0.0325]" in bottom
    assert "+0.0264 [+0.0158, +0.0370]" in bottom and "tabular n* at 2^22 is {2-4} (a tie)" in bottom
    assert "`isocompute report claims --docs`" in no and "seeds 0..7, the first of 2 disjoint sets" in no
    yes = readme.headline_caption(_summary("reproduced", _gain(0.02, 0.01, 0.03)))
    assert "n*(C) grows with compute: finding 1 reproduced" in yes and "+0.0200 [+0.0100, +0.0300]" in yes


def test_a_summary_without_the_headline_keeps_the_demo_caption():
    demo = {"seeds": 8, "bp": 32, "budget": 2**18, "lr": 0.1}
    s = _summary("inconclusive", _gain(0.0, -0.002, 0.002))
    del s["headline"]
    cap = readme.headline_caption(s, demo)
    assert "Built by `make demo`" in cap and "budget 2^18" in cap and "grows with compute" not in cap


def test_a_summary_that_predates_the_recipe_is_quoted_without_numbers():
    old = {"plan": "full", "seeds": 8, "verdicts": {"f1": "partly"}, "f1": {"preset": {}}}
    for text in (readme.claims_paragraph(old), readme.claims_paragraph(None), readme.headline_caption(old)):
        assert not readme.stray_numbers(text.replace("lr 0.1", "")) and "grows with compute" not in text


# ------------------------------------------------------------------------------------------ the answer
def test_the_simulator_answer_is_worded_from_the_verdict_and_its_intervals():
    s = _summary("not reproduced", _gain(0.0009, -0.0005, 0.0022))
    a = readme.simulator_answer(s)
    assert "a larger n does not win" in a and "not reproduced on 2 disjoint seed sets" in a
    assert "+0.0009 [-0.0005, +0.0022]" in a and "untuned constant lr 0.1 the same gain is +0.0264" in a
    assert "above 0" in a and "[docs/CLAIMS.md](docs/CLAIMS.md)" in a and "no margin" not in a
    s["zero"] = {"f1": "inconclusive"}
    assert "with no margin on that gain the verdict reads 'inconclusive'" in readme.simulator_answer(s)
    yes = readme.simulator_answer(_summary("reproduced", _gain(0.02, 0.01, 0.03)))
    assert "a larger n wins as compute grows" in yes and "does not win" not in yes
    open_ = readme.simulator_answer(_summary("does not replicate", _gain(0.0, -0.01, 0.01)))
    assert "not settled" in open_ and "reads 'does not replicate'" in open_
    assert "missing" in readme.simulator_answer(None)


def test_the_mechanism_answer_names_the_kl_the_group_std_gain_holds_at():
    gs = {"verdict": "shown", "kl": 1.0, "by_kl": {
        "0": {"verdict": "ruled out", "group": {"n_small": 2, "n_large": 128, "diff": -0.0005, "lo": -0.006,
                                               "hi": 0.005}},
        "0.1": {"verdict": "inconclusive", "group": {}},
        "1": {"verdict": "shown", "group": {"n_small": 2, "n_large": 128, "diff": 0.2446, "lo": 0.2393,
                                           "hi": 0.25}}}}
    m = readme.mechanism_answer(_summary("not reproduced", _gain(0.0, -0.01, 0.01)), gs)
    assert m.startswith("Why: under a per-n tuned lr 0 of the 7 simulator ingredients tested make")
    assert "only against a KL pull of coefficient 1 (n = 128 − n = 2 = +0.245 [+0.239, +0.250] there)" in m
    assert "ruled out at KL 0; inconclusive at KL 0.1; shown at KL 1" in m and "GROUP_STD.md" in m
    gs["by_kl"]["0.1"]["verdict"] = "shown"  # shown at two KL coefficients: no "only"
    assert "the group-std rule reads: " in readme.mechanism_answer(None, gs)
    assert readme.mechanism_answer(None, None) == ""


def _tiny_x(hi: float, trend: str = "constant") -> dict:
    """A stand-in for isocompute.reports.tiny_study.measure: one part whose arm R has n* = 4 throughout."""
    from types import SimpleNamespace as NS

    part = NS(ns=(4, 16, 64), readout=(2**12, 2**20))
    stake = {"n_large": 16, "n_small": 4, "mean": hi - 0.01, "lo": hi - 0.02, "hi": hi}
    v = NS(outcome="INCONCLUSIVE", numbers={"stake": stake, "p_small": False, "p_large": True})
    pair = {"n": 64, "reference": 4, "lag": {"status": "ok", "lag": 2.26, "trend": trend},
            "ceiling": {"verdict": "same"}}
    arm = {"verdict": v, "stars": [NS(point=4), NS(point=4)], "readings": {"lag": {"pairs": [pair]}}}
    return {"parts": {"easy": {"part": part, "arms": {"R": arm}}}}


def test_the_tiny_answer_says_small_n_wins_only_where_the_stake_is_below_zero():
    a = readme.tiny_answer(_tiny_x(-0.003))
    assert "small n wins at every budget so far: easy: n* = 4 at every budget to 2^20" in a
    assert "n = 16 − n = 4 = -0.013 [-0.023, -0.003] there" in a
    assert "n = 64 learns the same curve as n = 4, 2.3 octaves of compute later" in a
    assert "not how high it rises" in a and "reads INCONCLUSIVE, as the smallest and largest n" in a
    b = readme.tiny_answer(_tiny_x(0.01, trend="grows"))
    assert "small n wins" not in b and "large n does not win" in b and "n = 64 trails n = 4" in b
    assert "not how high" not in b and "tiny_study/store" in readme.tiny_answer(None)


def test_readme_opens_with_the_generated_answer():
    """The answer block is the first thing after the one-line description, and it is the generator's."""
    text = (ROOT / "README.md").read_text()
    summary = json.loads((ROOT / readme.CLAIMS_JSON).read_text())
    gj = ROOT / readme.GROUPSTD_JSON
    gs = json.loads(gj.read_text()) if gj.exists() else None
    block = readme.answer_paragraph(summary, gs, readme.tiny_measure(ROOT))
    assert f"{readme.ANSWER_BEGIN}\n{block}\n{readme.ANSWER_END}" in text
    lines = text.splitlines()
    assert lines[0] == "# isocompute" and lines[4] == readme.ANSWER_BEGIN
    assert all(link in block for link in ("docs/CLAIMS.md", "docs/TINY_STUDY.md", "docs/MECHANISMS.md"))
