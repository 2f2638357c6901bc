"""Sections on the allocation itself: the metric (finding 2), fixed batch and sensitivity (3), joint B_p (4),
decoupled baselines (9)."""

from __future__ import annotations

import numpy as np

from isocompute.reports.claims.common import (
    BOOT,
    ClaimsMode,
    Section,
    budget_text,
    ci,
    fmt,
    growth,
    growth_text,
    monotone,
    n_star_rows,
    n_star_table,
    seed_rewards,
    setup_text,
    stars,
    yes,
)
from studies.declared import StudySpec, Tables
from studies.fit.frontier import FrontierFit, run_rewards, sensitivity, sensitivity_summary

METRICS = ("best_k", "worst_k", "mean")


# ------------------------------------------------------------------------------------------------ finding 2
def _f2(p: ClaimsMode) -> dict:
    return {
        ds: p.study(f"side-inter-{ds}", n=p.side_ns, budget=p.side_top, dataset=ds) for ds in ("easy", "hard")
    }


def f2_measure(t: Tables, p: ClaimsMode) -> dict:
    out = {}
    for ds, st in _f2(p).items():
        out[ds] = {m: n_star_rows(t[st.name], [p.side_top], f"val_{m}")[0] for m in METRICS}
    return {"datasets": out, "k": 4}


def f2_verdict(x: dict) -> tuple[str, str]:
    e, h, k = x["datasets"]["easy"], x["datasets"]["hard"], x["k"]
    easy_ok = e["worst_k"]["n_star"] > e["best_k"]["n_star"]
    hard_ok = h["best_k"]["n_star"] > h["worst_k"]["n_star"]
    v = "reproduced" if easy_ok and hard_ok else "partly" if easy_ok or hard_ok else "not reproduced"
    return v, (
        f"rule: easy n*(worst@{k}) > n*(best@{k}) and hard n*(best@{k}) > n*(worst@{k}); easy: "
        f"{yes(easy_ok)}, hard: {yes(hard_ok)} (n* of each metric's frontier at the top budget; ties "
        "count as no)."
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
            "| dataset | n* for best@k (pass@k) | n* for worst@k (all k correct) | n* for mean |",
            "|---|---|---|---|",
        ]
        + [
            f"| {ds} | "
            + " | ".join(f"{r[m]['n_star']} ({fmt(r[m]['mean'], r[m]['ci'])})" for m in METRICS)
            + " |"
            for ds, r in x["datasets"].items()
        ]
    ),
    setup=lambda p: setup_text(
        p,
        _f2(p)["easy"],
        f"; dataset easy and hard; n in {list(p.side_ns)}; k=4; record metric at the top budget",
    ),
    refused="the llm backend needs calibrated easy and hard splits (isocompute llm calibrate) first",
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
    return StudySpec(
        f"{p.name}/fixed-batch-{B}",
        kind="fixed-batch",
        preset="interference",
        n=ns,
        batch=(B,),
        budget=p.side_top,
        seeds=p.seeds,
        base=p.over(),
    )


def _joint(p: ClaimsMode) -> dict[int, StudySpec]:
    return {bp: p.study(f"side-inter-bp{bp}", n=p.side_ns, budget=p.side_top, bp=bp) for bp in bps(p)}


def _sens(t: Tables, p: ClaimsMode) -> dict:
    """Mean range of the record (and final) reward at the top budget over n (bp fixed) and over bp (n
    fixed)."""
    import pandas as pd

    tab = pd.concat([t[st.name] for st in _joint(p).values()], ignore_index=True)
    out = {}
    for stat, tag in (("best", ""), ("final", "_final")):
        s = sensitivity_summary(sensitivity(tab, "val_mean", ("n", "bp"), budget=p.side_top, stat=stat))
        out |= {f"range_n{tag}": s.get("n", float("nan")), f"range_bp{tag}": s.get("bp", float("nan"))}
    return out


def f3_measure(t: Tables, p: ClaimsMode) -> dict:
    B = _batch(p)
    tab = t[_fixed(p).name]
    ms = [4**k for k in range(8) if B * 4**k <= p.side_top]
    ff = FrontierFit(metric="val_mean", by="n", x="m").fit(tab)
    at = ff.n_star_at(ms)
    rows = []
    for m, n in zip(at["m"], at["n"], strict=True):
        if n is None:
            continue
        piv = seed_rewards(tab, float(m), stat="best", x="m")
        mean, h = ci(piv[n])
        rows.append({"m": int(m), "n_star": int(n), "bp_star": B // int(n), "mean": mean, "ci": h})
    return {"batch": B, "rows": rows, **_sens(t, p), "bps": list(bps(p))}


def f3_verdict(x: dict) -> tuple[str, str]:
    s = [r["n_star"] for r in x["rows"]]
    mono, rises = monotone(s), growth(s)
    sens_ok = x["range_n"] > x["range_bp"]
    if mono and rises >= 4 and sens_ok:
        v = "reproduced"
    elif (mono and rises >= 2) or sens_ok:
        v = "partly"
    else:
        v = "not reproduced"
    return v, (
        f"rule: n*(M) non-decreasing and rising >= 4x (last / first M), and reward more sensitive to n than "
        f"to B_p (B_p in the paper's range, {x['bps']}). n*(M) = {s} "
        f"({'monotone' if mono else 'not monotone'}, {growth_text(rises)}); range over n "
        f"{x['range_n']:.4f} vs over B_p {x['range_bp']:.4f} (record reward; final: "
        f"{x.get('range_n_final', float('nan')):.4f} vs {x.get('range_bp_final', float('nan')):.4f})."
    )


def f3_body(x: dict) -> list[str]:
    return (
        ["| steps M (= C / B) | n* | B_p* | reward ± CI |", "|---|---|---|---|"]
        + [f"| {r['m']} | {r['n_star']} | {r['bp_star']} | {fmt(r['mean'], r['ci'])} |" for r in x["rows"]]
        + [
            "",
            f"Sensitivity at the top budget (record val_mean, seed means): mean range over n at fixed "
            f"B_p = {x['range_n']:.4f}; mean range over B_p in {x['bps']} at fixed n = {x['range_bp']:.4f}. "
            f"Final val_mean: {x.get('range_n_final', float('nan')):.4f} over n, "
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
        f"; B = bp*n = {_batch(p)}; n in {list(_fixed(p).n)}; record val_mean, n* of the frontier in M",
    ),
)


def f4_measure(t: Tables, p: ClaimsMode) -> dict:
    rows = {bp: n_star_rows(t[st.name], p.budgets(p.side_top), boot=BOOT) for bp, st in _joint(p).items()}
    sens = _sens(t, p)
    final = {}
    for bp, st in _joint(p).items():
        r = run_rewards(t[st.name], keys=("n", "seed"), budget=float(p.side_top), stat="final")
        final[str(bp)] = float(r.groupby("n")["reward"].mean().max())
    return {"rows": {str(bp): r for bp, r in rows.items()}, "range_n": sens["range_n"],
            "range_n_final": sens["range_n_final"], "best_final": final}


def f4_verdict(x: dict) -> tuple[str, str]:
    growths = {bp: growth(stars(r)) for bp, r in x["rows"].items()}
    best = {bp: r[-1]["mean"] for bp, r in x["rows"].items()}
    spread = max(best.values()) - min(best.values())
    grow_ok = all(g >= 4 for g in growths.values())
    little = spread < x["range_n"]
    fin = x.get("best_final") or {}
    fspread = (max(fin.values()) - min(fin.values())) if fin else float("nan")
    v = "reproduced" if grow_ok and little else "partly" if grow_ok or little else "not reproduced"
    return v, (
        f"rule: n* grows >= 4x (last / first budget) for every B_p (the paper's range 32..1024) and the "
        f"spread of the best reward over B_p is smaller than the mean range over n. Growth per B_p: "
        f"{', '.join(f'{bp}: {growth_text(g)}' for bp, g in growths.items())}"
        f"; spread over B_p {spread:.4f} vs range over n {x['range_n']:.4f} (record reward; final: "
        f"{fspread:.4f} vs {x.get('range_n_final', float('nan')):.4f})."
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
            "Best reward at the top budget per B_p (record reward of n*; best final reward over n): "
            + ", ".join(f"B_p={bp}: {r[-1]['mean']:.4f}; {x.get('best_final', {}).get(bp, float('nan')):.4f}"
                        for bp, r in x["rows"].items()),
        ]
    ),
    setup=lambda p: setup_text(
        p, _joint(p)[32], f"; bp in {list(bps(p))}; n in {list(p.side_ns)}; record val_mean"
    ),
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
    paired over seeds: (1) large n minus decoupled (3), (3) minus small n (2), and (1) minus (2)."""
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
            "d13": ci((vals[names[0]] - vals[names[1]]).dropna()),
            "d32": ci((vals[names[1]] - vals[names[2]]).dropna()),
            "d12": ci((vals[names[0]] - vals[names[2]]).dropna()),
        }
    return out


def _above(d: tuple[float, float]) -> bool:
    """A paired difference (mean, 95% half-width) whose CI lies above 0."""
    m, h = d
    return bool(np.isfinite(m) and np.isfinite(h) and m - h > 0)


def f9_order(r: dict) -> dict:
    """Fig 26's ordering (1) > (3) ~ (2) on one metric: (1) beats both with 95% CIs above 0, and the better
    baseline's gain (3) - (2) is under half of large n's gain (1) - (2) ("better baselines help a little;
    most of the gain is exploration")."""
    d12, d13, d32 = r["d12"][0], r["d13"][0], r["d32"][0]
    beats = _above(r["d13"]) and _above(r["d12"])
    small = bool(np.isfinite(d32) and d12 > 0 and abs(d32) < 0.5 * d12)
    return {"beats": beats, "baseline_small": small, "share": d32 / d12 if d12 else float("nan"),
            "ok": beats and small, "d13": d13}


def f9_verdict(x: dict) -> tuple[str, str]:
    n = x["names"]
    rec, fin = f9_order(x["record"]), f9_order(x["final"])
    v = "reproduced" if rec["ok"] else "partly" if rec["beats"] or _above(x["record"]["d12"]) else (
        "not reproduced")
    return v, (
        f"rule (Fig 26's ordering (1) > (3) ~ (2), record reward): {n[0]} beats {n[1]} and {n[2]} with 95% "
        f"CIs above 0, and the baseline's gain {n[1]} − {n[2]} is under half of {n[0]} − {n[2]}; partly: "
        f"{n[0]} beats {n[2]} only, or the baseline explains half or more. {n[0]} above both: "
        f"{yes(rec['beats'])}; baseline share of the gain {rec['share']:.2f} (under 0.5: "
        f"{yes(rec['baseline_small'])}). Final reward: above both {yes(fin['beats'])}, share "
        f"{fin['share']:.2f}."
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
            f"Paired differences ({lab}): (1) − (3) {n[0]} − {n[1]} = {fmt(*r['d13'], 4)}; (3) − (2) "
            f"{n[1]} − {n[2]} = {fmt(*r['d32'], 4)}; (1) − (2) {n[0]} − {n[2]} = {fmt(*r['d12'], 4)}.",
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
        f"; B_p = {_f9_sizes(p)[2]}; variants {list(_f9(p))} (n_est = separate baseline rollouts)"
    ),
    refused="the llm adapter does not implement n_est (decoupled baselines) yet",
)

__all__ = ["F2", "F3", "F4", "F9"]
