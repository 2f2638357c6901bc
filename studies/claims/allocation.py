"""Sections on the allocation itself: the metric (finding 2), fixed batch and sensitivity (3), joint B_p (4),
decoupled baselines (9)."""

from __future__ import annotations

from studies.claims.common import (
    Plan,
    Section,
    budget_text,
    ci,
    fmt,
    growth,
    monotone,
    n_star_rows,
    n_star_table,
    seed_rewards,
    setup_text,
    stars,
    yes,
)
from studies.declared import StudySpec, Tables
from studies.frontier import FrontierFit, sensitivity, sensitivity_summary

METRICS = ("best_k", "worst_k", "mean")


# ------------------------------------------------------------------------------------------------ finding 2
def _f2(p: Plan) -> dict:
    return {
        ds: p.study(f"side-inter-{ds}", n=p.side_ns, budget=p.side_top, dataset=ds) for ds in ("easy", "hard")
    }


def f2_measure(t: Tables, p: Plan) -> dict:
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
BPS = (8, 32, 128)


def _batch(p: Plan) -> int:
    return 1024 if (p.d or 0) >= 1024 else 256


def _fixed(p: Plan) -> StudySpec:
    B = _batch(p)
    ns = tuple(n for n in (2, 4, 8, 16, 32, 64, 128, 256) if 2 <= B // n <= (p.d or B))
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


def _joint(p: Plan) -> dict[int, StudySpec]:
    return {bp: p.study(f"side-inter-bp{bp}", n=p.side_ns, budget=p.side_top, bp=bp) for bp in BPS}


def _sens(t: Tables, p: Plan) -> dict:
    """Mean range of the record reward at the top budget over n (bp fixed) and over bp (n fixed)."""
    import pandas as pd

    tab = pd.concat([t[st.name] for st in _joint(p).values()], ignore_index=True)
    s = sensitivity_summary(sensitivity(tab, "val_mean", ("n", "bp"), budget=p.side_top, stat="best"))
    return {"range_n": s.get("n", float("nan")), "range_bp": s.get("bp", float("nan"))}


def f3_measure(t: Tables, p: Plan) -> dict:
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
    return {"batch": B, "rows": rows, **_sens(t, p), "bps": list(BPS)}


def f3_verdict(x: dict) -> tuple[str, str]:
    s = [r["n_star"] for r in x["rows"]]
    mono, rises = monotone(s), (s[-1] / s[0] if s else float("nan"))
    sens_ok = x["range_n"] > x["range_bp"]
    if mono and rises >= 4 and sens_ok:
        v = "reproduced"
    elif (mono and rises >= 2) or sens_ok:
        v = "partly"
    else:
        v = "not reproduced"
    return v, (
        f"rule: n*(M) non-decreasing and rising >= 4x, and reward more sensitive to n than to B_p. "
        f"n*(M) = {s} ({'monotone' if mono else 'not monotone'}, {rises:.0f}x); range over n "
        f"{x['range_n']:.4f} vs over B_p {x['range_bp']:.4f}."
    )


def f3_body(x: dict) -> list[str]:
    return (
        ["| steps M (= C / B) | n* | B_p* | reward ± CI |", "|---|---|---|---|"]
        + [f"| {r['m']} | {r['n_star']} | {r['bp_star']} | {fmt(r['mean'], r['ci'])} |" for r in x["rows"]]
        + [
            "",
            f"Sensitivity at the top budget (record val_mean, seed means): mean range over n at fixed "
            f"B_p = {x['range_n']:.4f}; mean range over B_p in {x['bps']} at fixed n = {x['range_bp']:.4f}.",
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


def f4_measure(t: Tables, p: Plan) -> dict:
    rows = {bp: n_star_rows(t[st.name], p.budgets(p.side_top)) for bp, st in _joint(p).items()}
    return {"rows": {str(bp): r for bp, r in rows.items()}, "range_n": _sens(t, p)["range_n"]}


def f4_verdict(x: dict) -> tuple[str, str]:
    growths = {bp: growth(stars(r)) for bp, r in x["rows"].items()}
    best = {bp: r[-1]["mean"] for bp, r in x["rows"].items()}
    spread = max(best.values()) - min(best.values())
    grow_ok = all(g >= 4 for g in growths.values())
    little = spread < x["range_n"]
    v = "reproduced" if grow_ok and little else "partly" if grow_ok or little else "not reproduced"
    return v, (
        f"rule: n* grows >= 4x for every B_p and the spread of the best reward over B_p is smaller than "
        f"the mean range over n. Growth per B_p: {', '.join(f'{bp}: {g:.0f}x' for bp, g in growths.items())}"
        f"; spread over B_p {spread:.4f} vs range over n {x['range_n']:.4f}."
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
            "Best reward at the top budget per B_p (record reward of n*): "
            + ", ".join(f"B_p={bp}: {r[-1]['mean']:.4f}" for bp, r in x["rows"].items()),
        ]
    ),
    setup=lambda p: setup_text(
        p, _joint(p)[32], f"; bp in {list(BPS)}; n in {list(p.side_ns)}; record val_mean"
    ),
)


# ------------------------------------------------------------------------------------------------ finding 9
def _f9(p: Plan) -> dict[str, StudySpec]:
    hi, lo = (256, 64) if (p.d or 0) >= 1024 else (64, 16)
    return {
        f"{hi}/{hi}": p.study(f"side-inter-n{hi}", n=(hi,), budget=p.side_top),
        f"{lo}/{hi}": p.study(f"side-inter-n{lo}-est{hi}", n=(lo,), budget=p.side_top, n_est=hi),
        f"{lo}/{lo}": p.study(f"side-inter-n{lo}", n=(lo,), budget=p.side_top),
    }


def f9_measure(t: Tables, p: Plan) -> dict:
    # decoupled-baseline runs stop a little short of the budget (bp * (n + n_est) does not divide it): compare
    # every variant at the smallest final compute of all runs
    tabs = {k: t[st.name] for k, st in _f9(p).items()}
    C = min(float(tab.groupby("run_id")["compute"].max().min()) for tab in tabs.values())
    vals = {k: seed_rewards(tab, C, stat="best").iloc[:, 0] for k, tab in tabs.items()}
    names = list(vals)
    d1 = ci((vals[names[0]] - vals[names[1]]).dropna())
    d2 = ci((vals[names[1]] - vals[names[2]]).dropna())
    return {"C": C, "names": names, "values": {k: ci(v) for k, v in vals.items()}, "d1": d1, "d2": d2}


def f9_verdict(x: dict) -> tuple[str, str]:
    n = x["names"]
    o1, o2 = x["d1"][0] > 0, x["d2"][0] > 0
    v = "reproduced" if o1 and o2 else "partly" if o1 or o2 else "not reproduced"
    return v, f"rule: both paired differences positive; {n[0]} > {n[1]}: {o1}, {n[1]} > {n[2]}: {o2}."


F9 = Section(
    "f9",
    "Finding 9: better baselines help a little; most of large n's gain is exploration",
    "Fig 26 (B_p = 128): n_train/n_est 256/256 > 64/256 > 64/64.",
    studies=lambda p: tuple(_f9(p).values()),
    measure=f9_measure,
    verdict=f9_verdict,
    body=lambda x: (
        [f"| n_train / n_est | record val_mean ± CI at C = {budget_text(x['C'])} rollouts |", "|---|---|"]
        + [f"| {k} | {fmt(*v)} |" for k, v in x["values"].items()]
        + [
            "",
            f"Paired differences: {x['names'][0]} − {x['names'][1]} = {fmt(*x['d1'], 4)}; {x['names'][1]} − "
            f"{x['names'][2]} = {fmt(*x['d2'], 4)} (decoupled-baseline rollouts count as compute).",
        ]
    ),
    setup=lambda p: setup_text(
        p, next(iter(_f9(p).values())), f"; variants {list(_f9(p))} (n_est = separate baseline rollouts)"
    ),
    refused="the llm adapter does not implement n_est (decoupled baselines) yet",
)

__all__ = ["F2", "F3", "F4", "F9"]
