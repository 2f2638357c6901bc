"""Mechanism measurements: gradient noise scale along a run, zero-variance groups, and whether a
pull toward the initial policy (KL, weight decay) alone moves n*."""

from __future__ import annotations

from isocompute.reports.claims import probes
from isocompute.reports.claims.common import (
    ClaimsMode,
    Section,
    budget_text,
    ci,
    fmt,
    growth,
    growth_text,
    n_star_rows,
    setup_text,
    stars_text,
)
from studies.declared import Tables

GNS_N = 128
REGULARISERS = (
    ("none", {"kl_coef": 0.0, "entropy_coef": 0.0}),
    ("recipe (KL + entropy on Easy)", {}),
    ("kl_coef=0.1", {"kl_coef": 0.1, "entropy_coef": 0.0}),
    ("kl_coef=1", {"kl_coef": 1.0, "entropy_coef": 0.0}),
    ("adamw weight_decay=0.01",
     {"optimizer": "adamw", "weight_decay": 0.01, "kl_coef": 0.0, "entropy_coef": 0.0}),
    ("adamw weight_decay=0.1",
     {"optimizer": "adamw", "weight_decay": 0.1, "kl_coef": 0.0, "entropy_coef": 0.0}),
)
"""The pulls toward the initial policy of the confound study, each on top of the recipe's sqrt rule with its
own tuned base lr: none, the recipe's own (KL + entropy), stronger KL, decoupled weight decay."""


def _confound(p: ClaimsMode) -> dict:
    out = {}
    for model in ("tabular", "interference"):
        for reg, kw in REGULARISERS:
            tag = "-".join(f"{k}{v}" for k, v in kw.items() if v) or ("plain" if kw else "recipe")
            out[(model, reg)] = p.study(
                f"side-{model}-{tag}", preset=model, n=p.side_ns, budget=p.side_top, **kw
            )
    return out


def _studies(p: ClaimsMode) -> tuple:
    return (p.study("inter"), *_confound(p).values())


def mech_probe(store, t: Tables, p: ClaimsMode) -> None:
    gns_n = GNS_N if GNS_N in p.ns else max(p.ns)
    probes.record(
        store,
        t,
        p.study("inter").name,
        "gns",
        lambda c: c.n == gns_n and c.seed == p.seed_offset,
        probes.noise_scale_along,
    )


def mech_measure(t: Tables, p: ClaimsMode) -> dict:
    name = p.study("inter").name
    gns = next(iter(t.extras(name, "gns").values()))
    rows = n_star_rows(t[name], p.budgets(p.top))
    tab = t[name]
    last = tab.sort_values("compute").groupby("run_id").tail(1)
    zv = {int(n): ci(g["zero_var_frac"]) for n, g in last.groupby("n")}
    conf = {}
    for (model, reg), st in _confound(p).items():
        metric = "train_mean" if model == "tabular" else "val_mean"
        conf[f"{model} ({metric})|{reg}"] = n_star_rows(t[st.name], p.budgets(p.side_top), metric)
    return {
        "gns": gns,
        "chosen_batch": [(r["budget"], p.bp * r["n_star"]) for r in rows],
        "zero_var": zv,
        "confound": conf,
    }


def mech_verdict(x: dict) -> tuple[str, str]:
    return "measured", "measurements that explain the verdicts above; not a paper finding, so no verdict."


def mech_body(x: dict) -> list[str]:
    g = x["gns"]
    lines = [
        f"Gradient noise scale B_simple = tr(Sigma)/|G|^2 along one n={g['n']} run (the first reported seed, "
        "under the recipe; one sample = one "
        "problem with its n rollouts; times n = rollouts; sandbox.train_snapshots + gradient_pieces):",
        "",
        "| step | compute | B_simple (groups) | B_simple x n (rollouts) | zero-variance groups |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['m']} | {budget_text(r['compute'])} | {r['b_simple']:.0f} | {r['b_simple'] * g['n']:.3g} | "
        f"{r['zero_var_frac']:.3f} |"
        for r in g["rows"]
    ]
    lines += [
        "",
        "Chosen batch along the frontier (recipe, record): "
        + ", ".join(f"{budget_text(b)}: bp*n* = {v}" for b, v in x["chosen_batch"]),
    ]
    lines += [
        "",
        "Share of zero-variance groups over the last evaluation interval at the top budget: "
        + ", ".join(f"n={n}: {fmt(*v)}" for n, v in sorted(x["zero_var"].items())),
    ]
    lines += [
        "",
        "KL / weight-decay confound (the same sweeps with a pull toward the initial policy, each under the "
        "sqrt rule with its own tuned base lr):",
        "",
        "| model | regulariser | n* per budget (record) | growth (where determined) |",
        "|---|---|---|---|",
    ]
    for key, rows in x["confound"].items():
        model, reg = key.split("|")
        lines.append(f"| {model} | {reg} | {stars_text(rows)} | {growth_text(growth(rows))} |")
    return lines


MEASUREMENTS = Section(
    "mechanism",
    "Mechanism measurements",
    "Section 5.1: interference; McCandlish et al. 2018 gradient noise scale.",
    studies=_studies,
    measure=mech_measure,
    verdict=mech_verdict,
    body=mech_body,
    setup=lambda p: setup_text(p, p.study("inter")),
    probe=mech_probe,
    refused="its measurements (parameter snapshots, per-problem gradients) come from inside the simulator",
)

__all__ = ["MEASUREMENTS"]
