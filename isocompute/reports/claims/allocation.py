"""Sections on the allocation itself: the metric (finding 2), fixed batch and sensitivity (3), joint B_p (4),
decoupled baselines (9)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from isocompute.reports.claims.common import (
    TOP_GAIN,
    ClaimsMode,
    Section,
    budget_text,
    ci,
    contrast,
    contrast_text,
    fmt,
    growth,
    growth_text,
    n_star_cell,
    n_star_rows,
    n_star_table,
    seed_rewards,
    setup_text,
    stars_text,
)
from isocompute.reports.claims.judge import (
    Rule,
    combine,
    gain_rule,
    judge,
    parts_text,
    seed_bootstrap,
    t_interval,
)
from studies.declared import StudySpec, Tables
from studies.fit.analyses import run_rewards

METRICS = ("best_k", "worst_k", "mean")


# ------------------------------------------------------------------------------------------------ finding 2
def _f2(p: ClaimsMode) -> dict:
    return {
        ds: p.study(f"side-inter-{ds}", n=p.side_ns, budget=p.side_top, dataset=ds) for ds in ("easy", "hard")
    }


F2_EASY = Rule("tilt toward large n of worst@4 minus that of best@4 on Easy (per seed: slope of the "
               "top-budget record reward on log2 n)", kind="above")
F2_HARD = Rule("the same tilt difference on Hard", kind="below")
"""Finding 2's key quantity: how much more a metric favours large n than another, as the per-seed difference
of the slopes of reward on log2 n (n* itself is an argmax; the tilt is its smooth, seed-paired version). On
Easy worst@4 should favour larger n than best@4 (n sharpens: above 0); on Hard the reverse (n expands
coverage: below 0)."""


def tilt(piv) -> np.ndarray:
    """Per seed (rows of a seed x n matrix of rewards): the OLS slope of reward on log2 n."""
    x = np.log2(np.asarray(piv.columns, dtype=float))
    xc = x - x.mean()
    y = piv.to_numpy(dtype=float)
    return (y - y.mean(axis=1, keepdims=True)) @ xc / (xc @ xc)


def f2_measure(t: Tables, p: ClaimsMode) -> dict:
    out = {}
    for ds, st in _f2(p).items():
        tab = t[st.name]
        out[ds] = {m: n_star_rows(tab, [p.side_top], f"val_{m}")[0] for m in METRICS}
        slopes = {m: tilt(seed_rewards(tab, float(p.side_top), f"val_{m}", "best").dropna())
                  for m in ("best_k", "worst_k")}
        out[ds]["tilt"] = t_interval(slopes["worst_k"] - slopes["best_k"])
    return {"datasets": out, "k": 4}


def f2_verdict(x: dict) -> tuple[str, str]:
    parts = {"easy": judge(F2_EASY, x["datasets"]["easy"]["tilt"]),
             "hard": judge(F2_HARD, x["datasets"]["hard"]["tilt"])}
    v = combine([j.verdict for j in parts.values()])
    e, h = x["datasets"]["easy"], x["datasets"]["hard"]
    return v, (
        f"rule: {F2_EASY.text()}; {F2_HARD.text()}; both needed. {parts_text(parts)}. n* per metric at the "
        f"top budget (not in the verdict): easy best@4 {n_star_cell(e['best_k'])}, worst@4 "
        f"{n_star_cell(e['worst_k'])}; hard best@4 {n_star_cell(h['best_k'])}, worst@4 "
        f"{n_star_cell(h['worst_k'])}."
    )


F2 = Section(
    "f2",
    "Finding 2: the optimal n depends on the metric (best@k vs worst@k)",
    "Fig 8: Easy: n* for worst@4 > n* for best@4 (n sharpens); Hard: n* for best@4 > for worst@4.",
    studies=lambda p: tuple(_f2(p).values()),
    measure=f2_measure,
    verdict=f2_verdict,
    body=lambda x: (
        [
            "| dataset | n* for best@k (pass@k) | n* for worst@k (all k correct) | n* for mean | tilt of "
            "worst@k minus best@k (per log2 n, 95% CI) |",
            "|---|---|---|---|---|",
        ]
        + [
            f"| {ds} | "
            + " | ".join(f"{n_star_cell(r[m])} ({fmt(r[m]['mean'], r[m]['ci'])})" for m in METRICS)
            + f" | {r['tilt'].text()} |"
            for ds, r in x["datasets"].items()
        ]
    ),
    setup=lambda p: setup_text(
        p,
        _f2(p)["easy"],
        f"; dataset easy (KL + entropy) and hard (neither), each with its own tuned base lr; n in "
        f"{list(p.side_ns)}; k=4; record metric at the top budget",
    ),
    refused="the llm backend needs calibrated easy and hard splits (isocompute llm calibrate) first",
    rules=(F2_EASY, F2_HARD),
)


# ---------------------------------------------------------------------------------------------- findings 3, 4
PAPER_BPS = (32, 1024)
"""The paper's B_p range (docs/PAPER.md sweep grid, Fig 10 and 21-22: B_p in 32..1024). B_p = 8, below it,
is left out: it inflates the measured B_p sensitivity."""


def bps(p: ClaimsMode) -> tuple[int, ...]:
    """B_p values of the joint study: 4x apart inside the paper's range and at most the problem-set size."""
    return tuple(b for b in (32, 128, 512) if b <= (p.d or b) and PAPER_BPS[0] <= b <= PAPER_BPS[1])


def _batch(p: ClaimsMode) -> int:
    """Total batch of the fixed-batch study: 4096 at d = 1024 so that B_p = B / n spans 32..1024 over n 4..128
    (at 1024 only n <= 32 would keep B_p >= 32); 256 for the quick plan."""
    return 4096 if (p.d or 0) >= 1024 else 256


def _fixed(p: ClaimsMode) -> StudySpec:
    B = _batch(p)
    lo, hi = PAPER_BPS[0], min(PAPER_BPS[1], p.d or B)
    ns = tuple(n for n in (2, 4, 8, 16, 32, 64, 128, 256) if lo <= B // n <= hi)
    name = f"{p.name}/fixed-batch-{B}"
    return StudySpec(
        name,
        kind="fixed-batch",
        preset="interference",
        n=ns,
        batch=(B,),
        budget=p.side_top,
        seeds=p.seeds,
        seed0=p.seed_offset,
        base=p.over(**p.lr_overrides(name, "easy")),
    )


def _joint(p: ClaimsMode) -> dict[int, StudySpec]:
    return {bp: p.study(f"side-inter-bp{bp}", n=p.side_ns, budget=p.side_top, bp=bp) for bp in bps(p)}


def _joint_rewards(t: Tables, p: ClaimsMode, stat: str = "best"):
    """Seed x (bp, n) matrix of the joint study's rewards at the top budget (record or final)."""

    tab = pd.concat([t[st.name] for st in _joint(p).values()], ignore_index=True)
    rr = run_rewards(tab, keys=("bp", "n", "seed"), budget=float(p.side_top), stat=stat)
    return rr.pivot_table(index="seed", columns=["bp", "n"], values="reward").dropna()


def ranges(wide) -> tuple[float, float]:
    """(mean range over n at fixed B_p, mean range over B_p at fixed n) of the seed-mean rewards of a seed x
    (bp, n) matrix: the paper's sensitivity (Fig 10), studies.fit.analyses.sensitivity on the same numbers."""
    m = wide.mean(axis=0).unstack("n")
    over_n = (m.max(axis=1) - m.min(axis=1)).mean()
    over_bp = (m.max(axis=0) - m.min(axis=0)).mean()
    return float(over_n), float(over_bp)


def bp_spread(wide) -> float:
    """Spread over B_p of the best reward: max over B_p minus min over B_p of (max over n of the seed-mean
    reward)."""
    best = wide.mean(axis=0).unstack("n").max(axis=1)
    return float(best.max() - best.min())


def _sens(t: Tables, p: ClaimsMode) -> dict:
    """Sensitivity of the record (and final) reward at the top budget: the mean ranges over n and over B_p,
    and their difference with its seed-bootstrap interval (judge.seed_bootstrap)."""
    out = {}
    for stat, tag in (("best", ""), ("final", "_final")):
        wide = _joint_rewards(t, p, stat)
        rn, rb = ranges(wide)
        out |= {f"range_n{tag}": rn, f"range_bp{tag}": rb,
                f"sens{tag}": seed_bootstrap(wide, lambda w: float(np.subtract(*ranges(w))))}
    return out


F3_GAIN = gain_rule(f"{TOP_GAIN}, at fixed total batch B = bp n (top M)")
F3_SENS = Rule("mean range of the reward over n minus that over B_p (top budget, record reward, seed "
               "bootstrap)", kind="above")
"""Finding 3's key quantities: n*(M) rising to a large n shows as the large-n gain at the largest M; and the
reward is more sensitive to n than to B_p when the difference of their ranges lies above 0."""


def f3_measure(t: Tables, p: ClaimsMode) -> dict:
    B = _batch(p)
    st = _fixed(p)
    tab = t[st.name]
    ms = [4**k for k in range(8) if B * 4**k <= p.side_top]
    rows = [r | {"m": int(r["budget"]), "bp_star": B // int(r["n_star"])}
            for r in n_star_rows(tab, [float(m) for m in ms], x="m")]
    gain = contrast(tab, float(p.side_top), p, list(st.n), "best")
    return {"batch": B, "rows": rows, "gain": gain, **_sens(t, p), "bps": list(bps(p))}


def f3_verdict(x: dict) -> tuple[str, str]:
    parts = {"n*(M) rises": judge(F3_GAIN, x["gain"]["iv"]),
             "n matters more than B_p": judge(F3_SENS, x["sens"])}
    v = combine([j.verdict for j in parts.values()])
    return v, (
        f"rule: {F3_GAIN.text()}; {F3_SENS.text()} (B_p in the paper's range, {x['bps']}); both needed (one "
        f"of each: partly). {parts_text(parts)}. n*(M) (not in the verdict): {stars_text(x['rows'])}; final "
        f"reward: range over n {x.get('range_n_final', float('nan')):.4f} vs over B_p "
        f"{x.get('range_bp_final', float('nan')):.4f}."
    )


def f3_body(x: dict) -> list[str]:
    return (
        ["| steps M (= C / B) | n* | B_p* | reward ± CI |", "|---|---|---|---|"]
        + [f"| {r['m']} | {n_star_cell(r)} | {r['bp_star']} | {fmt(r['mean'], r['ci'])} |" for r in x["rows"]]
        + [
            "",
            f"Top-M gain of large n at B = {x['batch']}: {contrast_text(x['gain'])}.",
            "",
            f"Sensitivity at the top budget (record val_mean, seed means): mean range over n at fixed "
            f"B_p = {x['range_n']:.4f}; mean range over B_p in {x['bps']} at fixed n = {x['range_bp']:.4f}; "
            f"difference {x['sens'].text()} (95% seed bootstrap). Final val_mean: "
            f"{x.get('range_n_final', float('nan')):.4f} over n, "
            f"{x.get('range_bp_final', float('nan')):.4f} over B_p.",
        ]
    )


F3 = Section(
    "f3",
    "Finding 3: at fixed total batch B = B_p n, n*(M) rises with the number of steps",
    "Fig 9, 18, 19: Easy: n*(M) rises as a sigmoid in M (B_p* falls); Fig 10: reward varies more with n than "
    "with B_p.",
    studies=lambda p: (_fixed(p), *_joint(p).values()),
    measure=f3_measure,
    verdict=f3_verdict,
    body=f3_body,
    setup=lambda p: setup_text(
        p,
        _fixed(p),
        f"; B = bp*n = {_batch(p)} (the sqrt rule gives every n one lr); n in {list(_fixed(p).n)}; record "
        "val_mean, n* in M",
    ),
    rules=(F3_GAIN, F3_SENS),
    ceiling=lambda p: {f"B = {_batch(p)}": (_fixed(p), "val_mean")},
)


F4_GAIN = gain_rule(f"{TOP_GAIN}, at each B_p")
F4_SPREAD = Rule("spread over B_p of the best reward at the top budget (max minus min over B_p of the best "
                 "seed-mean record over n; seed bootstrap)", kind="equivalent")
"""Finding 4's key quantities: n* still rises to a large n at every B_p (finding 1's gain per B_p), and B_p
matters little: the spread of the best reward over B_p is equivalent to 0 within the margin stated in
judge.EQUIVALENCE_MARGIN (TOST)."""


def f4_measure(t: Tables, p: ClaimsMode) -> dict:
    small = [n for n in p.side_ns if n <= p.small_max]
    rows, gains = {}, {}
    for bp, st in _joint(p).items():
        tab = t[st.name]
        rows[str(bp)] = n_star_rows(tab, p.budgets(p.side_top), small=small)
        gains[str(bp)] = contrast(tab, float(p.side_top), p, p.side_ns, "best")
    out = {"rows": rows, "gains": gains}
    for stat, tag in (("best", ""), ("final", "_final")):
        wide = _joint_rewards(t, p, stat)
        out[f"spread{tag}"] = seed_bootstrap(wide, bp_spread)
        out[f"range_n{tag}"] = ranges(wide)[0]
    return out


def f4_verdict(x: dict) -> tuple[str, str]:
    parts = {f"B_p={bp}": judge(F4_GAIN, g["iv"]) for bp, g in x["gains"].items()}
    parts["B_p spread"] = judge(F4_SPREAD, x["spread"])
    v = combine([j.verdict for j in parts.values()])
    return v, (
        f"rule: {F4_GAIN.text()}; {F4_SPREAD.text()}; all needed (a mix: partly). {parts_text(parts)}. "
        f"Growth of n* where determined (not in the verdict): "
        + ", ".join(f"{bp}: {growth_text(growth(r))}" for bp, r in x["rows"].items())
        + f"; final reward: spread over B_p {x['spread_final'].text()}, mean range over n "
        f"{x.get('range_n_final', float('nan')):.4f}."
    )


F4 = Section(
    "f4",
    "Finding 4: joint (B_p, n, M): n* still grows with C; B_p matters little",
    "Fig 21-22: n* a sigmoid in C; B_p in 32..1024 matters little; pick n from n*(C), smallest stable B_p.",
    studies=lambda p: tuple(_joint(p).values()),
    measure=f4_measure,
    verdict=f4_verdict,
    body=lambda x: (
        n_star_table({f"B_p={bp}": r for bp, r in x["rows"].items()})
        + [
            "",
            "Top-budget gain of large n per B_p: "
            + "; ".join(f"B_p={bp}: {contrast_text(g)}" for bp, g in x["gains"].items()),
            "",
            f"Spread over B_p of the best reward at the top budget: {x['spread'].text()} (record, 95% seed "
            f"bootstrap; 90%: [{x['spread'].lo90:+.4f}, {x['spread'].hi90:+.4f}]); mean range over n "
            f"{x['range_n']:.4f}.",
        ]
    ),
    setup=lambda p: setup_text(
        p, _joint(p)[32], f"; bp in {list(bps(p))}, each with its own tuned base lr; n in {list(p.side_ns)}; "
        "record val_mean"
    ),
    rules=(F4_GAIN, F4_SPREAD),
    ceiling=lambda p: {f"B_p = {bp}": (st, "val_mean") for bp, st in _joint(p).items()},
)


# ------------------------------------------------------------------------------------------------ finding 9
F9_BP = 128
"""Fig 26's problem batch (the report's first setup used the plan's B_p = 32)."""


def _f9_sizes(p: ClaimsMode) -> tuple[int, int, int]:
    """(large n, small n, B_p): the paper's 256 / 64 at B_p = 128 on the full plan; the quick plan keeps its
    B_p (a B_p of 128 would leave it 2 steps)."""
    return (256, 64, F9_BP) if (p.d or 0) >= 1024 else (64, 16, p.bp)


def paper_charge(n: int, n_est: int) -> int:
    """Rollouts per problem per step as Fig 26 charges them: the decoupled run samples n_est rollouts for its
    baseline and updates on n of them (a subsample), so it costs max(n, n_est), not n + n_est."""
    return max(n, n_est)


def _f9(p: ClaimsMode) -> dict[str, StudySpec]:
    hi, lo, bp = _f9_sizes(p)
    # the simulator draws the n_est baseline rollouts separately and counts n + n_est per step; the budget is
    # raised by (lo + hi) / hi so the run takes the steps the paper's charge of `hi` per step pays for
    dec_budget = p.side_top * (lo + hi) // paper_charge(lo, hi)
    return {
        f"{hi}/{hi}": p.study(f"side-inter-n{hi}-bp{bp}", n=(hi,), budget=p.side_top, bp=bp),
        f"{lo}/{hi}": p.study(
            f"side-inter-n{lo}-est{hi}-bp{bp}", n=(lo,), budget=dec_budget, bp=bp, n_est=hi
        ),
        f"{lo}/{lo}": p.study(f"side-inter-n{lo}-bp{bp}", n=(lo,), budget=p.side_top, bp=bp),
    }


def _charged(tab, n_est: int):
    """The table with `compute` recounted at the paper's charge (steps * bp * max(n, n_est))."""
    if not n_est:
        return tab
    n = int(tab["n"].iloc[0])
    out = tab.copy()
    out["compute"] = tab["compute"] * paper_charge(n, n_est) / (n + n_est)
    return out


def f9_measure(t: Tables, p: ClaimsMode) -> dict:
    """Record and final reward of each variant at the smallest final (paper-charged) compute of all runs,
    paired over seeds: (1) large n minus decoupled (3), (3) minus small n (2), and (1) minus (2), each a
    t-interval over seeds."""
    specs = _f9(p)
    tabs = {k: _charged(t[st.name], dict(st.base).get("n_est", 0)) for k, st in specs.items()}
    C = min(float(tab.groupby("run_id")["compute"].max().min()) for tab in tabs.values())
    names = list(tabs)
    out: dict = {"C": C, "names": names, "bp": _f9_sizes(p)[2]}
    for stat in ("best", "final"):
        vals = {k: seed_rewards(tab, C, stat=stat).iloc[:, 0] for k, tab in tabs.items()}
        key = "record" if stat == "best" else "final"
        out[key] = {
            "values": {k: ci(v) for k, v in vals.items()},
            "d13": t_interval((vals[names[0]] - vals[names[1]]).dropna()),
            "d32": t_interval((vals[names[1]] - vals[names[2]]).dropna()),
            "d12": t_interval((vals[names[0]] - vals[names[2]]).dropna()),
        }
    return out


F9_BEATS = Rule("record reward of large n minus the other variant (paired)", kind="above")
F9_SAME = Rule("record reward of the decoupled baseline (3) minus small n (2) (paired)", kind="equivalent")
"""Finding 9's key quantities, Fig 26's ordering (1) > (3) ~ (2): the large-n run beats both others, and the
better baseline alone changes little: (3) - (2) equivalent to 0 within judge.EQUIVALENCE_MARGIN (TOST)."""


def f9_parts(r: dict, names: list[str]) -> dict:
    """The three judgements of one metric (record or final)."""
    return {f"{names[0]} − {names[1]}": judge(F9_BEATS, r["d13"]),
            f"{names[0]} − {names[2]}": judge(F9_BEATS, r["d12"]),
            f"{names[1]} − {names[2]}": judge(F9_SAME, r["d32"])}


def f9_verdict(x: dict) -> tuple[str, str]:
    n = x["names"]
    parts = f9_parts(x["record"], n)
    fin = f9_parts(x["final"], n)
    v = combine([j.verdict for j in parts.values()])
    return v, (
        f"rule (Fig 26's ordering (1) > (3) ~ (2), record reward): {F9_BEATS.text()}, for {n[0]} against "
        f"{n[1]} and {n[2]}; {F9_SAME.text()}; all needed (a mix: partly). {parts_text(parts)}. Final reward "
        "(not in the verdict): " + ", ".join(f"{k} {j.verdict}" for k, j in fin.items()) + "."
    )


def f9_body(x: dict) -> list[str]:
    n = x["names"]
    lines = [
        "| n_train / n_est | record val_mean ± CI | final val_mean ± CI |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {fmt(*x['record']['values'][k])} | {fmt(*x['final']['values'][k])} |" for k in n]
    for key, lab in (("record", "record"), ("final", "final")):
        r = x[key]
        lines += [
            "",
            f"Paired differences ({lab}, 95% t-interval): (1) − (3) {n[0]} − {n[1]} = {r['d13'].text()}; "
            f"(3) − (2) {n[1]} − {n[2]} = {r['d32'].text()} (90%: [{r['d32'].lo90:+.4f}, "
            f"{r['d32'].hi90:+.4f}]); (1) − (2) {n[0]} − {n[2]} = {r['d12'].text()}.",
        ]
    lines += [
        "",
        f"All at C = {budget_text(x['C'])} rollouts charged as Fig 26 does: the decoupled run {n[1]} pays "
        f"for its {n[1].split('/')[1]} baseline rollouts and updates on a subsample of them, so a step costs "
        f"B_p x {n[1].split('/')[1]}, not B_p x ({n[1].replace('/', ' + ')}); the simulator draws the "
        "update's rollouts apart from the baseline's, so its compute column is rescaled and its budget "
        "raised to give it the steps that charge pays for.",
    ]
    return lines


F9 = Section(
    "f9",
    "Finding 9: better baselines help a little; most of large n's gain is exploration",
    "Fig 26 (B_p = 128): n_train/n_est 256/256 (1) > 64/256 (3) ~ 64/64 (2); the decoupled run estimates its "
    "baseline from 256 rollouts and updates on 64 of them.",
    studies=lambda p: tuple(_f9(p).values()),
    measure=f9_measure,
    verdict=f9_verdict,
    body=f9_body,
    setup=lambda p: setup_text(
        p, next(iter(_f9(p).values())),
        f"; B_p = {_f9_sizes(p)[2]}; variants {list(_f9(p))} (n_est = separate baseline rollouts), each with "
        "its own tuned base lr"
    ),
    refused="the llm adapter does not implement n_est (decoupled baselines) yet",
    rules=(F9_BEATS, F9_SAME),
)

__all__ = ["F2", "F3", "F4", "F9"]
