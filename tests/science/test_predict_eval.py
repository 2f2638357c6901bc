"""docs/PREDICT.md's generator (isocompute/reports/predict_eval.py): recipe cases tune their base lr on seeds
apart from pilots and truth, constant-lr cases give a rising true n*; an abstention is scored as one
(coverage, accuracy over the cases predicted); the conclusion says "beats" only where the signal rule's paired
advantage over a baseline has an interval above 0 over the rising cases, and says when the test cannot tell
the rules apart."""

from __future__ import annotations

import pytest

from isocompute.reports import predict_eval as pe
from studies.config import RunConfig


def _res(signal: list, paper: list, constant: list, rising: list[bool] | None = None) -> dict:
    """One result per case (the design case first): hit rates (None: the rule abstains) and whether the
    case's true n* rises."""
    C = [2.0**k for k in range(10, 21)]
    rising = rising or [False] * len(pe.CASES)
    out = {}
    for i, name in enumerate(pe.CASES):
        rules = {k: {"hit_rate": v[i], "n_star": None if v[i] is None else [8] * len(C), "status": "ok"}
                 for k, v in (("signal", signal), ("paper", paper), ("constant", constant))}
        out[name] = {"truth": [8] * len(C), "compute": C, "upper": [True] * len(C), "rules": rules,
                     "signal": {"z_star": 0.9, "exponent": 0.5}, "recipe": {"base_lr": 0.001, "edge": i == 1},
                     "rising": rising[i], "pilot_fraction": 0.125}
    return out


K = len(pe.CASES)


def test_an_abstention_is_not_a_miss():
    """Coverage counts the cases a rule predicts; accuracy is its hit rate over them only."""
    sig = [0.9] + [None] * (K - 3) + [0.8, 0.6]
    res = _res(sig, [0.5] * K, [0.7] * K)
    _, out = pe.conclusion(res)
    sc = out["all"]["signal"]
    assert len(sc["predicted"]) == 2 and sc["coverage"] == pytest.approx(2 / (K - 1))
    assert sc["accuracy"] == pytest.approx(0.7)  # (0.8 + 0.6) / 2, not divided by every case
    assert out["all"]["constant"]["coverage"] == 1.0


def test_rising_truth_is_what_tells_predictors_apart():
    """On flat cases a constant n wins by construction; the comparison that counts is on the rising cases,
    and with fewer than MIN_PAIRED of them (where both predict) the test cannot tell the rules apart."""
    flat = _res([0.9] + [0.3] * (K - 1), [0.5] * K, [0.95] * K)
    lines, out = pe.conclusion(flat)
    assert out["rising"] == [] and "cannot evaluate a predictor of a rising n*" in lines[-1]
    rise = [False] + [i < 5 for i in range(K - 1)]  # 5 rising cases, the design case not among them
    res = _res([0.9] * K, [0.5 + 0.01 * i for i in range(K)], [0.3 + 0.02 * i for i in range(K)], rising=rise)
    lines, out = pe.conclusion(res)
    assert len(out["rising"]) == 5 and out["versus"]["constant"]["verdict"] == "beats"
    assert "on the rising cases the signal rule beats the paper's extrapolation and beats a constant n" \
        in lines[-1] and "flat cases a constant n is right by construction" in lines[-1]
    few = [False] + [i < 2 for i in range(K - 1)]
    _, out = pe.conclusion(_res([0.9] * K, [0.5] * K, [0.3] * K, rising=few))
    assert out["versus"]["constant"]["verdict"] == "cannot be told from"


def test_a_truth_rises_only_beyond_what_one_n_can_hit():
    up = [False, True, True, True]
    assert pe.rising([2, 4, 8, 64], up) and not pe.rising([2, 4, 8, 16], up)  # 16 / 4 = 4: one n hits both
    assert not pe.rising([2, 64, 8, 4], up) and not pe.rising([None, None, 8, None], up)


def test_pilots_give_every_n_its_steps():
    frac = pe.pilot_fraction(32, (2, 256), 2**20)
    assert frac * 2**20 >= pe.MIN_PILOT_STEPS * 32 * 256 and frac >= pe.PILOT_FRACTION
    assert pe.pilot_fraction(32, (2, 8), 2**20) == pe.PILOT_FRACTION


def test_the_markdown_shows_coverage_accuracy_and_the_conclusion():
    md = pe.evaluation_markdown(_res([0.8] + [None] * (K - 1), [0.7] * K, [0.75] * K))
    assert "| case | true n* | signal rule | paper extrapolation | constant |" in md and "| lr |" in md
    assert "abstains" in md and "recipe, base 0.001 (grid edge)" in md and "**Conclusion**:" in md
    assert "| the signal rule | 0/14, - |" in md and "12.5% of the budget" in md
    assert "paper's recipe" in md and "isocompute report predict" in md
    assert sum(1 for c in pe.CASES.values() if c.get("lr") == pe.CONSTANT) >= 3


def test_recipe_config_tunes_the_base_lr_on_its_own_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(pe, "EVAL_NS", (2, 8))
    base = RunConfig(backend="sim", model="interference", bp=32, budget=2**12, d=64, d_val=64, n_evals=8)
    cfg, rec = pe.recipe_config(base, "val_mean", tmp_path, jobs=1, grid=(0.01, 0.1), report_seeds=[0, 1])
    assert cfg.lr_rule == "sqrt" and cfg.lr in (0.01, 0.1) and rec["base_lr"] == cfg.lr
    assert cfg.kl_coef > 0 and cfg.entropy_coef > 0  # Easy: KL + entropy
    hard, _ = pe.recipe_config(base.replace(dataset="hard"), "val_mean", tmp_path, jobs=1, grid=(0.01, 0.1),
                               report_seeds=[0, 1])
    assert hard.kl_coef == 0 and hard.entropy_coef == 0  # Hard: neither
    with pytest.raises(ValueError, match="both tune and report"):
        pe.recipe_config(base, "val_mean", tmp_path, jobs=1, grid=(0.01, 0.1), report_seeds=[pe.TUNE_OFFSET])
