"""docs/TINY_STUDY.md, its figure and README block from the tiny-LM study's store: `isocompute report
tiny-study` (with `--stage`, it runs that stage into the store first).

Everything shown comes from `isocompute.reports.tiny_study`: the design section from the declaration (the same
text before any run, so the committed document is the preregistration), the status from the stage plans, the
numbers from `measure`. A partial store gives "not yet run" and "stage k of n" where the data stop.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

import numpy as np

from isocompute.reports import tiny_study as ts
from isocompute.reports.claims.common import budget_text as bt

README_BEGIN, README_END = "<!-- tiny-study:begin -->", "<!-- tiny-study:end -->"
COMMITTED = {
    "store": Path("docs/tiny_study/store"),
    "out": Path("docs/TINY_STUDY.md"),
    "fig": Path("docs/figs/tiny_study.png"),
}
"""Where the study of record lives (full mode)."""
QUICK_PATHS = {"store": Path("results/tiny-study-quick"), "out": Path("results/TINY_STUDY-quick.md")}
ARM_NAMES = {
    "R": "arm R (the paper's recipe: one base lr for every n and C)",
    "E": "arm E (the lr envelope: a base lr per (n, C))",
}
STAGE_CMD = "isocompute report tiny-study --stage {stage} --jobs 2"


def _f(v, digits: int = 3, sign: bool = False) -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _mci(m, h, digits: int = 3) -> str:
    if m is None or not np.isfinite(m):
        return "n/a"
    return f"{m:.{digits}f} ± {h:.{digits}f}" if np.isfinite(h) else f"{m:.{digits}f}"


def _star(s: ts.NStar) -> str:
    if s.point is None:
        return "n/a"
    return f"{s.point} [{s.lo}, {s.hi}]" if s.lo is not None else str(s.point)


def lr_grid_text() -> str:
    """The lr grid, said as what it is: base lrs at B_ref under the sqrt rule."""
    grid = ", ".join(f"{ts.lr_point(k):g}" for k in ts.GRID_K)
    return (
        f"base lrs {grid} at B_ref = {ts.LR_REF_BATCH} under the sqrt rule (a run at batch bp n uses "
        f"lr x sqrt(bp n / {ts.LR_REF_BATCH}): at bp 16, n = 4 runs at the listed value, n = 64 at 4x it)"
    )


# ------------------------------------------------------------------------------------------------- design
def size_text(plan: ts.Plan, part: ts.Part) -> str:
    """Runs and rollouts of a part's tuning and reported stages on the declared grid: the reported stage holds
    arm R's lr for every n and, in arm E, up to every other grid lr for each of its n."""
    grid = len(ts.GRID_K)
    tune = len(set(part.ns) | set(part.ns_e)) * grid * len(part.tune_seeds)
    rep_min = len(part.ns) * len(part.report_seeds)
    rep_max = rep_min + len(part.ns_e) * (grid - 1) * len(part.report_seeds)
    m = part.budget / 1e6
    return (
        f"{part.key}: tuning {tune} runs ({tune * m:.1f} M rollouts), reported {rep_min}"
        + (f"-{rep_max}" if rep_max > rep_min else "")
        + f" runs ({rep_min * m:.1f}"
        + (f"-{rep_max * m:.1f}" if rep_max > rep_min else "")
        + " M)"
    )


def design_lines(plan: ts.Plan) -> list[str]:
    """The preregistered design, from the declaration."""
    e = plan.parts[0]
    steps = {n: e.budget // (plan.bp * n) for n in e.ns}
    lines = [
        "## Design (declared and committed before any run)",
        "",
        "Declared in `isocompute/reports/tiny_study.py` (`" + plan.name.upper() + "`), run through the one "
        "study pipeline (studies.declared: StudySpec -> RunConfig -> executor -> ResultStore); this section "
        "is "
        "generated from the declaration, so it reads the same before and after the runs.",
        "",
    ]
    for part in plan.parts:
        arms = " and ".join(part.arms)
        lines.append(
            f"- **{part.key.capitalize()}** (`--lm tiny`, dataset `{part.dataset}`): arm(s) {arms}; n in "
            f"{list(part.ns)} in arm R"
            + (f", {list(part.ns_e)} in arm E" if part.ns_e else "")
            + f"; bp {plan.bp}; every run to {bt(part.budget)} rollouts"
            + (
                f" (n = {max(e.ns)}: {steps[max(e.ns)]:,} steps, n = {min(e.ns)}: {steps[min(e.ns)]:,})"
                if part is e
                else ""
            )
            + f"; validation on {part.d_val} problems, avg@{plan.k} (best@{plan.k}, worst@{plan.k}) at "
            f"{plan.n_evals} log-spaced evaluations; tuning seeds {list(part.tune_seeds)}, reported seeds "
            f"{list(part.report_seeds)}; KL {part.kl_coef:g}, entropy {part.entropy_coef:g}; readout budgets "
            f"{', '.join(bt(b) for b in part.readout)}."
        )
    lines += [
        f'- **Recipe** (the paper\'s, docs/PAPER.md "Healthy recipe"): AdamW, sqrt rule with B_ref '
        f"{ts.LR_REF_BATCH}, {ts.WARMUP_STEPS}-step linear warm-up (`--option "
        f"warmup_steps={ts.WARMUP_STEPS}`), "
        "group-std advantages with the sample std, temperature 1, Easy with KL + entropy, Hard with neither.",
        f"- **KL {ts.KL_COEF:g}** (Easy): a tenth of the earlier tiny-LM study's 0.1 (the upper end of the "
        "usual GRPO range). The anchor should act where the policy gradient is silent (zero-variance groups, "
        "most groups once train reward nears 0.9) without setting the ceiling: at a per-token drift of 0.1-1 "
        f"nat its pull is {ts.KL_COEF * 0.1:g}-{ts.KL_COEF:g} per token against a policy-gradient term of "
        "order "
        "|A| ~ 0.8 per token of an informative group.",
        f"- **Entropy {ts.ENTROPY_COEF:g}** (Easy): verl's long-standing default; at the tiny LM's largest "
        "per-token entropy (ln 18 = 2.9 nats) the bonus is under 0.3% of an informative group's policy "
        "gradient, so it acts against collapse only; paired with KL as the paper requires.",
        f"- **lr grid**: {lr_grid_text()}, 1.78x (10^(1/4)) apart, centred on the base lr the earlier "
        "tiny-LM "
        "study chose for every n (docs/GROUP_STD.md#tiny-lm). An optimum on a grid edge adds the next point "
        "outward on the tuning seeds before anything is reported (`extra_grid_point`), at most "
        f"{plan.max_extra} point(s) each way (then the arm is inconclusive: open edge).",
        "- **Arm R**: one base lr for every n and budget, the argmax over lrs of the mean over n of the "
        "tuning "
        "seeds' top-budget record reward. **Arm E**: a base lr per (n, C), the argmax of the tuning seeds' "
        "mean record reward at C. The reported seeds run only at the chosen lrs (staged: the reported "
        "stage's "
        "run list is a function of the tuning stage's store).",
        "- **Record reward**: the best val avg@k so far (the paper's record-breaking view); a run that "
        "diverged "
        "scores 0 after its divergence. n*(C): the project's one estimator (studies.fit.nstar): the n of the "
        "best seed-mean record reward at C, and as its interval the set of n whose "
        f"{plan.boot}-resample seed-bootstrap interval reaches the best's (the n the seeds cannot tell from "
        "it).",
        "- **Size** before the edge rule adds points: "
        + "; ".join(size_text(plan, p) for p in plan.parts)
        + f". The pilot's {len(plan.pilot_ns)} runs are tuning runs (the same configs), reused.",
        "",
    ]
    for part in plan.parts:
        lines += [f"**Rule, {part.key.capitalize()}** (fixed before the runs): {ts.rule_text(part)}", ""]
    lines += [
        "Readouts beside the verdicts (not part of them): n*(C) with intervals; the reward at stake (best n "
        f"minus the best n <= {ts.SMALL_MAX}, both picked on the tuning seeds) at each C; per-n sigmoid "
        "asymptote with an interval; best@k and worst@k optimal n (finding 2); the pass@1 distribution at "
        "matched compute with its shares at 0 and 1 (finding 5); the zero-variance group share per n; the "
        "train - val gap per n; the frontier against wall time; the chosen lrs per arm.",
        "",
        "Details the study's brief left open or that differ from its text, each with its reason, fixed "
        "before the first run:",
        "",
        "- An edge optimum within half a validation problem (0.5 / d_val) of the next lr inward adds no "
        "point "
        "(a plateau along lr; the criterion of the project's other lr grids, selection.saturated_edge): at "
        "the "
        "smallest budgets, where the largest n has taken a few of its warm-up steps, every lr is within "
        "noise "
        "of the base model and a strict rule would walk the grid to its cap on noise.",
        f"- The edge rule adds at most {plan.max_extra} point(s) each way (a bound on the cost; an optimum "
        "still on "
        "the edge then makes the arm inconclusive).",
    ]
    for part in plan.parts[1:]:
        lines.append(
            f"- {part.key.capitalize()}'s verdict reads the same rule at its own top budget: plateau checks "
            "from "
            f"{bt(part.prev)} to {bt(part.budget)}, S at {bt(part.budget)}, n*({bt(part.budget)}) against "
            f"n*({bt(part.low)}). It validates on the first {part.d_val} problems of its split, as many as "
            f"{e.key.capitalize()} has, so that an evaluation costs the same."
        )
    lines += [
        "- A run that diverged scores 0 after its divergence (its policy is NaN), so a too-large lr loses "
        "its "
        "tuning comparison instead of dropping out of it.",
        "",
        "Changes after the first run (to the engine, not the design):",
        "",
        "- From the reported stages on (after Easy's tuning stage finished), evaluation decodes with row "
        "compaction (llm_backend/tiny/sampler.py: finished rows leave the decoding batch, each row keeps its "
        "own random draws). Training rollouts are unchanged bit for bit; evaluation tokens can differ only "
        "through matmul round-off over fewer rows, and tests/llm_backend/test_tiny_compaction.py measured "
        "identical tokens on every one of 60,864 evaluation rows on the study's machine (the test bounds it "
        "at 99.5% of rows). Why: evaluation was half of a short run's time.",
    ]
    return lines


# ------------------------------------------------------------------------------------------------- status
def status_lines(x: dict) -> list[str]:
    rows = x["stages"]
    finished = [r for r in rows if r["declared"] and r["done"] == r["declared"] and not r["blocked"]]
    k = 0
    for r in rows:  # stages finish in order; count the leading finished ones
        if r in finished:
            k += 1
        else:
            break
    out = [
        "## Status",
        "",
        f"Stage {k} of {len(rows)} finished. Each stage runs with `{STAGE_CMD.format(stage='STAGE')}` "
        "(resumable; alone on the machine: a test suite beside it halves it), then this document is "
        "regenerated from the store.",
        "",
        "| stage | runs finished / declared | rollouts declared | state |",
        "|---|---|---|---|",
    ]
    for r in rows:
        state = (
            (r["blocked"] or "")
            if r["blocked"]
            else (
                "finished"
                if r["declared"] and r["done"] == r["declared"]
                else "not yet run"
                if r["done"] == 0
                else f"running or interrupted ({r['rollouts_left'] / 1e6:.2f} M rollouts left)"
            )
        )
        out.append(
            f"| {r['stage']} | {r['done']} / {r['declared']} | {r['rollouts'] / 1e6:.2f} M | {state} |"
        )
    out += [
        "",
        "(A tuning stage's declared runs grow when the edge rule adds a grid point; the reported "
        "stages are declared once their tuning stage is complete.)",
    ]
    return out


def same_top_lrs(ch: ts.Choices | None, part: ts.Part) -> bool:
    """Whether arm E's base lr at the top budget is arm R's for every n of arm E (its verdict then reads the
    same runs as arm R's)."""
    if ch is None or "E" not in part.arms:
        return False
    return all(ch.e_lr.get((n, float(part.budget))) == ch.r_lr for n in part.arm_ns("E"))


def verdict_lines(x: dict) -> list[str]:
    out = ["## Verdicts", ""]
    for key, res in x["parts"].items():
        part = res["part"]
        for arm in part.arms:
            name = f"{key.capitalize()}, {ARM_NAMES[arm]}"
            a = res["arms"].get(arm)
            v = a and a.get("verdict")
            if v is None:
                why = (
                    "its tuning stage is not finished"
                    if res["choices"] is None
                    else f"{a['done']} of {a['declared']} reported runs finished"
                    if a
                    else "not yet run"
                )
                out.append(f"- {name}: **not yet decided** ({why}).")
                continue
            line = f"- {name}: **{v.outcome}**. {v.why}."
            if v.decide:
                line += f" What would decide it: {v.decide}."
            if v.outcome == ts.INCONCLUSIVE and arm == "R":
                line += (" Why the rule could not decide: its NOT REPRODUCED needs both plateau checks, "
                         "and the gains per octave under \"What the data show\" say at which budget they "
                         "would hold.")
            if arm == "E" and same_top_lrs(res["choices"], part):
                line += (f" (At {bt(part.budget)} arm E chose arm R's base lr {res['choices'].r_lr:g} for "
                         "every n, so its verdict reads the same runs as arm R's.)")
            out.append(line)
        if "survives" in res:
            arms = res["arms"]
            both = all(arms[a].get("verdict") is not None for a in ("R", "E"))
            out.append(
                f"- {key.capitalize()}: survives lr tuning (REPRODUCED in R and E): "
                + (("**yes**" if res["survives"] else "**no**") if both else "not yet decided")
                + "."
            )
    return out


def _iv(c: dict, digits: int = 3) -> str:
    return f"{_f(c['mean'], digits, True)} [{_f(c['lo'], digits, True)}, {_f(c['hi'], digits, True)}]"


def shown_lines(x: dict) -> list[str]:
    """"What the data show", before the verdicts: per split (arm R, the reported seeds) n* at every readout
    budget, each larger n's contrast against the smallest n at every budget in both readings
    (isocompute.reports.tiny_readings), the smallest and largest n's gain per octave with where the plateau
    check would hold, and the speed-or-ceiling readout of studies.fit.lag."""
    from isocompute.reports.tiny_readings import INTERP, STEP
    from studies.fit.lag import ceiling_text

    out = ["## What the data show", "",
           "Read from the reported seeds of arm R (the paper's recipe), before any verdict. Two readings of "
           "a record reward at a budget C, labelled: *interpolated* (the record curve joined linearly in "
           "log2 C, as studies.fit reads it) and *step* (the last evaluation at or below C, what the "
           "preregistered rule reads; it trails the curve by up to one gap between evaluation points).", ""]
    for key, res in x["parts"].items():
        a = res["arms"].get("R") or {}
        r = a.get("readings")
        if not r:
            continue
        part = res["part"]
        stars = a.get("stars", ())
        pts = {st.point for st in stars}
        star = (f"n* = {next(iter(pts))} at every readout budget from {bt(part.readout[0])} to "
                f"{bt(part.readout[-1])}" if len(pts) == 1 else
                "n* per budget: " + ", ".join(f"{bt(int(b))}: {st.point}" for b, st in zip(
                    part.readout, stars, strict=False)))
        ns = [n for n in part.ns if n != part.small]
        out += [f"### {key.capitalize()} (n in {list(part.ns)}, seeds {list(part.report_seeds)})", "",
                f"- {star} (the seed-bootstrap sets are in the results below).",
                f"- Each larger n minus n = {part.small}, paired over seeds, mean [95% t-interval], "
                "interpolated; step reading after the semicolon:", "",
                "| C | " + " | ".join(f"n = {n}" for n in ns) + " |", "|---|" + "---|" * len(ns)]
        by = {(c["budget"], c["n"], rd): c for rd in (INTERP, STEP) for c in r["contrasts"][rd]}
        for b in r["budgets"]:
            cells = []
            for n in ns:
                ci, cs = by.get((b, n, INTERP)), by.get((b, n, STEP))
                cells.append(f"{_iv(ci)}; {_iv(cs)}" if ci and cs else "")
            out.append(f"| {bt(int(b))} | " + " | ".join(cells) + " |")
        out.append("")
        for name, n in (("small", part.small), ("large", max(part.ns))):
            gi = r[f"gains_{name}"][INTERP]
            gs = {g["budget"]: g["gain"] for g in r[f"gains_{name}"][STEP]}
            seq = ", ".join(f"{_f(g['gain'], 3, True)} ({_f(gs.get(g['budget']), 3, True)})" for g in gi[-4:])
            at = r[f"plateau_{name}"]
            when = (f"a straight line through these interpolated gains reaches {ts.PLATEAU_GAIN} per octave "
                    f"near 2^{at:.1f}" if at is not None else "these gains do not fall yet, so no budget "
                    "where they would reach the plateau check's 0.01 can be read off them")
            out.append(f"- n = {n} gains per octave, the last four octaves to {bt(part.budget)} "
                       f"(interpolated, step in parentheses): {seq}; {when}.")
        lag = r.get("lag") or {}
        if lag.get("pairs"):
            out.append(f"- Speed or ceiling (studies.fit.lag; {lag['level']:.0%} seed-bootstrap intervals, "
                       f"{lag['reps']} resamples):")
        for pr in lag.get("pairs", []):
            extra = ""
            ls = pr.get("lr_steps") or {}
            if ls.get("status") == "ok":
                lo, hi = ls["interval"]
                extra = (" Against cumulative lr x steps instead of compute the lag is "
                         f"{_f(ls['lag'], 2, True)} octaves [{_f(lo, 2, True)}, {_f(hi, 2, True)}].")
            ceil = ceiling_text(pr["ceiling"], "n", pr["n"], pr["reference"])
            out.append(f"  - {pr['text']}.{extra} {ceil[0].upper()}{ceil[1:]}.")
        out.append("")
    return out


def pilot_lines(x: dict) -> list[str]:
    plan = x["plan"]
    out = [
        "## Pilot",
        "",
        f"The final recipe on n in {list(plan.pilot_ns)}, seed {plan.parts[0].tune_seeds[0]}, base lr "
        f"{ts.LR_CENTRE:g}, to {bt(plan.parts[0].budget)} (runs the tuning stage reuses: same configs): "
        "speed "
        "and stability with warm-up and KL + entropy.",
        "",
        "| n | status | val at 0 | best val (at C) | last val | last train | last entropy | last KL | wall "
        "s | "
        "rollouts/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in x["pilot"]:
        if "val_last" not in r:
            out.append(f"| {r['n']} | {r['status']} | | | | | | | | |")
            continue
        out.append(
            f"| {r['n']} | {r['status']} | {r['val_base']:.3f} | {r['val_best']:.3f} ({bt(r['at'])}) | "
            f"{r['val_last']:.3f} | {r['train_last']:.3f} | {r['entropy']:.3f} | {_f(r['kl'], 4)} | "
            f"{r['wall']:.0f} | {r['rate']:.0f} |"
        )
    return out


def choice_lines(res: dict) -> list[str]:
    part, ch = res["part"], res["choices"]
    out = [f"### Chosen base lrs ({part.key}, tuning seeds {list(part.tune_seeds)})", ""]
    if ch is None:
        return out + [f"Not yet: {res['tuning_missing']} tuning run(s) missing."]
    scores = ", ".join(f"{lr:g}: {s:.4f}" for lr, s in sorted(ch.r_scores.items()))
    out.append(f"Arm R: **{ch.r_lr:g}** (mean over n of the top-budget record reward per base lr: {scores}).")
    if ch.e_lr:
        budgets = sorted({c for _, c in ch.e_lr})
        out += [
            "",
            "Arm E, base lr per (n, C):",
            "",
            "| n | " + " | ".join(bt(c) for c in budgets) + " |",
            "|---|" + "---|" * len(budgets),
        ]
        for n in part.ns_e:
            out.append(
                f"| {n} | "
                + " | ".join(f"{ch.e_lr[(n, c)]:g}" if (n, c) in ch.e_lr else "-" for c in budgets)
                + " |"
            )
    grid = sorted({lr for _, lr in res["needed"]})
    out += [
        "",
        f"Grid run on the tuning seeds (declared + edge rule): {', '.join(f'{v:g}' for v in grid)}. "
        f"Open edges: {'; '.join(ch.open_edges) or 'none'}.",
    ]
    return out


def arm_lines(key: str, arm: str, a: dict, plan: ts.Plan) -> list[str]:
    title = f"### {key.capitalize()}, {ARM_NAMES[arm]}"
    if "rec" not in a:
        return [title, "", f"Not yet: {a['done']} of {a['declared']} reported runs finished."]
    ns = sorted(a["top_mean"])
    out = [title, ""]
    if a["done"] < a["declared"]:
        out += [f"Provisional: {a['done']} of {a['declared']} reported runs finished.", ""]
    out += [
        "Top-budget record reward per n (reported seeds, mean ± 95% CI): "
        + ", ".join(f"n={n}: {_mci(*a['top_mean'][n])}" for n in ns)
        + ".",
        "",
    ]
    out += [
        "| C | n* [95% bootstrap] | n* best@k | n* worst@k | reward at stake (best n − best small n) |",
        "|---|---|---|---|---|",
    ]
    for b, s, bk, wk, st in zip(a["budgets"], a["stars"], a["best_k"], a["worst_k"], a["stake"], strict=True):
        stake = (
            "n/a"
            if st["best"] is None
            else f"0 (the best n, {st['best']}, is small)"
            if st["best"] == st["best_small"]
            else f"n={st['best']} − n={st['best_small']}: {_f(st['mean'], 4, True)} ± {_f(st['ci'], 4)}"
        )
        out.append(f"| {bt(b)} | {_star(s)} | {bk.point} | {wk.point} | {stake} |")
    out += [
        "",
        "Per-n sigmoid asymptote A (fit of the seed-mean curve; mean ± 95% CI of per-seed fits), the "
        "train − val gap at the end, and the fall of val from its record to the end (overfitting):",
        "",
        "| n | A (pooled) | A (per seed) | train − val at the end | val record − val at the end |",
        "|---|---|---|---|---|",
    ]
    for n in ns:
        A = a["asymptote"].get(n, {})
        out.append(
            f"| {n} | {_f(A.get('A'))} | {_mci(A.get('seed_mean'), A.get('ci', float('nan')))} | "
            f"{_mci(*a['gap'].get(n, (float('nan'), float('nan'))))} | "
            f"{_mci(*a['overfit'].get(n, (float('nan'), float('nan'))))} |"
        )
    out += [
        "",
        "Pass@1 distribution at matched compute (finding 5; stored snapshots, reported seeds, mean over "
        f"seeds; share at 0: no correct answer in k = {plan.k} samples, at 1: all correct) and the "
        "zero-variance group share of the step before:",
        "",
        "| C | split | " + " | ".join(f"n={n}: mean / at 0 / at 1" for n in ns) + " |",
        "|---|---|" + "---|" * len(ns),
    ]
    for c, splits in a["pass1"].items():
        for split, per in sorted(splits.items()):
            cells = [
                f"{per[n]['mean']:.3f} / {per[n]['zero']:.3f} / {per[n]['one']:.3f}" if n in per else "n/a"
                for n in ns
            ]
            out.append(f"| {bt(c)} | {split} | " + " | ".join(cells) + " |")
        zv = a["zero_var"].get(c, {})
        out.append(
            f"| {bt(c)} | zero-var groups | "
            + " | ".join(_f(zv[n][0]) if n in zv else "n/a" for n in ns)
            + " |"
        )
    out += grid_lines(a.get("grid") or {}, plan.part(key))
    w = a["wall"]
    out += [
        "",
        "Speed and the frontier against wall time (a run's rollouts/s over its whole wall time, "
        "evaluations included; machine-dependent): "
        + ", ".join(f"n={n}: {_mci(*w['rate'][n], digits=0)} rollouts/s" for n in ns if n in w["rate"])
        + ".",
    ]
    if w["times"]:
        out.append(
            "n* by wall time: "
            + ", ".join(f"{t:.3g} s: {s}" for t, s in zip(w["times"], w["n_star"], strict=True))
            + "."
        )
    return out


def grid_lines(grid: dict, part: ts.Part) -> list[str]:
    """The plateau checks' evaluation grid (ts.plateau_grid): which evaluation the record at `prev` reads,
    and the gains to the top budget read from the first evaluation past `prev` (a sensitivity reading)."""
    if not grid:
        return []
    ns = sorted(grid)
    prev, top = bt(part.prev), bt(part.budget)

    def at(c: float) -> str:
        return f"2^{np.log2(c):.2f}"

    return [
        "",
        f"How the plateau checks read the evaluation grid (a readout beside the rule, not part of it): the "
        f"record at {prev} is that of the last evaluation at or below it, at "
        + ", ".join(f"n={n}: {at(grid[n]['read'])}" for n in ns)
        + f", so the rule's gain \"from {prev} to {top}\" spans that much more compute: "
        + ", ".join(f"n={n}: {_f(grid[n]['gain_read'], 4, True)}" for n in ns)
        + f" (at the top budget's lr). Read from the first evaluation past {prev} ("
        + ", ".join(f"n={n}: {at(grid[n]['past'])}" for n in ns)
        + f") the gains to {top} are "
        + ", ".join(f"n={n}: {_f(grid[n]['gain_past'], 4, True)}" for n in ns)
        + f" (the plateau margin is {ts.PLATEAU_GAIN:g}).",
    ]


def render(x: dict, cmd: str, fig: Path | None, out: Path, elapsed: float) -> str:
    plan = x["plan"]
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    done = sum(r["done"] for r in x["stages"])
    lines = [
        "# The tiny-LM allocation study: does n*(C) rise once large n gets a thousand steps?",
        "",
        f"Generated by `{cmd}` on {now} from the results directory `{x['root']}` in {elapsed:.0f} s. Nothing "
        "here is typed by hand: the design is the declaration (isocompute/reports/tiny_study.py), every "
        "number "
        f"comes from the store ({done} finished run(s) counted over the stages). The question: "
        'docs/PAPER.md "The question"; why this study: the earlier tiny-LM study (docs/GROUP_STD.md#tiny-lm) '
        'gave '
        "n = 32 at most 128 steps, the paper's low-compute regime.",
    ]
    if plan.name == "quick":
        lines += [
            "",
            "**Quick mode**: a plan of seconds for CI; the verdicts test the machinery, not the science.",
        ]
    lines += [""] + status_lines(x) + [""] + shown_lines(x) + verdict_lines(x)
    if fig is not None:
        lines += ["", f"![record reward, n*(C) and the stake per arm]({os.path.relpath(fig, out.parent)})"]
    lines += [""] + design_lines(plan) + [""] + pilot_lines(x)
    lines += ["", "## Results"]
    for key, res in x["parts"].items():
        lines += [""] + choice_lines(res)
        for arm, a in res["arms"].items():
            lines += [""] + arm_lines(key, arm, a, plan)
    return "\n".join(lines) + "\n"


def verdict_gist(v: ts.Verdict, part: ts.Part, stars=()) -> str:
    """A verdict in one clause for README: the outcome, n* at the top budget, the stake S with its interval,
    whether n* was the same at every readout budget (`stars`: the arm's n* per budget) and which plateau
    checks fail (the evidence a reader acts on)."""
    num, s = v.numbers, v.numbers["stake"]
    top = bt(part.budget)
    lo, hi = num["n_star_top_lo"], num["n_star_top_hi"]
    star = f"{num['n_star_top']}" + (f" [{lo}, {hi}]" if lo is not None and lo != hi else "")
    text = f"**{v.outcome}** (n*({top}) = {star}"
    if s["n_large"] is not None and np.isfinite(s["mean"]):
        text += (f"; S = n={s['n_large']} − n={s['n_small']} = {s['mean']:+.3f} "
                 f"[{s['lo']:+.3f}, {s['hi']:+.3f}]")
    points = {st.point for st in stars}
    if len(points) == 1 and None not in points:
        text += f"; n* = {points.pop()} at every readout budget"
    checks = (("the smallest n", num["p_small"]), ("the largest n", num["p_large"]))
    rising = [w for w, ok in checks if not ok]
    if rising:
        text += f"; {' and '.join(rising)} still rising at {top}"
    return text + ")"


def readme_paragraph(x: dict, out: Path) -> str:
    """README.md's science line: what the study is and where it stands, from the same data."""
    k = next(
        (i for i, r in enumerate(x["stages"]) if not (r["declared"] and r["done"] == r["declared"])),
        len(x["stages"]),
    )
    parts = []
    for key, res in x["parts"].items():
        for arm in res["part"].arms:
            a = res["arms"].get(arm, {})
            v = a.get("verdict")
            gist = verdict_gist(v, res["part"], a.get("stars", ())) if v else "not yet decided"
            parts.append(f"{key} arm {arm}: {gist}")
    return (
        f"The paper's question on a real transformer: the preregistered tiny-LM study "
        f"(`isocompute report tiny-study`, [{out}]({out})) gives n = 64 about a thousand steps at 2^20 "
        f"rollouts. {shown_gist(x)}Its rule, committed before the runs: stage {k} of {len(x['stages'])} "
        f"finished; {'; '.join(parts)}."
    )


def shown_gist(x: dict) -> str:
    """What the data show, for README, before the verdicts: per split n* across the readout budgets and the
    lag of the largest n behind the smallest (studies.fit.lag), with its trend word and the val contrast at
    matched train reward. Empty until arm R has readings."""
    out, speed_only = [], True
    for key, res in x["parts"].items():
        r = (res["arms"].get("R") or {}).get("readings")
        if not r:
            continue
        part, stars = res["part"], res["arms"]["R"].get("stars", ())
        pts = {st.point for st in stars}
        star = (f"n* = {next(iter(pts))} at every budget from {bt(part.readout[0])} to {bt(part.readout[-1])}"
                if len(pts) == 1 else "n* changes with the budget")
        pair = next((p for p in r["lag"].get("pairs", []) if p["n"] == max(part.ns)), None)
        text = f"{key}: {star}"
        speed_only &= bool(pair) and pair["lag"].get("trend") == "constant" and (
            pair["ceiling"].get("verdict") == "same")
        if pair and pair["lag"].get("status") == "ok":
            lag, (lo, hi) = pair["lag"], pair["lag"]["interval"]
            text += (f", and n = {pair['n']}'s record curve is n = {pair['reference']}'s delayed by "
                     f"{lag['lag']:.2f} octaves of compute [{lo:.2f}, {hi:.2f}] ({r['lag']['level']:.0%} "
                     f"seed bootstrap), {lag['trend']} over rewards "
                     f"{lag['range'][0]:.2f}-{lag['range'][1]:.2f}")
            c = pair["ceiling"]
            if c.get("status") == "ok":
                text += (f", with the same validation reward at matched train reward within "
                         f"{_f(c['interval'][0], 3, True)} to {_f(c['interval'][1], 3, True)}"
                         if c["verdict"] == "same" else f" (val at matched train reward: {c['verdict']})")
        out.append(text)
    if not out:
        return ""
    said = (": on this model n changes the speed of learning, not (so far) the ceiling" if speed_only else
            ": the lag or the val contrast is not the same for every split (docs/TINY_STUDY.md)")
    return "What the data show (arm R, reported seeds): " + "; ".join(out) + said + ". "


def write_figure(x: dict, path: Path) -> None:
    """Three panels: Easy arm R's reported-seed mean record reward per n against compute; n*(C) per arm with
    its bootstrap interval; the reward at stake per arm with its 95% CI."""
    from matplotlib.figure import Figure

    from studies.files import atomic_save_figure
    from studies.fit.plots import n_cmap

    fig = Figure(figsize=(15, 4.4), constrained_layout=True)
    ax = fig.subplots(1, 3)
    arms = [(key, arm, a) for key, res in x["parts"].items() for arm, a in res["arms"].items() if "rec" in a]
    if not arms:
        for a in ax:
            a.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=a.transAxes)
            a.set_axis_off()
    else:
        key, arm, a = arms[0]
        rec = a["rec"]
        ns = sorted(rec["n"].unique())
        cm = n_cmap()
        for i, n in enumerate(ns):
            g = rec.loc[rec["n"] == n].groupby("budget")["reward"].mean()
            ax[0].plot(g.index, g.to_numpy(), marker="o", color=cm(i / max(len(ns) - 1, 1)), label=f"n={n}")
        ax[0].set(
            xscale="log",
            xlabel="compute C (rollouts)",
            ylabel="record val avg@k",
            title=f"{key}, arm {arm}: reported-seed mean",
        )
        ax[0].legend(fontsize=7)
        for j, (key, arm, a) in enumerate(arms):
            b = np.array(a["budgets"]) * (1 + 0.04 * (j - 1))
            s = np.array([np.nan if v.point is None else v.point for v in a["stars"]], dtype=float)
            lo = np.array([np.nan if v.lo is None else v.lo for v in a["stars"]], dtype=float)
            hi = np.array([np.nan if v.hi is None else v.hi for v in a["stars"]], dtype=float)
            ax[1].errorbar(
                b,
                s,
                yerr=[np.nan_to_num(s - lo), np.nan_to_num(hi - s)],
                marker="o",
                capsize=3,
                label=f"{key} {arm}",
            )
            m = np.array([v["mean"] for v in a["stake"]], dtype=float)
            h = np.array([v["ci"] for v in a["stake"]], dtype=float)
            ax[2].errorbar(b, m, yerr=np.nan_to_num(h), marker="o", capsize=3, label=f"{key} {arm}")
        ax[1].set(
            xscale="log",
            yscale="log",
            xlabel="compute C (rollouts)",
            ylabel="n*(C)",
            title="n*(C), 95% seed bootstrap",
        )
        grid_ns = sorted({n for _, _, a in arms for n in a["top_mean"]})
        ax[1].set_yticks(grid_ns, [str(n) for n in grid_ns])
        ax[1].minorticks_off()
        ax[1].legend(fontsize=7)
        ax[2].axhline(0, color="k", lw=0.8)
        ax[2].set(
            xscale="log",
            xlabel="compute C (rollouts)",
            ylabel="best n − best small n",
            title="reward at stake (95% CI)",
        )
        ax[2].legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_save_figure(fig, path, dpi=110)


def summary(x: dict) -> dict:
    """The `--json` object: stages and verdicts."""
    out = {"plan": x["plan"].name, "store": x["root"], "stages": x["stages"], "parts": {}}
    for key, res in x["parts"].items():
        ch = res["choices"]
        p = {
            "tuning_missing": res["tuning_missing"],
            "arms": {},
            "lr_r": ch.r_lr if ch else None,
            "open_edges": ch.open_edges if ch else [],
        }
        for arm, a in res["arms"].items():
            v = a.get("verdict")
            p["arms"][arm] = {
                "done": a["done"],
                "declared": a["declared"],
                "verdict": v.outcome if v else None,
                "why": v.why if v else None,
                "decide": v.decide if v else None,
            }
        if "survives" in res:
            p["survives"] = res["survives"]
        out["parts"][key] = p
    return out


__all__ = [
    "README_BEGIN",
    "README_END",
    "design_lines",
    "readme_paragraph",
    "render",
    "summary",
    "write_figure",
]
