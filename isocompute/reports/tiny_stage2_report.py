"""docs/TINY_STAGE2.md and its figure from stage 2's store: `isocompute report tiny-stage2` (with `--stage`,
it runs that stage into the store first).

The design, rule and predictions come from the declaration (isocompute.reports.tiny_stage2), so the document
generated before the first run is the preregistration; every number comes from `measure`. A partial store
gives each arm's runs done and the readouts so far; an arm is judged only when its judged seeds finished.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import numpy as np

from isocompute.reports import tiny_stage2 as s2
from isocompute.reports.claims.common import budget_text as bt

COMMITTED = {
    "store": Path("docs/tiny_study/stage2"),
    "stage1": Path("docs/tiny_study/store"),
    "out": Path("docs/TINY_STAGE2.md"),
    "fig": Path("docs/figs/tiny_stage2.png"),
}
"""Where stage 2 of record lives (full mode); stage1: the store the drift check reads."""
QUICK_PATHS = {"store": Path("results/tiny-stage2-quick"), "out": Path("results/TINY_STAGE2-quick.md")}
STAGE_CMD = "isocompute report tiny-stage2 --stage {stage} --jobs 2"
README_BEGIN, README_END = "<!-- tiny-stage2:begin -->", "<!-- tiny-stage2:end -->"


def _f(v, digits: int = 3, sign: bool = False) -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def design_lines(plan: s2.Plan) -> list[str]:
    """The declaration as text: arms, recipe, evaluation, rule, extra-seed rule, predictions."""
    out = ["## Design (declared and committed before any run)", "",
           "Declared in `isocompute/reports/tiny_stage2.py` (`FULL`), run through the one study pipeline "
           "(studies.declared: StudySpec -> RunConfig -> executor -> ResultStore); this section is generated "
           "from the declaration, so it reads the same before and after the runs.", ""]
    for a in plan.arms:
        recipe = (f"KL {a.kl_coef:g}, entropy {a.entropy_coef:g}" if a.kl_coef or a.entropy_coef
                  else "no KL, no entropy")
        seeds = f"seeds {', '.join(map(str, a.seeds))}"
        if a.extra_seeds:
            seeds += f" (+ {', '.join(map(str, a.extra_seeds))} under the extra-seed rule)"
        d = f", the first {a.d} training problems" if a.d else ""
        out.append(f"- **{a.key}** (`--lm tiny`, dataset `{a.dataset}`{d}): {a.what} n in {list(a.ns)}, bp "
                   f"{plan.bp}, every run to {bt(a.budget)} rollouts, {seeds}; base lr {a.lr:g} at B_ref "
                   f"{s2.LR_REF_BATCH} under the sqrt rule, {s2.WARMUP_STEPS}-step warm-up, {recipe}.")
    out += [
        f"- **Evaluation**: val avg@{plan.k} (best@{plan.k}, worst@{plan.k}) on {plan.d_val} validation "
        f"problems and the train reward on as many training problems, at step 0, on the absolute grid "
        f"{bt(plan.eval_from)} x 2^(i/{plan.evals_per_octave}) rollouts (the same points for every budget) "
        "and at the run's end. Each run keeps its final state (weights, AdamW state, the problem stream "
        "and history) in the store under final/RUN_ID/, so a later stage can extend it to 2^24.",
        f"- **Frozen from stage 1** (docs/TINY_STUDY.md): the base lr {s2.STAGE1_LR:g} (arm R's choice on "
        "Easy and on Hard), the sqrt rule, the warm-up, Easy's KL and entropy, bp, the validation set.",
        "",
        f"**Rule** (fixed before the runs): {s2.RULE_TEXT}",
        "",
        f"**Extra seeds**: {s2.EXTRA_SEEDS_RULE}",
        "",
        "**Predictions** (committed with the rule):",
        "",
        "| arm | smallest n's record at the top budget | contrasts (larger n − smallest n) | chances "
        "we give the outcomes | why |",
        "|---|---|---|---|---|",
    ]
    for key, p in s2.PREDICTIONS.items():
        lo, hi = p["record_small"]
        cons = "; ".join(f"n = {n}: {a:+.3f} to {b:+.3f}" for n, (a, b) in p["contrasts"].items())
        odds = ", ".join(f"{o} {q:.0%}" for o, q in p["outcome"].items())
        out.append(f"| {key} | {lo:.3f} to {hi:.3f} | {cons} | {odds} | {p['why']} |")
    return out + [""]


def status_lines(x: dict) -> list[str]:
    out = ["## Status", "", "| arm | runs finished / declared | seeds judged | rollouts run | wall (s, "
           "summed) | stage command |", "|---|---|---|---|---|---|"]
    for key, a in x["arms"].items():
        stage = key
        seeds = ", ".join(map(str, a["seeds"]))
        if a["extra"] is None:
            seeds += " (extra seeds decided once these finish)" if x["plan"].arm(key).extra_seeds else ""
        out.append(f"| {key} | {a['done']} / {a['declared']} | {seeds} | {a['rollouts'] / 1e6:.1f} M | "
                   f"{a['wall_s']:.0f} | `{STAGE_CMD.format(stage=stage)}` |")
    out += ["", "Easy's extra seeds run with `" + STAGE_CMD.format(stage="easy-extra") + "` (nothing to run "
            "when the rule does not call for them). Stages are resumable; run them alone on the machine.", ""]
    return out


def verdict_text(v: s2.Verdict) -> str:
    parts = [f"n = {c.n} − smallest: {c.mean:+.4f} [{c.lo:+.4f}, {c.hi:+.4f}] (Holm p {c.p_holm:.3f})"
             for c in v.contrasts]
    s = (f"**{v.outcome}** at {bt(v.budget)} over seeds {', '.join(map(str, v.seeds))}: "
         + "; ".join(parts)
         + f"; the smallest n's record {_f(v.small_record)}, its gain over the last octave "
           f"{_f(v.small_gain, 4, True)}, its train reward {_f(v.small_train)}")
    if v.nothing_learned:
        s += "; no n moved from its start by half a validation problem (nothing was learned)"
    if v.decide:
        s += ". What would decide it: " + "; ".join(v.decide)
    return s + "."


def outcome_lines(x: dict) -> list[str]:
    out = ["## Outcomes", ""]
    for key, a in x["arms"].items():
        v = a["verdict"]
        if v is None:
            out.append(f"- **{key}**: not judged yet ({a['done']} of {a['declared']} runs finished).")
            continue
        p = s2.PREDICTIONS.get(key)
        line = f"- **{key}**: {verdict_text(v)}"
        if p:
            lo, hi = p["record_small"]
            hit = lo <= v.small_record <= hi
            seen = {c.n: c.mean for c in v.contrasts}
            cons = "; ".join(
                f"n = {n} {a:+.3f} to {b:+.3f} (observed {seen[n]:+.4f}: "
                f"{'inside' if a <= seen[n] <= b else 'outside'})"
                for n, (a, b) in p["contrasts"].items() if n in seen)
            line += (f" Predicted before the runs: the smallest n's record {lo:.3f} to {hi:.3f} (observed "
                     f"{v.small_record:.3f}: {'inside' if hit else 'outside'}); contrasts {cons}; "
                     f"outcome odds {', '.join(f'{o} {q:.0%}' for o, q in p['outcome'].items())}.")
        if a.get("first") is not None and a["extra"] is not None and x["plan"].arm(key).extra_seeds:
            line += (f" The first seeds read {a['first'].outcome}; extra seeds "
                     f"{'called for' if a['extra'] else 'not called for'}.")
        out.append(line)
    return out + [""]


def readout_lines(x: dict) -> list[str]:
    """Seed-mean record reward per n at every octave of the grid, per arm (what the store shows so far)."""
    out = ["## Record reward per n (seed means over the finished runs)", ""]
    for key, a in x["arms"].items():
        m = a.get("mean")
        if m is None or not len(m):
            out += [f"**{key}**: no finished run yet.", ""]
            continue
        octs = sorted(b for b in set(m["budget"]) if b > 0 and float(np.log2(b)).is_integer())
        ns = sorted(set(m["n"]))
        out += [f"**{key}** (seeds per cell in parentheses where fewer than declared)", "",
                "| n | " + " | ".join(bt(int(b)) for b in octs) + " |",
                "|---|" + "---|" * len(octs)]
        want = len(a["seeds"])
        for n in ns:
            cells = []
            for b in octs:
                r = m.loc[(m["n"] == n) & (m["budget"] == b)]
                if not len(r):
                    cells.append("")
                    continue
                c = int(r["count"].iloc[0])
                cells.append(f"{r['mean'].iloc[0]:.3f}" + (f" ({c})" if c < want else ""))
            out.append(f"| {n} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def lag_lines(x: dict) -> list[str]:
    """The speed-or-ceiling readout (studies.fit.lag) of each arm whose every n has two finished seeds."""
    from studies.fit.lag import ceiling_text

    out = ["## Speed or ceiling (studies.fit.lag, over the finished runs)", ""]
    for key, a in x["arms"].items():
        r = a.get("readings")
        if not r:
            out.append(f"- **{key}**: not yet (every n needs two finished seeds).")
            continue
        for pr in r["lag"].get("pairs", []):
            ceil = ceiling_text(pr["ceiling"], "n", pr["n"], pr["reference"])
            out.append(f"- **{key}**: {pr['text']}; {ceil} ({r['lag']['level']:.0%} seed-bootstrap "
                       "intervals).")
    return out + [""]


def drift_lines(x: dict) -> list[str]:
    d = x.get("drift")
    out = ["## Drift check (engine since stage 1)", ""]
    if d is None:
        return out + ["No Easy run of stage 2 shares a (n, seed) with stage 1's finished arm-R runs yet.", ""]
    return out + [
        f"Easy's runs here against stage 1's arm-R runs of the same n, seed and base lr (the recipe is the "
        f"same; only the evaluation points differ): validation avg@k of the evaluation at exactly "
        f"{bt(d['at'])} rollouts (not the record, which more evaluation points alone lift), here minus "
        f"there, over {d['pairs']} pair(s): {d['mean']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}], largest "
        f"{d['max_abs']:.4f}, {d['identical']} identical; the seed-to-seed SD of stage 1's values there "
        f"is {_f(d['seed_sd'], 4)}.", ""]


def render(x: dict, cmd: str, fig: Path | None, out: Path, elapsed: float) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Tiny-LM study, stage 2: does n change the ceiling or only the speed?", "",
        f"Generated by `{cmd}` on {now} from the results directory `{x['root']}` in {elapsed:.0f} s. "
        "Nothing here is typed by hand: the design is the declaration (isocompute/reports/tiny_stage2.py), "
        "every number comes from the store. Stage 1: docs/TINY_STUDY.md.", "",
    ]
    lines += status_lines(x) + outcome_lines(x)
    if fig is not None:
        rel = Path(*[".."] * (len(out.parent.parts) - 1), *fig.parts) if out.parent.parts else fig
        lines += [f"![record reward per n and arm]({str(rel).removeprefix('docs/')})", ""]
    lines += readout_lines(x) + lag_lines(x) + drift_lines(x) + design_lines(x["plan"])
    return "\n".join(lines)


def write_figure(x: dict, path: Path) -> None:
    """One panel per arm: the seed-mean record reward per n against compute (log2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from studies.files import atomic_save_figure

    arms = list(x["arms"].items())
    fig, axes = plt.subplots(1, len(arms), figsize=(4.2 * len(arms), 3.4), squeeze=False)
    for ax, (key, a) in zip(axes[0], arms, strict=True):
        m = a.get("mean")
        if m is not None and len(m):
            for n, g in m.loc[m["budget"] > 0].groupby("n"):
                ax.plot(np.log2(g["budget"]), g["mean"], marker=".", label=f"n = {n}")
            ax.legend(fontsize=8)
        ax.set_title(f"{key} ({a['done']}/{a['declared']} runs)", fontsize=10)
        ax.set_xlabel("log2 compute (rollouts)")
        ax.set_ylabel("record val avg@k")
    fig.tight_layout()
    atomic_save_figure(fig, path)
    plt.close(fig)


def summary(x: dict) -> dict:
    """The JSON object of `--json`: per arm runs done / declared and the verdict (None until judged)."""
    return {"arms": {k: {"done": a["done"], "declared": a["declared"], "seeds": a["seeds"],
                         "verdict": a["verdict"].to_dict() if a["verdict"] else None}
                     for k, a in x["arms"].items()},
            "drift": x.get("drift")}


def readme_paragraph(x: dict, out: Path) -> str:
    """README.md's stage-2 lines: the question, each arm's outcome (or its progress), and the lag of the
    largest n where it is read."""
    parts = []
    for key, a in x["arms"].items():
        v = a["verdict"]
        if v is None:
            parts.append(f"{key}: {a['done']} of {a['declared']} runs finished")
            continue
        best = max(v.contrasts, key=lambda c: c.mean) if v.contrasts else None
        text = f"{key}: **{v.outcome}** at {bt(v.budget)}"
        if best is not None:
            text += (f" (best contrast n = {best.n} − smallest: {best.mean:+.3f} "
                     f"[{best.lo:+.3f}, {best.hi:+.3f}])")
        parts.append(text)
    return ("Stage 2 asks whether n changes the ceiling or only the speed (preregistered; `isocompute report "
            f"tiny-stage2`, [{out}]({out})): Easy to 2^22, a coverage arm on xhard and a memorisation arm on "
            f"555 training problems. So far: {'; '.join(parts)}.")
