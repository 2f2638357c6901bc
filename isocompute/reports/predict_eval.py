"""`isocompute report predict`: docs/PREDICT.md, the hit rates of `isocompute predict`'s two rules
(studies.fit.predict: the zero-variance signal rule and the paper's extrapolation) against the swept n*(C)
of full-budget runs, per simulator case, beside the baselines a rule must beat (the paper's
extrapolation, a constant n) and the conclusion the hit rates support, judged with an interval over the
cases (isocompute/reports/claims/judge.py).

Two kinds of case. Recipe cases train with the paper's recipe (isocompute/reports/claims/recipe.py: the sqrt
rule, KL + entropy on Easy, the base lr chosen at the full budget on tuning seeds that neither pilots nor
truth use): the allocation of a tuned run, whose true n*(C) stays nearly flat. Constant-lr cases train at
their preset's constant lr, where n*(C) does rise (the claims report's sensitivity rows): only there can a
predictor of a rising n* be told from holding one n fixed, which wins by construction where the truth is
flat. Each case's truth is labelled rising when it spans more than RISE_FACTOR over the scored grid points.

Scoring: a rule that makes no prediction abstains; its coverage is the share of cases where it predicts and
its accuracy the mean hit rate over those cases (an abstention is not a miss). Pilots spend at least
PILOT_FRACTION of the budget and enough for every n to take MIN_PILOT_STEPS steps (`pilot_fraction`).

Pilots, tuning and truth runs go through the one pipeline (RunConfig -> sweep -> run_configs ->
ResultStore -> FrontierFit) into a resumable results directory, with seeds that no design decision saw
(DESIGN_CASE aside).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from studies.config import RunConfig, StudiesError
from studies.fit.predict import (
    PILOT_FRACTION,
    hit_rate,
    offset_seeds,
    pilot_configs,
    plain_int,
    predict_from_table,
    prediction_grid,
    run_configs,
    swept_n_star,
    upper_mask,
)
from studies.presets import preset_lr, presets_for

MIN_PILOT_STEPS = 16
"""Steps that the largest n's pilot must take: at 5% of 2^20 rollouts and bp 32, n = 256 took 6."""
RISE_FACTOR = 4.0
"""A case's true n* rises when its last scored value exceeds its first by more than this factor: then no
constant n lies within the hit tolerance (a factor 2) of both ends."""


def pilot_fraction(bp: int, ns: Sequence[int], budget: int, steps: int = MIN_PILOT_STEPS,
                   floor: float = PILOT_FRACTION) -> float:
    """The share of the budget each pilot spends: at least `floor`, and enough for the largest n to take
    `steps` steps of bp * n rollouts."""
    return max(float(floor), steps * bp * max(ns) / float(budget))


def rising(truth: Sequence, upper: Sequence[bool], factor: float = RISE_FACTOR) -> bool:
    """Whether a true n*(C) rises over the scored (upper) grid points: its last finite value is more than
    `factor` times its first."""
    t = [float(v) for v, u in zip(truth, upper, strict=True) if u and v is not None and np.isfinite(v)]
    return len(t) >= 2 and t[-1] > factor * t[0]


def evaluate(base: RunConfig, n: Sequence[int], budget: int, out: Path, fraction: float = PILOT_FRACTION,
             pilot_seeds: int = 4, truth_seeds: int = 4, pilot_offset: int = 100, truth_offset: int = 200,
             metric: str = "val_mean", jobs: int | None = None, progress: bool = False) -> dict[str, Any]:
    """One case: pilots (seeds pilot_offset..) and full-budget truth runs (seeds truth_offset..) of the same
    grid through the pipeline into `out`; hit rates of both rules and of a constant baseline (the pilot
    frontier's last n held fixed) against the swept n*(C) on the upper 70% of the log-compute grid."""
    from studies.sweeps import build_sweep

    pcfgs, _ = pilot_configs(base, n, budget, fraction, pilot_seeds, pilot_offset)
    ptable = run_configs(pcfgs, out, jobs, progress, "pilots")
    tcfgs = build_sweep("n-vs-m", base.replace(budget=budget, n=n[0]), n=list(n), seeds=truth_seeds,
                        budget=budget)
    tcfgs = offset_seeds(tcfgs, truth_offset, base.problem_seed)
    ttable = run_configs(tcfgs, out, jobs, progress, "truth")
    try:
        rep = predict_from_table(ptable, budget, metric=metric)
    except StudiesError as e:  # neither rule can predict from these pilots: both score no hit
        rep = {"alternatives": {"signal": None, "paper": None}, "status": {"signal": str(e), "paper": str(e)}}
    C = prediction_grid(budget)
    truth = swept_n_star(ttable, C, metric)
    res: dict[str, Any] = {"truth": [None if not np.isfinite(t) else plain_int(t) for t in truth],
                           "compute": C.tolist(), "upper": upper_mask(C).tolist(), "rules": {}}
    for k, alt in rep["alternatives"].items():
        pred = None if alt is None else [p["n"] for p in alt]
        res["rules"][k] = {"n_star": pred, **hit_rate(pred, truth, C), "status": rep["status"][k]}
    from studies.fit.frontier import FrontierFit

    front = FrontierFit(metric=metric).fit(ptable).frontier_
    v = front["n"].iloc[-1] if len(front) else None
    last = None if v is None or (isinstance(v, float) and not np.isfinite(v)) else plain_int(v)
    const = None if last is None else [last] * len(C)
    res["rules"]["constant"] = {"n_star": const, **hit_rate(const, truth, C),
                                "status": "pilot frontier's last n held fixed"}
    res["signal"] = rep.get("signal")
    res["z_star"] = (rep.get("signal") or {}).get("z_star")
    res["rising"] = rising(res["truth"], res["upper"])
    res["pilot_fraction"] = fraction
    return res


CONSTANT = "constant"
"""A case's "lr": the preset's own constant lr (no tuning), where n*(C) rises."""
DESIGN_CASE = "interference-easy"
"""The case the signal rule was designed on (its seeds: pilots 0.., truth 50..); every other case uses
pilot seeds 100.. and truth seeds 200.., which no design decision saw."""
CASES: dict[str, dict[str, Any]] = {
    "interference-easy": {"model": "interference"},
    "interference-hard": {"model": "interference", "dataset": "hard"},
    "mlp-easy": {"model": "mlp"},
    "linear-easy": {"model": "linear"},
    "skills-easy": {"model": "skills"},
    "interference-hidden8": {"model": "interference", "options": (("hidden", 8),)},
    "interference-d128": {"model": "interference", "d": 128},
    "tabular-easy": {"model": "tabular"},
    "interference-dual": {"model": "interference", "dataset": "dual"},
    "mlp-hard": {"model": "mlp", "dataset": "hard"},
    "interference-easy-constlr": {"model": "interference", "lr": CONSTANT},
    "interference-hidden8-constlr": {"model": "interference", "options": (("hidden", 8),),
                                     "lr": CONSTANT},
    "mlp-easy-constlr": {"model": "mlp", "lr": CONSTANT},
    "skills-easy-constlr": {"model": "skills", "lr": CONSTANT},
    "interference-hard-constlr": {"model": "interference", "dataset": "hard", "lr": CONSTANT},
}
"""Simulator cases of the evaluation: a policy role of studies.presets ("model"), RunConfig fields over its
preset and the shared base (bp 32, budget 2^20, d = d_val = 512, 40 evaluation points, n 2..256, 4 pilot
seeds, 4 truth seeds at the budget), and "lr": the recipe (default) or CONSTANT, the preset's own constant
lr (the cases where n*(C) rises)."""
EVAL_NS = (2, 4, 8, 16, 32, 64, 128, 256)
EVAL_BUDGET = 2**20
EVAL_BP = 32


def case_config(name: str) -> tuple[RunConfig, str]:
    """A case's RunConfig at the shared sizes (before its lr: `case_lr`) and the metric it is read on."""
    kw = dict(CASES[name])
    kw.pop("lr", None)
    kw.setdefault("d", 512)
    role = kw.pop("model")
    metric = "train_mean" if role == "tabular" else "val_mean"  # tabular val problems never move
    return RunConfig(backend="sim", bp=EVAL_BP, budget=EVAL_BUDGET, d_val=512, n_evals=40,
                     **(presets_for("sim")[role] | kw)), metric


TUNE_OFFSET = 300
"""Seeds of the recipe's base-lr tuning (300..): apart from the pilots' (0.. or 100..) and the truth's (50..
or 200..)."""
TUNE_SEEDS = 2


def recipe_config(base: RunConfig, metric: str, out: Path, jobs: int | None = 2, grid: Sequence[float] = (),
                  report_seeds: Sequence[int] = ()) -> tuple[RunConfig, dict[str, Any]]:
    """`base` under the paper's recipe (claims.recipe: sqrt rule, KL + entropy on Easy) with its base lr
    chosen on tuning seeds at the full budget over EVAL_NS (claims.recipe.choose_on); the choice beside."""
    from isocompute.reports.claims.common import FULL
    from isocompute.reports.claims.recipe import VARIANT, choose_on, regularisation
    from studies.fit.predict import offset_seeds
    from studies.sweeps import build_sweep

    grid = tuple(grid or FULL.sqrt_lrs)
    rec = base.replace(lr_rule="sqrt", **regularisation(base.dataset))
    cfgs, labels = [], []
    for lr in grid:
        one = build_sweep("n-vs-m", rec.replace(lr=lr, n=EVAL_NS[0]), n=list(EVAL_NS), seeds=TUNE_SEEDS,
                          budget=base.budget)
        one = offset_seeds(one, TUNE_OFFSET, base.problem_seed)
        cfgs += one
        labels += [f"{VARIANT}{lr:g}"] * len(one)
    table = run_configs(cfgs, out, jobs, False, "tuning")
    label = {c.run_id: lab for c, lab in zip(cfgs, labels, strict=True)}
    table = table.assign(variant=table["run_id"].map(label))
    expected = {lab: labels.count(lab) for lab in set(labels)}
    tune = list(range(TUNE_OFFSET, TUNE_OFFSET + TUNE_SEEDS))
    ch = choose_on(table, metric, float(base.budget), grid, tune, list(report_seeds), expected)
    return rec.replace(lr=ch.lr), {"base_lr": ch.lr, "edge": ch.edge, "excluded": list(ch.excluded),
                                   "regularisation": regularisation(base.dataset)}


def evaluate_cases(names: Sequence[str], root: Path, jobs: int | None = 2) -> dict[str, dict]:
    """Every case: its lr (the recipe's tuned base lr, or the preset's constant lr), pilots sized by
    `pilot_fraction`, the truth runs, and the scores (`evaluate`)."""
    out = {}
    frac = pilot_fraction(EVAL_BP, EVAL_NS, EVAL_BUDGET)
    for name in names:
        base, metric = case_config(name)
        po, to = (0, 50) if name == DESIGN_CASE else (100, 200)
        if CASES[name].get("lr") == CONSTANT:
            lr_ = base.lr if base.lr is not None else preset_lr("sim", CASES[name]["model"])
            cfg, lr = base, {"constant": lr_}
        else:
            cfg, lr = recipe_config(base, metric, root / name, jobs,
                                    report_seeds=[*range(po, po + 4), *range(to, to + 4)])
        out[name] = evaluate(cfg, list(EVAL_NS), EVAL_BUDGET, root / name, fraction=frac, pilot_offset=po,
                             truth_offset=to, metric=metric, jobs=jobs) | {"recipe": lr}
    return out


BASELINES = ("paper", "constant")
"""What the signal rule must beat: the paper's extrapolation, and a constant n (the pilot frontier's last n
held fixed: no extrapolation at all)."""
RULES_SCORED = ("signal", *BASELINES)
NAMES = {"signal": "the signal rule", "paper": "the paper's extrapolation", "constant": "a constant n"}
MIN_PAIRED = 3
"""Cases where both rules predict that a paired comparison needs; with fewer the test cannot tell them
apart."""


def scores(res: dict[str, dict], names: Sequence[str]) -> dict[str, dict]:
    """Per rule over the cases `names`: "coverage" (share of cases where it predicts), "predicted" (those
    cases) and "accuracy" (its mean hit rate over them; None where it predicts none). An abstention is not
    a miss."""
    out = {}
    for k in RULES_SCORED:
        hit = {n: res[n]["rules"][k]["hit_rate"] for n in names}
        made = [n for n, h in hit.items() if h is not None]
        out[k] = {"coverage": len(made) / len(names) if names else float("nan"), "predicted": made,
                  "accuracy": float(np.mean([hit[n] for n in made])) if made else None}
    return out


def versus(res: dict[str, dict], names: Sequence[str], a: str, b: str) -> dict[str, Any]:
    """Rule `a` against rule `b` on the cases of `names` where both predict: the paired difference of hit
    rates with its 95% t-interval, judged like every verdict (judge.py): "beats" / "falls short of" where
    the interval clears 0, "is not distinguishable from" otherwise, and "cannot be told from" where fewer
    than MIN_PAIRED cases have both predictions."""
    from isocompute.reports.claims.judge import Rule, judge, t_interval

    both = [n for n in names if res[n]["rules"][a]["hit_rate"] is not None
            and res[n]["rules"][b]["hit_rate"] is not None]
    if len(both) < MIN_PAIRED:
        return {"cases": both, "interval": None, "verdict": "cannot be told from"}
    j = judge(Rule(f"{a} hit rate minus {b}'s, paired over cases", kind="above"),
              t_interval([res[n]["rules"][a]["hit_rate"] - res[n]["rules"][b]["hit_rate"] for n in both]))
    words = {"reproduced": "beats", "not reproduced": "falls short of",
             "inconclusive": "is not distinguishable from"}
    return {"cases": both, "interval": j.interval, "verdict": words[j.verdict]}


def conclusion(res: dict[str, dict]) -> tuple[list[str], dict[str, Any]]:
    """Coverage and accuracy of each rule over the cases other than the design case, over the cases whose
    truth rises and over those where it is flat; the signal rule against each baseline on the rising cases
    (where a predictor of a rising n* can be told from a constant n) and on all cases; and what the test
    cannot tell."""
    names = [n for n in res if n != DESIGN_CASE]
    rise = [n for n in names if res[n].get("rising")]
    flat = [n for n in names if not res[n].get("rising")]
    out: dict[str, Any] = {"cases": len(names), "rising": rise, "flat": flat, "all": scores(res, names),
                           "on_rising": scores(res, rise), "on_flat": scores(res, flat),
                           "versus": {b: versus(res, rise, "signal", b) for b in BASELINES},
                           "versus_all": {b: versus(res, names, "signal", b) for b in BASELINES}}

    def cov(sc: dict, k: str) -> str:
        acc = "n/a" if sc[k]["accuracy"] is None else f"{sc[k]['accuracy']:.0%}"
        return f"{NAMES[k]} predicts in {len(sc[k]['predicted'])} (accuracy {acc})"

    lines = [
        f"Over the {len(names)} cases other than the design case ({len(rise)} with a rising true n*: "
        f"{', '.join(rise) or 'none'}): " + "; ".join(cov(out["all"], k) for k in RULES_SCORED)
        + ". Accuracy is the mean hit rate over the cases a rule predicts; where it abstains it is not "
        "scored.",
        "",
    ]
    for label, vs in (("on the rising cases", out["versus"]), ("on all cases", out["versus_all"])):
        parts = []
        for b, v in vs.items():
            iv = v["interval"]
            parts.append(f"{v['verdict']} {NAMES[b]} ({len(v['cases'])} cases with both predictions"
                         + (f", signal minus {b} {iv.text(3)}" if iv is not None else "") + ")")
        lines.append(f"The signal rule {label}: " + "; ".join(parts) + ".")
    lines += [""]
    told = [b for b, v in out["versus"].items() if v["verdict"] in ("beats", "falls short of")]
    if not rise:
        what = ("no case has a rising true n*, so the test cannot evaluate a predictor of a rising n*: a "
                "constant n wins by construction where the truth is flat.")
    elif not told:
        what = (f"on the {len(rise)} rising cases the test cannot tell the signal rule from "
                + " or ".join(NAMES[b] for b in BASELINES)
                + " (too few cases where both predict, or an interval across 0).")
    else:
        what = ("on the rising cases the signal rule "
                + " and ".join(f"{out['versus'][b]['verdict']} {NAMES[b]}" for b in BASELINES) + ".")
    if flat:
        what += (f" On the {len(flat)} flat cases a constant n is right by construction; they do not test a "
                 "predictor of a rising n*.")
    lines.append("**Conclusion**: " + what)
    return lines, out


def _rate(r: dict, k: str) -> str:
    h = r["rules"][k]["hit_rate"]
    return "abstains" if h is None else f"{h:.0%}"


def evaluation_markdown(res: dict[str, dict]) -> str:
    """docs/PREDICT.md: per case its truth (rising or flat) and each rule's hit rate or abstention; the
    coverage and accuracy of each rule; the conclusion; then each case's n*(C) rows."""
    rules = ("signal", "paper", "constant")
    frac = next((r.get("pilot_fraction") for r in res.values() if r.get("pilot_fraction")), None)
    pilots = (f"each spending {frac:.1%} of the budget 2^20 (the larger of {PILOT_FRACTION:.0%} and what "
              f"gives n = {max(EVAL_NS)} {MIN_PILOT_STEPS} steps at bp = {EVAL_BP}; 4 seeds)" if frac else
              "4 seeds")
    intro = (
        "Generated by `isocompute report predict --out docs/PREDICT.md` from simulator runs (nothing "
        "typed by hand). Recipe cases train with the paper's recipe: lr = base * sqrt(bp n / 256), KL + "
        "entropy on Easy and neither on Hard and the mixes, the base lr chosen at the full budget on 2 "
        f"tuning seeds ({TUNE_OFFSET}..) over n = 2..256 (isocompute/reports/claims/recipe.py); constant-lr "
        "cases (`-constlr`) train at their preset's constant lr, where n*(C) rises. Per case: pilots of n = "
        f"2..256 at bp = {EVAL_BP}, {pilots}, and full-budget truth runs (4 other seeds); truth n*(C) = the "
        "FrontierFit frontier of the truth runs on the 21-point grid 2^10..2^20, 'rising' where its last "
        f"scored value exceeds its first by more than {RISE_FACTOR:g}x (no constant n is within a factor 2 "
        "of both). A hit = the predicted n within a factor 2 of the truth; hit rate over the 15 grid points "
        "in the upper 70% of log C; a rule that predicts nothing abstains (coverage), and its accuracy is "
        "over the cases it predicts. Baselines: `paper` = the paper's extrapolation of the pilots' n*(C), "
        "`constant` = the pilot frontier's last n held fixed (no extrapolation). The truth itself is noisy "
        "(4 seeds): its n* can jump by more than a factor 2 between neighbouring grid points."
    )
    lines = ["# `isocompute predict`: hit rates against swept n*(C)", "", intro, "",
             "| case | true n* | signal rule | paper extrapolation | constant | signal rule: z*, exponent "
             "1/gamma | lr |",
             "|---|---|---|---|---|---|---|"]
    for name, r in res.items():
        sig = r.get("signal") or {}
        zs, ex = sig.get("z_star"), sig.get("exponent")
        tag = " (design)" if name == DESIGN_CASE else ""
        rec = r.get("recipe") or {}
        lr = (f"constant {rec['constant']:g}" if "constant" in rec else
              "n/a" if "base_lr" not in rec else f"recipe, base {rec['base_lr']:g}"
              + (" (grid edge)" if rec.get("edge") else ""))
        sig_text = f"{zs:.2f}, {ex:.2f}" if zs is not None and ex is not None else "n/a"
        truth = "rising" if r.get("rising") else "flat"
        lines.append(f"| {name}{tag} | {truth} | {' | '.join(_rate(r, k) for k in rules)} | {sig_text} | "
                     f"{lr} |")
    _, out = conclusion(res)
    lines += ["", "Coverage (cases where the rule predicts, of those scored) and accuracy (mean hit rate "
              "over them), the design case left out:", "",
              "| rule | all cases | rising true n* | flat true n* |", "|---|---|---|---|"]
    for k in rules:
        cells = []
        for key, n in (("all", out["cases"]), ("on_rising", len(out["rising"])),
                       ("on_flat", len(out["flat"]))):
            sc = out[key][k]
            acc = "-" if sc["accuracy"] is None else f"{sc['accuracy']:.0%}"
            cells.append(f"{len(sc['predicted'])}/{n}, {acc}")
        lines.append(f"| {NAMES[k]} | " + " | ".join(cells) + " |")
    lines += [""] + conclusion(res)[0] + [""]
    for name, r in res.items():
        st = [r["rules"][k]["status"] for k in ("signal", "paper")]
        status = st[0] if st[0] == st[1] else f"signal rule: {st[0]}; paper: {st[1]}"
        lines += [f"## {name}", "", f"Status: {status}.", "",
                  "| compute | truth n* | signal | paper | constant | upper 70% |",
                  "|---|---|---|---|---|---|"]
        preds = [r["rules"][k]["n_star"] for k in ("signal", "paper", "constant")]
        for i, c in enumerate(r["compute"]):
            cells = " | ".join(str(p[i]) if p else "-" for p in preds)
            up = "yes" if r["upper"][i] else ""
            lines.append(f"| 2^{math.log2(c):.1f} | {r['truth'][i]} | {cells} | {up} |")
        lines.append("")
    return "\n".join(lines)
