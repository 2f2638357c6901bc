"""Sections on how n*(C) moves: the tabular theory, finding 1 (with its lr treatments), 6, 10 and 11."""

from __future__ import annotations

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
    heldout_contrast,
    mean_contrast,
    n_star_cell,
    n_star_rows,
    n_star_table,
    run_rewards,
    seed_rewards,
    setup_text,
    stake_text,
    stars_text,
    yes,
)
from isocompute.reports.claims.judge import Rule, combine, gain_rule, judge, parts_text
from isocompute.reports.claims.recipe import PRESET_LR
from isocompute.reports.claims.selection import cross_fit
from studies.declared import Tables
from studies.fit.lag import lag_report
from studies.fit.nstar import config_value
from studies.presets import DEMO_ROLES


# ------------------------------------------------------------------------------------------------ theory
def _tabular(p: ClaimsMode, lr: float | None = None):
    """The tabular sweep at the preset lr (the theory's learner; no recipe: the theory is about the learner,
    not the paper's training recipe) or at a constant lr (finding 1's control)."""
    return p.study(f"tabular-lr{lr}" if lr else "tabular", preset="tabular", lr=lr or PRESET_LR)


def _tabular_recipe(p: ClaimsMode):
    """The tabular sweep under the paper's recipe with its own tuned base lr: finding 1's tabular control
    beside the recipe row, so each lr choice of the headline figure shows both policies."""
    return p.study("tabular-recipe", preset="tabular")


THEORY_RULE = Rule("mean over the budgets of the record reward of the best large n minus the best small n "
                   "(train_mean, paired, arms chosen by cross-fitting)", kind="below")
"""The theory's key quantity: a tabular learner favours small n at every budget, so the large-minus-small
contrast averaged over the budgets lies below 0."""


def theory_measure(t: Tables, p: ClaimsMode) -> dict:
    st = _tabular(p)
    tab = t[st.name]
    budgets = p.budgets(p.top)
    small = [n for n in p.ns if n <= p.small_max]
    rows = n_star_rows(tab, budgets, "train_mean", small=small)
    return {"rows": rows, "two_smallest": sorted(p.ns)[:2],
            "gain": mean_contrast(tab, budgets, p, p.ns, "train_mean")["iv"]}


def theory_verdict(x: dict) -> tuple[str, str]:
    j = judge(THEORY_RULE, x["gain"])
    small = _small(x["rows"], x["two_smallest"])
    return j.verdict, (f"rule: {THEORY_RULE.text()}. Measured: {j.text()}. (The set of n* meets the two "
                       f"smallest n {x['two_smallest']} at every budget: {yes(small)}.)")


def _small(rows: list[dict], smallest: list) -> bool:
    """Whether n*'s set holds one of `smallest` at every budget (a tie that includes them counts: the data
    cannot rule them out)."""
    return all(set(r.get("set") or [r["n_star"]]) & set(smallest) for r in rows)


THEORY = Section(
    "theory",
    "Theory: a tabular learner favours small n (many sequential steps)",
    "Section 5.1: E[subopt] = O(A/(n t) + B/t), so at fixed n*t small n wins for a tabular softmax.",
    studies=lambda p: (_tabular(p),),
    measure=theory_measure,
    verdict=theory_verdict,
    body=lambda x: n_star_table({"tabular (train_mean, record)": x["rows"]}),
    setup=lambda p: setup_text(
        p, _tabular(p), f"; n in {list(p.ns)}; train_mean (tabular validation problems never move)"
    ),
    refused="the tabular policy exists only in the simulator",
    rules=(THEORY_RULE,),
    ceiling=lambda p: {"tabular": (_tabular(p), "train_mean")},
)


# ------------------------------------------------------------------------------------------------ finding 1
RECIPE_ROW = "paper's recipe (sqrt rule, base lr tuned on tuning seeds, KL + entropy)"
RECIPE_PLAIN = "recipe without KL and entropy (sensitivity)"
ENVELOPE = "lr envelope (best constant lr per n and budget, chosen on held-out seeds)"
BACKEND_ROW = "the backend's own recipe and lr"


def constant_label(lr: float, preset_lr: float | None) -> str:
    """'constant lr 0.01 (sensitivity)', 'constant lr 0.1 = preset (sensitivity)'."""
    tag = " = preset" if preset_lr is not None and lr == preset_lr else ""
    return f"constant lr {lr:g}{tag} (sensitivity)"


def _preset_lr(p: ClaimsMode) -> float | None:
    return p.preset_lr("interference")


def _recipe(p: ClaimsMode):
    return p.study("inter")


def _treatments(p: ClaimsMode) -> dict[str, object]:
    """Label -> StudySpec of the single-study treatments: the recipe (the verdict's), the recipe without its
    regularisation, each constant lr (sensitivity rows; the preset's among them)."""
    if not p.recipe:
        return {BACKEND_ROW: _recipe(p)}
    out = {RECIPE_ROW: _recipe(p), RECIPE_PLAIN: p.study("inter-noreg", kl_coef=0.0, entropy_coef=0.0)}
    for lr in p.lrs:
        out[constant_label(lr, _preset_lr(p))] = p.study(f"inter-lr{lr}", lr=lr)
    return out


def verdict_row(p: ClaimsMode) -> str:
    """The treatment finding 1's verdict reads: the recipe, or the backend's own on the llm plans."""
    return RECIPE_ROW if p.recipe else BACKEND_ROW


def f1_studies(p: ClaimsMode) -> tuple:
    tab = (_tabular(p), *(_tabular(p, lr) for lr in p.lrs)) if p.backend == "sim" else ()
    rec = (_tabular_recipe(p),) if p.recipe else ()
    return (*_treatments(p).values(), *tab, *rec)


def lr_choices(p: ClaimsMode) -> list[dict]:
    """Finding 1's lr choices side by side, as the headline figure draws them and the README caption quotes
    them: the verdict's treatment (the paper's recipe, or the backend's own lr) and, where the plan runs it,
    the preset's constant lr (a sensitivity row). Each: "key" ("recipe", "backend" or "constant"), its
    treatment label in f1_measure's "treatments", its lr ("lr": the constant, None for tuned ones) and
    {preset role: StudySpec} (the tabular policy where the plan runs it at that lr)."""
    preset = _preset_lr(p)
    tr = _treatments(p)
    main = verdict_row(p)
    out = [{"key": "recipe" if p.recipe else "backend", "treatment": main, "lr": None,
            "studies": {"interference": tr[main]} | ({"tabular": _tabular_recipe(p)} if p.recipe else {})}]
    const = constant_label(preset, preset) if preset is not None else None
    if const in tr:
        tab = {"tabular": _tabular(p)} if p.backend == "sim" else {}
        out.append({"key": "constant", "treatment": const, "lr": preset,
                    "studies": {"interference": tr[const]} | tab})
    return out


def _arms(t: Tables, studies: dict[float, object]) -> tuple[pd.DataFrame, dict]:
    """The runs of several studies with an `arm_lr` column (index into the lrs) and {index: lr}."""
    lrs = dict(enumerate(studies))
    parts = [t[st.name].assign(arm_lr=i) for i, st in enumerate(studies.values())]
    return pd.concat(parts, ignore_index=True), lrs


def _envelope(t: Tables, p: ClaimsMode) -> tuple[pd.DataFrame, dict]:
    """All constant-lr runs with an `arm_lr` column, and {lr index: lr}."""
    return _arms(t, {lr: p.study(f"inter-lr{lr}", lr=lr) for lr in p.lrs})


def crossfit_envelope(env: pd.DataFrame, budget: float, stat: str = "best") -> pd.DataFrame:
    """The rows of every seed at the lr chosen for its n at `budget` on the other fold's seeds (2-fold
    cross-fitting, selection.cross_fit; score: the run's record or final reward at the budget), with a
    column `chosen_lr` (lr index)."""
    rr = run_rewards(env, keys=("n", "arm_lr", "seed"), budget=budget, stat=stat)
    picked = cross_fit(rr, group_cols=["n"], choice_col="arm_lr", score_col="reward")
    keys = picked[["seed", "n", "arm_lr"]]
    return env.merge(keys, on=["seed", "n", "arm_lr"], how="inner").rename(columns={"arm_lr": "chosen_lr"})


def envelope_rows(env: pd.DataFrame, budgets: list[int], boot: int = 0) -> list[dict]:
    """n* per budget of the held-out envelope: at each budget each seed's n runs at the lr its other fold
    chose there, and the estimator of `isocompute fit` over n of those runs gives n*."""
    rows = []
    for b in budgets:
        rows += n_star_rows(crossfit_envelope(env, b), [b], boot=boot)
    return rows


def _chosen(tab: pd.DataFrame, lrs: dict) -> str:
    """The lr a cross-fitted table ran at: 'lr' when both folds chose it, else 'a (even seeds) / b (odd
    seeds)' (fold i holds the seeds at sorted positions i, i + 2, ...)."""
    by_seed = tab.groupby("seed")["chosen_lr"].first()
    seeds = sorted(by_seed.index)
    vals = [lrs[int(by_seed[s])] for s in seeds[:2]]
    if len(set(vals)) == 1:
        return f"{vals[0]:g}"
    return f"{vals[0]:g} (even seeds) / {vals[1]:g} (odd seeds)"


F1_RULE = gain_rule(f"{TOP_GAIN}, under the paper's recipe")
"""Finding 1's key quantity: where n*(C) rises to a large n, the best large n beats the best small n at the
top budget; reproduced when its 95% interval lies above one point of pass@1 (`MIN_GAIN`), not reproduced
when it lies below it."""


def f1_measure(t: Tables, p: ClaimsMode) -> dict:
    budgets = p.budgets(p.top)
    top = float(p.top)
    small = [n for n in p.ns if n <= p.small_max]
    large = [n for n in p.ns if n >= p.large_min]
    main = verdict_row(p)
    out: dict = {"budgets": budgets, "ns": list(p.ns), "treatments": {}, "seeds": p.seeds, "max_n": max(p.ns),
                 "main": main, "base_lr": dict(p.tuned).get(_recipe(p).name), "small": small, "large": large}
    per_n: dict = {}
    preset_row = constant_label(_preset_lr(p), _preset_lr(p)) if _preset_lr(p) is not None else None
    for name, st in _treatments(p).items():
        tab = t[st.name]
        sens = "sensitivity" in name
        out["treatments"][name] = {
            # the stake beside n* where a row is judged or drawn in the headline (the preset's constant lr)
            "rows": n_star_rows(tab, budgets, small=small if not sens or name == preset_row else None),
            "final": contrast(tab, top, p, p.ns, "final"),
            "record": contrast(tab, top, p, p.ns, "best"),
            "sensitivity": sens,
        }
        preset = _preset_lr(p)
        if name == main or (preset is not None and name == constant_label(preset, preset)):
            for stat in ("final", "best"):
                r = run_rewards(tab, keys=("n",), budget=top, stat=stat)
                per_n[(name, stat)] = {int(n): ci(g["reward"]) for n, g in r.groupby("n")}
    if p.lrs and p.seeds > 1:
        env, lrs = _envelope(t, p)
        cont, best_lr = {}, {}
        for stat in ("final", "best"):
            rr = run_rewards(env, keys=("n", "arm_lr", "seed"), budget=top, stat=stat)
            cont[stat] = heldout_contrast(rr, small, large, arm="arm_lr")
            chosen = crossfit_envelope(env, top, stat)
            piv = seed_rewards(chosen, top, stat=stat)
            per_n[(ENVELOPE, stat)] = {int(n): ci(piv[n]) for n in piv.columns}
            best_lr[stat] = {int(n): _chosen(g, lrs) for n, g in chosen.groupby("n")}
        out["treatments"][ENVELOPE] = {"rows": envelope_rows(env, budgets), "final": cont["final"],
                                       "record": cont["best"], "sensitivity": False}
        out["best_lr"] = best_lr["best"]
        out["lr_grid"] = list(p.lrs)
        out["lr_edges"] = lr_edges(env, lrs, budgets, p.bp)
        out["record_final"] = record_final(t[_recipe(p).name], env, lrs, top)
    out["per_n"] = {f"{k[0]} ({'record' if k[1] == 'best' else 'final'})": v for k, v in per_n.items()}
    if p.backend == "sim":
        tab_rows = n_star_rows(t[_tabular(p).name], budgets, "train_mean", small=small)
        out["tabular_rows"] = tab_rows
        out["tabular_ok"] = _small(tab_rows, sorted(p.ns)[:2])
        out["tabular_per_lr"] = {
            lr: stars_text(n_star_rows(t[_tabular(p, lr).name], budgets, "train_mean")) for lr in p.lrs
        }
    else:
        out["tabular_rows"], out["tabular_ok"], out["tabular_per_lr"] = [], None, {}
    if p.recipe:
        st = _tabular_recipe(p)
        out["tabular_recipe_rows"] = n_star_rows(t[st.name], budgets, "train_mean", small=small)
        out["tabular_base_lr"] = dict(p.tuned).get(st.name)
    out["lr_choices"] = headline_rows(out, p)
    out["lag"] = lag_report(t[_recipe(p).name], "val_mean", "n")
    return out


def record_final(recipe: pd.DataFrame, env: pd.DataFrame, lrs: dict[int, float], top: float) -> dict:
    """Why a run's record and final rewards differ, per n of the verdict's treatment: the lr it ran at (the
    table's lr column: under the recipe base x sqrt(bp n / 256)), the best constant lr of that n (the lr of
    the envelope's grid with the best seed-mean record at `top` over the reported seeds: a description of the
    runs, not a selection that a verdict reads), their ratio, and the seed-mean drop from the record to the
    final reward at `top`. A run far above its own best lr overshoots its peak and falls off it, which the
    record (oracle early stopping) hides and the final reward shows. Empty where the table has no lr column
    (a user's table)."""
    if "lr" not in recipe.columns:
        return {}
    keys = ("n", "seed")
    rec = run_rewards(recipe, keys=keys, budget=top, stat="best")
    fin = run_rewards(recipe, keys=keys, budget=top, stat="final")
    both = rec.merge(fin, on=list(keys), suffixes=("_rec", "_fin"))
    drop = (both["reward_rec"] - both["reward_fin"]).groupby(both["n"]).mean()
    ran = recipe.groupby("n")["lr"].first()
    rr = run_rewards(env, keys=("n", "arm_lr", "seed"), budget=top, stat="best")
    best = rr.groupby(["n", "arm_lr"])["reward"].mean().groupby(level="n").idxmax()
    lo, hi = min(lrs.values()), max(lrs.values())
    out = {}
    for n, (_, i) in best.items():
        if n not in ran.index or n not in drop.index:
            continue
        lr, b = float(ran[n]), float(lrs[i])
        out[int(n)] = {"lr": lr, "best_lr": b, "ratio": lr / b, "drop": float(drop[n]), "edge": b in (lo, hi)}
    return out


def _first(v) -> int:
    """The first n of a contrast arm ('4/8' when the folds chose differently)."""
    return int(str(v).split("/")[0])


def record_final_text(x: dict, contrast: dict) -> str:
    """One sentence on why the final reward reads differently from the record: for the final contrast's
    small and large n, the lr each ran at relative to its own best constant lr and how far its final reward
    fell from its record (`record_final`). Empty without those numbers."""
    rf = x.get("record_final") or {}
    if "n_small" not in contrast or not rf:
        return ""
    parts = []
    for n in dict.fromkeys((_first(contrast["n_small"]), _first(contrast["n_large"]))):
        if n in rf:
            r = rf[n]
            edge = " (a grid edge)" if r["edge"] else ""
            parts.append(f"n = {n} ran at lr {r['lr']:.3g}, {r['ratio']:.1f}x its own best constant lr "
                         f"{r['best_lr']:g}{edge}, and its final reward is {r['drop']:.3f} below its record")
    return ("record against final (computed from the runs): " + "; ".join(parts)
            + " (seed means at the top budget; a run above its own best lr passes its peak and falls off "
            "it, which the record hides)") if parts else ""


def lag_summary(lag: dict) -> str:
    """What the speed-or-ceiling readout (studies.fit.lag) says over all pairs, in one clause: which n
    against the reference differ in speed only (a constant lag), which fall further behind toward the top
    (a lower ceiling, if it lasts), which catch up (they may rise higher), which have the same curve, and
    whether val at matched train reward differs anywhere."""
    pairs = [q for q in lag.get("pairs") or [] if q["lag"].get("status") == "ok"]
    if not pairs:
        return f"speed or ceiling: {lag.get('status') or 'no pair with overlapping rewards'}"

    def ns(qs):
        return ", ".join(str(q["n"]) for q in qs)

    groups = (
        ("a constant lag (speed, not ceiling, over the rewards both reach)",
         [q for q in pairs if q["lag"]["speed"] in ("slower", "faster") and q["lag"]["trend"] == "constant"]),
        ("the same curve",
         [q for q in pairs if q["lag"]["speed"] == "same" and q["lag"]["trend"] == "constant"]),
        ("a lag that grows toward the top (a lower ceiling, if it lasts)",
         [q for q in pairs if q["lag"]["trend"] == "grows"]),
        ("a lag that shrinks toward the top (it catches up and may rise higher)",
         [q for q in pairs if q["lag"]["trend"] == "shrinks"]),
        ("speed and ceiling not told apart", [q for q in pairs if q["lag"]["trend"] == "undetermined"]),
    )
    ceil = [q for q in pairs if (q.get("ceiling") or {}).get("verdict") in ("higher", "lower")]
    said = "; ".join(f"{what}: n = {ns(qs)}" for what, qs in groups if qs)
    val = (f"val at matched train reward differs for n = {ns(ceil)}" if ceil else
           "val at matched train reward the same or not told apart for every pair")
    return (f"speed or ceiling (studies.fit.lag, each n against n = {lag.get('reference')}, {len(pairs)} "
            f"pairs): {said}; {val}")


ROLE_METRIC = {role: metric for role, metric, _ in DEMO_ROLES}
"""The reward each policy role is read on (studies.presets.DEMO_ROLES): the tabular policy on its training
problems, the interference policy on held-out ones."""


def headline_rows(x: dict, p: ClaimsMode) -> list[dict]:
    """`lr_choices` with what was measured for each (f1_measure's numbers): per preset role its study name,
    metric and n* rows (with the stake), the base lr the tuning stage chose for it (recipe rows), and the
    row's top-budget gain of large n (record reward)."""
    tab_rows = {"recipe": x.get("tabular_recipe_rows"), "constant": x.get("tabular_rows")}
    out = []
    for c in lr_choices(p):
        tr = x["treatments"][c["treatment"]]
        roles = {}
        for role, st in c["studies"].items():
            inter = role == "interference"
            base = (x.get("base_lr") if inter else x.get("tabular_base_lr")) if c["key"] == "recipe" else None
            roles[role] = {"study": st.name, "metric": ROLE_METRIC[role],
                           "rows": tr["rows"] if inter else tab_rows.get(c["key"]) or [], "base_lr": base}
        out.append({"key": c["key"], "treatment": c["treatment"], "lr": c["lr"], "roles": roles,
                    "gain": tr["record"]})
    return out


def lr_edges(env, lrs: dict[int, float], budgets: list[int], bp: int) -> list[tuple[int, int, float]]:
    """(n, budget, lr) wherever the best constant lr of n at that budget (seed-mean record reward) is the
    smallest or largest of the grid: the envelope is not resolved there. An n whose first step costs more
    than the budget has no reward there and is skipped."""
    lo, hi = min(lrs.values()), max(lrs.values())
    out = []
    for b in budgets:
        rr = run_rewards(env, keys=("n", "arm_lr", "seed"), budget=b, stat="best")
        rr = rr.loc[bp * rr["n"] <= b]
        for (n, i) in rr.groupby(["n", "arm_lr"])["reward"].mean().groupby(level="n").idxmax():
            if lrs[i] in (lo, hi):
                out.append((int(n), int(b), lrs[i]))
    return out


def f1_verdict(x: dict) -> tuple[str, str]:
    """The recipe's top-budget gain of large n, judged by F1_RULE; the envelope, the final reward and the
    sensitivity rows are reported beside it, never in it."""
    tr = x["treatments"]
    main = tr[x["main"]]
    rule = (F1_RULE if x["main"] == RECIPE_ROW
            else gain_rule(f"{TOP_GAIN}, under {x['main']}"))
    j = judge(rule, main["record"]["iv"])
    also = [f"on the final reward {judge(rule, main['final']['iv']).verdict} ({main['final']['iv'].text()})"]
    why_final = record_final_text(x, main["final"])
    if why_final:
        also.append(why_final)
    if x.get("lag"):
        also.append(lag_summary(x["lag"]))
    if ENVELOPE in tr:
        also.append(f"under the lr envelope {judge(rule, tr[ENVELOPE]['record']['iv']).verdict} "
                    f"({tr[ENVELOPE]['record']['iv'].text()})")
    for name, v in tr.items():
        if v.get("sensitivity"):
            also.append(f"{name}: {judge(rule, v['record']['iv']).verdict}")
    rows = main["rows"]
    top = rows[-1] if rows else None
    why = (f"rule: {rule.text()}. Measured: {j.text()}. Beside it (not in the verdict): "
           + "; ".join(also) + ". "
           f"n* under {x['main']}: {stars_text(rows)} (growth where determined {growth_text(growth(rows))})")
    if top is not None and "stake" in top:
        why += f"; at the top budget n* {n_star_cell(top)}, {stake_text(top['stake'])} over the best small n"
    why += f". tabular control: {yes(x['tabular_ok'])} (n* among the two smallest n at every budget)"
    return j.verdict, why + "."


def f1_body(x: dict) -> list[str]:
    tr = x["treatments"]
    main = x["main"]
    lines = [f"n* and the reward at stake at each budget under {main} (n* by the estimator of `isocompute "
             "fit`; record reward of n* over seeds; stake: what n* gains over the best small n, both chosen "
             "on held-out seeds):", ""]
    labels = {f"interference, {main}": tr[main]["rows"]}
    if ENVELOPE in tr:
        labels["interference, lr envelope"] = tr[ENVELOPE]["rows"]
    if x["tabular_rows"]:
        labels["tabular (train_mean, preset lr)"] = x["tabular_rows"]
    if x.get("tabular_recipe_rows"):
        labels["tabular (train_mean, paper's recipe)"] = x["tabular_recipe_rows"]
    lines += n_star_table(labels)
    if len(x.get("lr_choices", [])) > 1:
        lines += ["", "README's headline figure draws these lr choices side by side, each with both "
                  "policies' frontiers, n*(C) and the stake (claims/headline.py; the report writes it beside "
                  "itself as -headline.png, with --docs as docs/figs/headline.png)."]
    if x.get("base_lr") is not None:
        tab = (f"; tabular {x['tabular_base_lr']:g}" if x.get("tabular_base_lr") is not None else "")
        lines += ["", f"Recipe base lr (at bp n = 256, chosen on the tuning seeds; the report's recipe table "
                  f"lists the grid): interference {x['base_lr']:g}{tab}."]
    lines += [
        "",
        "All lr treatments (small n <= the plan's small_max, large n >= its large_min; seeds paired; "
        "top-budget gain of the best large n over the best small n, 95% t-interval, both arms chosen by "
        "cross-fitting). Rows marked sensitivity are shown, never judged:",
        "",
        f"| lr treatment | n* per budget ({', '.join(budget_text(b) for b in x['budgets'])}) | growth "
        "(where determined) | gain, record reward | gain, final reward |",
        "|---|---|---|---|---|",
    ]
    for name, v in tr.items():
        lines.append(f"| {name} | {stars_text(v['rows'])} | {growth_text(growth(v['rows']))} | "
                     f"{contrast_text(v['record'])} | {contrast_text(v['final'])} |")
    lines += [
        "",
        "The lr envelope's lr of each n and budget and the best small and large n of each contrast are "
        "picked on one half of the seeds (even or odd positions) and reported on the other, both ways "
        "(2-fold cross-fitting), so every seed is reported once and none at a choice it made; the recipe's "
        "base lr is chosen on separate tuning seeds. n*: the best n's seed-mean record at the budget; "
        "'a-b tie': the set of n whose 90% interval (runs resampled) reaches the best's, which the seeds "
        "cannot tell apart (studies/fit/nstar.py); growth counts only rises that every later set stays "
        "above.",
    ]
    cols = list(x["per_n"])
    lines += [
        "",
        "Validation reward by n at the top budget (mean ± CI over seeds):",
        "",
        "| n | " + " | ".join(cols) + " |",
        "|" + "---|" * (len(cols) + 1),
    ]
    for n in x["ns"]:
        lines.append(
            f"| {n} | " + " | ".join(fmt(*x["per_n"][c].get(n, (float("nan"), None))) for c in cols) + " |"
        )
    if x.get("best_lr"):
        ends = {f"{min(x['lr_grid']):g}", f"{max(x['lr_grid']):g}"}
        edge = any(ends & set(str(v).replace(" (even seeds)", "").replace(" (odd seeds)", "").split(" / "))
                   for v in x["best_lr"].values())
        lines += [
            "",
            "Best constant lr per n at the top budget (record reward, chosen on held-out seeds): "
            + ", ".join(f"n={n}: {lr}" for n, lr in sorted(x["best_lr"].items()))
            + (" (some at the edge of the lr grid)" if edge else ""),
            "",
            "constant-lr grid " + ", ".join(f"{v:g}" for v in x["lr_grid"])
            + "; best constant lr on a grid edge at any budget (n@budget: lr): "
            + (", ".join(f"n={n}@{budget_text(b)}: {lr:g}" for n, b, lr in x.get("lr_edges", [])) or "none"),
        ]
    if x.get("record_final"):
        lines += ["", "Record against final at the top budget, per n of the verdict's treatment (seed means; "
                  "the best constant lr is the envelope grid's best on the reported seeds: a description, "
                  "not a choice):", "",
                  "| n | lr it ran at | its best constant lr | ratio | record − final |",
                  "|---|---|---|---|---|"]
        lines += [f"| {n} | {r['lr']:.3g} | {r['best_lr']:g}{' (edge)' if r['edge'] else ''} | "
                  f"{r['ratio']:.2f}x | {r['drop']:+.4f} |" for n, r in sorted(x["record_final"].items())]
    if x.get("lag"):
        from studies.fit.render import print_lag

        block: list[str] = []
        print_lag(x["lag"], block.append)
        lines += ["", f"Speed or ceiling under {x['main']} (the readout of `isocompute fit`, "
                  "studies.fit.lag; not in the verdict):", "", "```", *block, "```"]
    if x["tabular_per_lr"]:
        lines += [
            "",
            "Tabular control at each constant lr, n* per budget (record train_mean): "
            + "; ".join(f"lr {lr}: {s}" for lr, s in x["tabular_per_lr"].items())
            + ".",
        ]
    return lines


F1 = Section(
    "f1",
    "Finding 1: n*(C) grows with compute and saturates (n vs M at fixed B_p)",
    "Fig 6-7: n* grows with C and saturates (Easy ~512, Hard ~128); small n plateaus early.",
    studies=f1_studies,
    measure=f1_measure,
    verdict=f1_verdict,
    body=f1_body,
    setup=lambda p: setup_text(p, _recipe(p), f"; n in {list(p.ns)}; val_mean; lr treatments below"),
    backends=("sim", "llm"),
    rules=(F1_RULE,),
    ceiling=lambda p: {"recipe" if p.recipe else "backend": (_recipe(p), "val_mean")},
)


# ------------------------------------------------------------------------------------------------ finding 6
def _f6(p: ClaimsMode) -> dict:
    return {
        "interference (hidden 32)": p.study("side-inter", n=p.side_ns, budget=p.side_top),
        "interference, hidden 8": p.study("side-inter-h8", n=p.side_ns, budget=p.side_top, hidden=8),
        "skills (dim 16)": p.study("side-skills", preset="skills", n=p.side_ns, budget=p.side_top, dim=16),
    }


def f6_measure(t: Tables, p: ClaimsMode) -> dict:
    out = {}
    for k, st in _f6(p).items():
        tab = t[st.name]
        out[k] = {"rows": n_star_rows(tab, p.budgets(p.side_top)),
                  "gain": contrast(tab, float(p.side_top), p, p.side_ns, "best")}
    return {"models": out}


def f6_verdict(x: dict) -> tuple[str, str]:
    return (
        "not applicable to a simulator",
        "the simulator has no pretrained base models; the analogues above show how the policy class moves "
        "n*(C) under the recipe: growth where n* is determined "
        + ", ".join(f"{k}: {growth_text(growth(v['rows']))}" for k, v in x["models"].items()) + ".",
    )


F6 = Section(
    "f6",
    "Finding 6: other base models show the trend with different saturation points",
    "Fig 12: Qwen3-4B and Llama-3.1-8B show the trend; saturation at n* 16-64.",
    studies=lambda p: tuple(_f6(p).values()),
    measure=f6_measure,
    verdict=f6_verdict,
    body=lambda x: (
        ["| model | n* per budget (record val_mean) | growth (where determined) | top-budget gain of large "
         "n |", "|---|---|---|---|"]
        + [f"| {k} | {stars_text(v['rows'])} | {growth_text(growth(v['rows']))} | "
           f"{contrast_text(v['gain'])} |" for k, v in x["models"].items()]
    ),
    setup=lambda p: (
        "simulator analogues of other base models under the recipe: `interference` capacity (hidden units) "
        "and the `skills` policy, each with its own tuned base lr"
    ),
    refused="its analogues of other base models are simulator policies (run other LMs with --option model=)",
)


# ------------------------------------------------------------------------------------------------ finding 10
def _f10(p: ClaimsMode):
    if p.backend == "sim":
        return p.study("side-inter-tokens", n=p.side_ns, budget=p.side_top, response_len=100.0)
    return p.study("inter")


F10_RULE = gain_rule(f"{TOP_GAIN}, at the top token budget")
"""Finding 10's key quantity: the same gain as finding 1's, with compute counted in generated tokens."""


def f10_measure(t: Tables, p: ClaimsMode) -> dict:
    tab = t[_f10(p).name]
    tmax = float(tab.groupby("run_id")["tokens"].max().min())
    tb = [tmax / 4**k for k in range(5, -1, -1)]
    ns = p.side_ns if p.backend == "sim" else p.ns
    small = [n for n in ns if n <= p.small_max]
    return {
        "rows_tokens": n_star_rows(tab, tb, x="tokens"),
        "n_star_rollouts": n_star_rows(tab, p.budgets(p.side_top)),
        "gain": contrast(tab, tmax, p, ns, "best", x="tokens"),
        "stake": (n_star_rows(tab, [tmax], x="tokens", small=small) or [{}])[-1].get("stake"),
    }


def f10_verdict(x: dict) -> tuple[str, str]:
    j = judge(F10_RULE, x["gain"]["iv"])
    rows = x["rows_tokens"]
    return j.verdict, (
        f"rule: {F10_RULE.text()}. Measured: {j.text()}. n* over token budgets (not in the verdict): "
        f"{stars_text(rows)}, growth where determined {growth_text(growth(rows))}; over rollouts "
        f"{growth_text(growth(x['n_star_rollouts']))}; at the top token budget {stake_text(x.get('stake'))}."
    )


F10 = Section(
    "f10",
    "Finding 10: compute in tokens gives the same shape",
    "Fig 24: n*(C) with C in tokens has the same sigmoid shape with a different slope.",
    studies=lambda p: (_f10(p),),
    measure=f10_measure,
    verdict=f10_verdict,
    body=lambda x: (
        ["| token budget | n* (record) | reward ± CI |", "|---|---|---|"]
        + [f"| {r['budget']:.3g} | {n_star_cell(r)} | {fmt(r['mean'], r['ci'])} |" for r in x["rows_tokens"]]
        + ["", "n* per rollout budget for the same runs: " + stars_text(x["n_star_rollouts"]),
           "", "Top-token-budget gain of large n: " + contrast_text(x["gain"])]
    ),
    setup=lambda p: setup_text(p, _f10(p), "; tokens = generated tokens (sim: response-length model on)"),
    backends=("sim", "llm"),
    rules=(F10_RULE,),
    ceiling=lambda p: {"tokens study": (_f10(p), "val_mean")},
)


# ------------------------------------------------------------------------------------------------ finding 11
def _f11(p: ClaimsMode) -> dict:
    return {
        obj: p.study(f"side-inter-{obj}", n=p.side_ns, budget=p.side_top, objective=obj, ppo_epochs=2)
        for obj in ("ppo", "cispo")
    }


F11_RULE = gain_rule(f"{TOP_GAIN}, per objective")
"""Finding 11's key quantity: finding 1's gain under each clipped objective; the claim needs both."""


def f11_measure(t: Tables, p: ClaimsMode) -> dict:
    out = {}
    small = [n for n in p.side_ns if n <= p.small_max]
    for obj, st in _f11(p).items():
        tab = t[st.name]
        out[obj] = {
            "n_star": n_star_rows(tab, p.budgets(p.side_top), small=small),
            "contrast": contrast(tab, float(p.side_top), p, p.side_ns, "best"),
            "final": contrast(tab, float(p.side_top), p, p.side_ns, "final"),
        }
    tabs = [t[st.name] for st in _f11(p).values()]
    return {"objectives": out, "same_runs": coinciding_ns(*tabs)}


def coinciding_ns(a: pd.DataFrame, b: pd.DataFrame, metric: str = "val_mean") -> list:
    """The n at which two objectives' runs gave the same `metric` at every (seed, compute), bit for bit: PPO's
    clipped surrogate and CISPO's clipped weight have the same gradient while no probability ratio leaves
    the clip range, so where they coincide the two rows of finding 11 are one test, not two."""
    key = ["n", "seed", "compute"]
    m = a[key + [metric]].merge(b[key + [metric]], on=key, how="outer", suffixes=("_a", "_b"))
    same = m.groupby("n").apply(lambda g: bool((g[f"{metric}_a"] == g[f"{metric}_b"]).all()),
                                include_groups=False)
    return [config_value(n) for n, v in same.items() if v]


def f11_verdict(x: dict) -> tuple[str, str]:
    parts = {k: judge(F11_RULE, v["contrast"]["iv"]) for k, v in x["objectives"].items()}
    fin = {k: judge(F11_RULE, v["final"]["iv"]).verdict for k, v in x["objectives"].items()}
    v = combine([j.verdict for j in parts.values()])
    return v, (f"rule: {F11_RULE.text()}; the claim holds where both objectives reproduce (a mix of "
               f"reproduced and not reproduced: partly). {parts_text(parts)}. On the final reward (not in "
               "the verdict): " + ", ".join(f"{k}: {b}" for k, b in fin.items()) + ".")


def same_runs_text(ns: list) -> str:
    """Finding 11's note on the n at which PPO and CISPO ran the same (coinciding_ns)."""
    if not ns:
        return "PPO and CISPO runs differ at every n."
    return (f"PPO and CISPO ran the same, bit for bit, at n = {', '.join(map(str, ns))} (every seed and "
            "evaluation), as they do only while no probability ratio leaves the clip range (inside it the "
            "clipped surrogate and the clipped weight have one gradient): at those n the two rows are one "
            "test, not two.")


F11 = Section(
    "f11",
    "Finding 11: PPO and CISPO show the same trend",
    "Fig 25: PPO and CISPO objectives show the same n*(C) trend.",
    studies=lambda p: tuple(_f11(p).values()),
    measure=f11_measure,
    verdict=f11_verdict,
    body=lambda x: (
        ["| objective | n* per budget (record) | growth (where determined) | stake at the top budget | "
         "top-budget gain (record) | top-budget gain (final) |", "|---|---|---|---|---|---|"]
        + [
            f"| {k} | {stars_text(v['n_star'])} | {growth_text(growth(v['n_star']))} | "
            f"{stake_text(v['n_star'][-1].get('stake') if v['n_star'] else None)} | "
            f"{contrast_text(v['contrast'])} | {contrast_text(v.get('final', {}))} |"
            for k, v in x["objectives"].items()
        ]
        + ["", same_runs_text(x.get("same_runs", []))]
    ),
    setup=lambda p: setup_text(
        p,
        _f11(p)["ppo"],
        " and objective='cispo' (each with its own tuned base lr); two passes per batch so the clipped "
        "objectives differ from PG",
    ),
    refused="the llm adapter runs objective pg only so far",
    rules=(F11_RULE,),
    ceiling=lambda p: {k: (st, "val_mean") for k, st in _f11(p).items()},
)

__all__ = ["F1", "F6", "F10", "F11", "THEORY"]
