"""Sections read from per-problem pass@1: polarisation (finding 5), small data (7), data mixes (8)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from isocompute.reports.claims import probes
from isocompute.reports.claims.common import (
    ClaimsMode,
    Section,
    budget_text,
    ci,
    fmt,
    n_star_rows,
    polarisation,
    setup_text,
    stars,
    yes,
)
from studies.declared import Tables

STATS = ("zero_frac", "one_frac", "mean")


# ------------------------------------------------------------------------------------------------ finding 5
def _f5(p: ClaimsMode):
    return p.study("inter-pass1", n=p.pass1_ns, snapshots=True) if p.backend == "sim" else p.study("inter")


def _nearest(p1: pd.DataFrame, compute: float) -> pd.DataFrame:
    """Rows of each run's snapshot closest to `compute` in log space."""
    cs = np.unique(p1["compute"].to_numpy(dtype=float))
    c = cs[np.argmin(np.abs(np.log(np.maximum(cs, 1.0)) - np.log(compute)))]
    return p1[p1["compute"] == c]


def f5_measure(t: Tables, p: ClaimsMode) -> dict:
    st = _f5(p)
    p1 = t[st.name + ".pass1"]
    meta = {c.run_id: (c.n, c.seed) for _, c in t.done(st.name)}
    small, large = p.pass1_ns
    rows = []
    for C in (p.top // 16, p.top):
        for split in ("train", "val"):
            part = p1[(p1["split"] == split) & p1["run_id"].isin(meta)]
            if part.empty:
                continue
            per: dict = {small: {}, large: {}}
            for rid, g in part.groupby("run_id"):
                n, seed = meta[rid]
                if n in per:
                    per[n][seed] = polarisation(_nearest(g, C)["pass1"].to_numpy())
            seeds = sorted(set(per[small]) & set(per[large]))
            for stat in STATS:
                a = np.array([per[small][s][stat] for s in seeds])
                b = np.array([per[large][s][stat] for s in seeds])
                rows.append(
                    {
                        "C": C,
                        "split": split,
                        "stat": stat,
                        "small": float(a.mean()),
                        "large": float(b.mean()),
                        "diff": ci(a - b),
                    }
                )
    return {"rows": rows, "small": small, "large": large, "top": p.top}


def f5_verdict(x: dict) -> tuple[str, str]:
    z = {r["split"]: r["diff"] for r in x["rows"] if r["C"] == x["top"] and r["stat"] == "zero_frac"}
    sig = {s: bool(np.isfinite(h) and m - h > 0) for s, (m, h) in z.items()}
    if sig and all(sig.values()):
        v = "reproduced"
    elif any(sig.values()) or any(m > 0 for m, _ in z.values()):
        v = "partly"
    else:
        v = "not reproduced"
    shown = "; ".join(f"{'validation' if s == 'val' else s}: {fmt(*z[s], 4)}" for s in z)
    return v, (
        "rule: at the top budget small n leaves more problems at pass@1 < 1e-3 than large n (95% CI "
        f"above 0) on every split with snapshots (train and validation). {shown}."
    )


F5 = Section(
    "f5",
    "Finding 5: small n polarises the pass@1 distribution (interference)",
    "Fig 11, 27: at matched compute small n puts mass at 0 and 1 (problems sacrificed); large n improves "
    "more uniformly and leaves fewer problems at pass@1 = 0.",
    studies=lambda p: (_f5(p),),
    measure=f5_measure,
    verdict=f5_verdict,
    body=lambda x: (
        [
            f"| C | split | stat | n={x['small']} | n={x['large']} | paired diff (small − large) ± CI |",
            "|---|---|---|---|---|---|",
        ]
        + [
            f"| {budget_text(r['C'])} | {r['split']} | {r['stat']} | {fmt(r['small'])} | {fmt(r['large'])} | "
            f"{fmt(*r['diff'])} |"
            for r in x["rows"]
        ]
    ),
    setup=lambda p: setup_text(
        p, _f5(p), f"; n = {p.pass1_ns[0]} vs {p.pass1_ns[1]}; snapshots at matched compute"
    ),
    backends=("sim", "llm"),
)


# ------------------------------------------------------------------------------------------------ finding 7
def _d_small(p: ClaimsMode) -> int:
    return max((p.d or 1024) // 8, 64)


def _f7(p: ClaimsMode) -> dict:
    return {d: p.study(f"side-inter-d{d}", n=p.side_ns, budget=p.side_top, d=d) for d in (p.d, _d_small(p))}


def f7_measure(t: Tables, p: ClaimsMode) -> dict:
    out = {}
    for d, st in _f7(p).items():
        tab = t[st.name]
        drops, rises = [], []
        for _, g in tab[tab["n"] == max(p.side_ns)].groupby("run_id"):
            g = g.sort_values("compute")
            v, tr = g["val_mean"].to_numpy(), g["train_mean"].to_numpy()
            i = int(np.argmax(v))
            drops.append(v[i] - v[-1])
            rises.append(tr[-1] - tr[i])
        out[str(d)] = {
            "n_star": stars(n_star_rows(tab, p.budgets(p.side_top))),
            "drop": ci(drops),
            "rise": ci(rises),
        }
    return {"d": {"big": p.d, "small": _d_small(p)}, "by_d": out}


def f7_verdict(x: dict) -> tuple[str, str]:
    db, ds = x["d"]["big"], x["d"]["small"]
    big, small = x["by_d"][str(db)], x["by_d"][str(ds)]
    earlier = small["n_star"][-1] <= big["n_star"][-1]
    overfit = small["drop"][0] > 0.01 and small["rise"][0] > 0
    v = "reproduced" if earlier and overfit else "partly" if earlier or overfit else "not reproduced"
    return v, (
        f"rule: top-budget record n* for d={ds} <= for d={db}, and the largest n at d={ds} loses > 0.01 "
        f"validation reward from its peak while training reward rises. n*: {small['n_star'][-1]} vs "
        f"{big['n_star'][-1]}; drop {fmt(*small['drop'])}, train rise {fmt(*small['rise'])}. Note: at "
        f"d={db} validation falls from its peak by {fmt(*big['drop'])}."
    )


F7 = Section(
    "f7",
    "Finding 7: a small training set saturates n* earlier and overfits",
    "Fig 13: D = 6k improves to n = 512; D = 500 saturates at n = 256 and n = 512 overfits (validation falls "
    "while training reward rises).",
    studies=lambda p: tuple(_f7(p).values()),
    measure=f7_measure,
    verdict=f7_verdict,
    body=lambda x: (
        [
            "| d (train problems) | n* per budget (record) | largest n: val drop from peak | largest n: "
            "train rise after val peak |",
            "|---|---|---|---|",
        ]
        + [
            f"| {d} | {', '.join(map(str, r['n_star']))} | {fmt(*r['drop'])} | {fmt(*r['rise'])} |"
            for d, r in x["by_d"].items()
        ]
    ),
    setup=lambda p: setup_text(p, _f7(p)[p.d], f"; d in {[p.d, _d_small(p)]}; n in {list(p.side_ns)}"),
)


# ------------------------------------------------------------------------------------------------ finding 8
def _f8(p: ClaimsMode):
    return p.study("side-inter-dual", n=p.side_ns, budget=p.side_top, dataset="dual", snapshots=True)


def f8_probe(store, t: Tables, p: ClaimsMode) -> None:
    probes.record(store, t, _f8(p).name, "val_sources", lambda c: True, probes.val_sources)


def f8_measure(t: Tables, p: ClaimsMode) -> dict:
    st = _f8(p)
    p1 = t[st.name + ".pass1"]
    p1 = p1[p1["split"] == "val"]
    src = t.extras(st.name, "val_sources")
    meta = {c.run_id: c for _, c in t.done(st.name)}
    parts = []
    for rid, g in p1.groupby("run_id"):
        lab = np.asarray(src[rid]["source"])[g["problem"].to_numpy()]
        m = g.assign(half=lab).groupby(["compute", "half"])["pass1"].mean().unstack("half").reset_index()
        parts.append(m.assign(run_id=rid, n=meta[rid].n, seed=meta[rid].seed))
    tab = pd.concat(parts, ignore_index=True)
    out = {}
    for half in ("hard", "easy"):
        r = n_star_rows(tab, [p.side_top], half)[0]
        smallest = tab[tab["n"] == min(p.side_ns)].groupby("run_id")[half].max()
        out[half] = {"n_star": r["n_star"], "mean": r["mean"], "ci": r["ci"], "smallest": ci(smallest)}
    return {"halves": out, "large_min": p.large_min}


def f8_verdict(x: dict) -> tuple[str, str]:
    wins = {h: v["n_star"] >= x["large_min"] for h, v in x["halves"].items()}
    v = "partly" if all(wins.values()) else "not reproduced"
    return v, (
        f"rule: n* >= {x['large_min']} on both halves of the dual validation set (reproduced would also "
        "need the forgetting test, which the simulator cannot run: at most partly). "
        + ", ".join(f"{k}: {yes(b)}" for k, b in wins.items())
        + "."
    )


F8 = Section(
    "f8",
    "Finding 8: data mixes: larger n wins at high compute on in-domain evaluations",
    "Fig 14: larger n wins at high compute on every in-domain eval except Very Easy; training only on Hard "
    "forgets Easy.",
    studies=lambda p: (_f8(p),),
    measure=f8_measure,
    verdict=f8_verdict,
    body=lambda x: (
        [
            "| validation part | n* at the top budget (record) | reward ± CI | smallest n record |",
            "|---|---|---|---|",
        ]
        + [
            f"| {h} half | {v['n_star']} | {fmt(v['mean'], v['ci'])} | {fmt(*v['smallest'])} |"
            for h, v in x["halves"].items()
        ]
        + [
            "",
            "Forgetting of Easy when training only on Hard is not measured: the runner evaluates only the "
            "training distribution's held-out set.",
        ]
    ),
    setup=lambda p: setup_text(p, _f8(p), f"; n in {list(p.side_ns)}; validation split by source"),
    probe=f8_probe,
    refused="the llm backend has no dual (hard + easy) mix with per-problem sources",
)

__all__ = ["F5", "F7", "F8"]
