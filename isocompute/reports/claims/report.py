"""`isocompute report claims`: the claims report, made from declared studies through the one study pipeline.

Every section declares the StudySpecs it needs; the report runs all of them at once into one results
directory (studies.declared.run_studies: RunConfig -> sweep -> executor -> ResultStore), records in-run
measurements beside the tables (probes), then asks each section to measure its numbers from the tables and to
judge them by its written rule. No number in the report is typed by hand; sections share runs, never state.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from isocompute.reports.claims.allocation import F2, F3, F4, F9
from isocompute.reports.claims.ceiling import common_ceiling, section_note, shared_text
from isocompute.reports.claims.common import MODES, VERDICTS, ClaimsMode, Section, budget_text
from isocompute.reports.claims.judge import EQUIVALENCE_MARGIN, at_margin_zero, replicate
from isocompute.reports.claims.measurements import MEASUREMENTS
from isocompute.reports.claims.mechanisms import MECHANISMS
from isocompute.reports.claims.nstar import F1, F6, F10, F11, THEORY
from isocompute.reports.claims.pass1 import F5, F7, F8
from isocompute.reports.claims.recipe import (
    ENTROPY_COEF,
    KL_COEF,
    Choice,
    choose_base_lr,
    needs_tuning,
    tuning_spec,
)
from studies.declared import Tables, run_studies
from studies.results_dir import finished_records
from studies.store import ResultStore

SECTIONS: tuple[Section, ...] = (THEORY, F1, F2, F3, F4, F5, F6, F7, F8, F9, F10, F11, MEASUREMENTS,
                                 MECHANISMS)


@dataclass
class Outcome:
    """One section's result: its numbers and verdict, or the one line why it was refused on this backend.
    `by_set`: (reported seeds, verdict, reason) per seed set; with two sets `verdict` is their replication
    (judge.replicate) and `numbers` / `setup` are the first set's. `zero`: the verdict with every rule at
    margin 0 (judge.at_margin_zero), replicated the same way (`zero_by_set`: per set); `ceiling`: {label:
    claims.ceiling.common_ceiling} of the studies the section's top-budget rules read (the first set's)."""

    section: Section
    setup: str = ""
    numbers: dict | None = None
    verdict: str = "refused"
    reason: str = ""
    by_set: tuple[tuple[str, str, str], ...] = ()
    zero: str = "refused"
    zero_by_set: tuple[tuple[str, str], ...] = ()
    ceiling: dict | None = None


@dataclass
class SeedSet:
    """One seed set's report: the plan with its tuned base lrs, each section's outcome, the tuning choices
    (recipe study name -> recipe.Choice) and its tables."""

    plan: ClaimsMode
    outcomes: list[Outcome]
    choices: dict[str, Choice] = field(default_factory=dict)
    tables: Tables | None = None
    """The set's tables (lazy, studies.declared.Tables): what its figures are drawn from."""


def studies_of(sections, plan: ClaimsMode) -> dict:
    """Unique declared studies of the sections (by name; two sections naming one study declare it equally)."""
    out = {}
    for s in sections:
        for st in s.studies(plan):
            if st.name in out and out[st.name] != st:
                raise RuntimeError(f"study {st.name!r} is declared differently by two sections")
            out[st.name] = st
    return out


def tune(plan: ClaimsMode, sections, results: Path, jobs: int | None, progress: bool, echo
         ) -> tuple[ClaimsMode, dict[str, Choice]]:
    """The tuning stage: every recipe study of the sections (recipe.needs_tuning) runs its base-lr grid on the
    tuning seeds; the plan comes back with each study's chosen base lr (ClaimsMode.tuned)."""
    todo = {name: st for name, st in studies_of(sections, plan).items() if needs_tuning(st)}
    if not todo:
        return plan, {}
    specs = {name: tuning_spec(st, plan.sqrt_lrs, plan.tune_seeds, plan.tuning_seeds[0])
             for name, st in todo.items()}
    specs = {sp.name: sp for sp in specs.values()}
    echo(f"tuning stage: {len(specs)} recipe studies x {len(plan.sqrt_lrs)} base lrs on seeds "
         f"{plan.tuning_seeds[0]}..{plan.tuning_seeds[-1]}")
    runs = run_studies(specs, results, plan.presets, plan.backend, jobs, progress, study="claims",
                       desc="claims tuning runs")
    tables = Tables(results, runs)
    choices = {}
    for name, st in todo.items():
        sp = f"{name}/tune"
        expected: dict[str, int] = {}
        for label, _ in runs[sp]:
            expected[label] = expected.get(label, 0) + 1
        choices[name] = choose_base_lr(tables[sp], st, plan.sqrt_lrs, plan.tuning_seeds, plan.reported_seeds,
                                       expected)
    return replace(plan, tuned=tuple(sorted((k, c.lr) for k, c in choices.items()))), choices


def run_seed_set(
    plan: ClaimsMode,
    results: Path,
    jobs: int | None = None,
    echo=None,
    progress: bool = False,
    sections: tuple[Section, ...] = SECTIONS,
) -> SeedSet:
    """One seed set: tune the recipe's base lrs, run or reuse every study of the sections that apply to the
    plan's backend, record in-run measurements, measure and judge each section."""
    echo = echo or (lambda s: None)
    live = [s for s in sections if plan.backend in s.backends]
    plan, choices = tune(plan, live, results, jobs, progress, echo)
    studies = studies_of(live, plan)
    untuned = [name for name, st in studies.items() if needs_tuning(st)]
    if untuned:
        raise RuntimeError(f"recipe studies without a tuned base lr: {', '.join(untuned)}")
    echo(f"{len(studies)} studies, {sum(st.seeds for st in studies.values())}+ runs ({plan.name}, seeds "
         f"{plan.seeds_text()})")
    tplan = run_studies(studies, results, plan.presets, plan.backend, jobs, progress, study="claims",
                        desc="claims runs")
    tables = Tables(results, tplan)
    with ResultStore(results, study="claims") as store:
        for s in live:
            if s.probe is not None:
                echo(f"{s.key}: in-run measurements")
                s.probe(store, tables, plan)
    outcomes = []
    for s in sections:
        if s not in live:
            outcomes.append(Outcome(s, reason=f"refused on the {plan.backend} backend: {s.refused}."))
            continue
        nums = s.measure(tables, plan)
        verdict, reason = s.verdict(nums)
        with at_margin_zero():
            zero, _ = s.verdict(nums)
        for v in (verdict, zero):
            if v not in VERDICTS:
                raise RuntimeError(f"section {s.key} gave verdict {v!r}, not one of {VERDICTS}")
        ceil = ({label: common_ceiling(tables[st.name], st.budget, metric, small_max=plan.small_max,
                                       large_min=plan.large_min)
                 for label, (st, metric) in s.ceiling(plan).items()} if s.ceiling else None)
        outcomes.append(Outcome(s, s.setup(plan), nums, verdict, reason,
                                ((plan.seeds_text(), verdict, reason),), zero,
                                ((plan.seeds_text(), zero),), ceil))
        echo(f"{s.key}: {verdict} (seeds {plan.seeds_text()})")
    return SeedSet(plan, outcomes, choices, tables)


def replicated(sets: list[SeedSet]) -> list[Outcome]:
    """Per section, the first set's outcome with every set's verdict and, as its verdict, their replication:
    the common verdict where all sets agree, else "does not replicate"."""
    out = []
    for parts in zip(*(ss.outcomes for ss in sets), strict=True):
        first = parts[0]
        if first.numbers is None:
            out.append(first)
            continue
        by_set = tuple(b for o in parts for b in o.by_set)
        verdict, zero = first.verdict, first.zero
        for o in parts[1:]:
            verdict, zero = replicate(verdict, o.verdict), replicate(zero, o.zero)
        out.append(replace(first, verdict=verdict, by_set=by_set, zero=zero,
                           zero_by_set=tuple(b for o in parts for b in o.zero_by_set)))
    return out


def build_report(
    plan: ClaimsMode,
    results: Path,
    jobs: int | None = None,
    echo=None,
    progress: bool = False,
    sections: tuple[Section, ...] = SECTIONS,
    replicate_on: bool = False,
    docs: bool = False,
    headline: Path | None = None,
) -> tuple[str, list[Outcome]]:
    """The report on the plan's seed set, or (`replicate_on`) on it and on the next disjoint set of as many
    seeds (offset + seeds), each verdict standing only where both agree. Returns (Markdown, outcomes);
    `docs`: the report is the committed copy, and its quoted command says `--docs`; `headline`: where the
    headline figure of finding 1 goes (write_headline; the numbers of the first seed set, as the tables)."""
    t0, started = time.perf_counter(), _dt.datetime.now(_dt.UTC)
    sets = [run_seed_set(plan, results, jobs, echo, progress, sections)]
    if replicate_on:
        second = replace(plan, seed_offset=plan.seed_offset + plan.seeds)
        sets.append(run_seed_set(second, results, jobs, echo, progress, sections))
    outcomes = replicated(sets) if len(sets) > 1 else sets[0].outcomes
    if headline is not None:
        write_headline(headline, sets[0], echo or (lambda s: None))
    return render(plan, outcomes, time.perf_counter() - t0, results, sets, docs=docs,
                  computed=computed_runs(results, started)), outcomes


def computed_runs(results: Path, since: _dt.datetime) -> tuple[int, int, float]:
    """(runs finished since `since`, finished runs in the results directory, their summed wall seconds): how
    much of a report's time went to running studies and how much a report from scratch would run."""
    done = [r for r in finished_records(results).values() if r.get("status") == "done"]
    new = sum(1 for r in done if _finished_at(r) >= since)
    return new, len(done), float(sum(r.get("wall_s") or 0.0 for r in done))


def _finished_at(rec: dict) -> _dt.datetime:
    try:
        return _dt.datetime.strptime(rec.get("finished") or "", "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return _dt.datetime.min.replace(tzinfo=_dt.UTC)


def write_headline(path: Path, ss: SeedSet, echo) -> Path | None:
    """README's headline figure (claims/headline.py) from one seed set's finding-1 numbers and tables; None
    (with one line) where finding 1 did not run."""
    from isocompute.reports.claims import headline

    f1 = next((o for o in ss.outcomes if o.section.key == F1.key and o.numbers), None)
    if f1 is None or ss.tables is None:
        echo("headline figure: finding 1 did not run, so there is none")
        return None
    out = headline.write(path, ss.tables, ss.plan, f1.numbers)
    echo(f"headline figure: {out}")
    return out


def default_results(plan: ClaimsMode) -> Path:
    """results/claims/<backend>, or results/claims/<lm> for a plan on another model of the llm backend."""
    return Path("results/claims") / (plan.lm or plan.backend)


def section_tops(plan: ClaimsMode, sections) -> dict[str, list[str]]:
    """{top budget text: [section keys]}: each section's top budget, the largest budget of its studies that
    is a power of two (finding 9's decoupled-baseline study has its budget raised to pay for its extra
    rollouts, and is charged at the others')."""
    out: dict[str, list[str]] = {}
    for s in sections:
        if plan.backend not in s.backends:
            continue
        bs = [st.budget for st in s.studies(plan)]
        top = max((b for b in bs if b & (b - 1) == 0), default=max(bs))
        out.setdefault(budget_text(top), []).append(s.key)
    return out


def command_line(plan: ClaimsMode, results: Path | None = None, docs: bool = False,
                 replicate_on: bool | None = None) -> str:
    """The `isocompute report claims ...` line that regenerates a report of this plan and results (the seed
    offset and replication only where they differ from the mode's defaults; `replicate_on` None: the
    default)."""
    quick = plan.name != "full"
    default_rep = plan.name == "full"
    replicate_on = default_rep if replicate_on is None else replicate_on
    return (
        "isocompute report claims"
        + (f" --backend {plan.backend}" if plan.backend != "sim" else "")
        + (f" --lm {plan.lm}" if plan.lm else "")
        + (" --quick" if quick else "")
        + (f" --seed-offset {plan.seed_offset}" if plan.seed_offset else "")
        + ((" --replicate" if replicate_on else " --no-replicate") if replicate_on != default_rep else "")
        + (f" --results {results}" if results is not None
           and Path(results) != default_results(plan) else "")
        + (" --docs" if docs else "")
    )


def recipe_lines(sets: list[SeedSet]) -> list[str]:
    """The tuning stage's choices: per recipe study, its dataset's regularisation and the base lr each seed
    set's tuning seeds chose (grid edges flagged)."""
    if not any(ss.choices for ss in sets):
        return []
    plan = sets[0].plan
    names = sorted({n for ss in sets for n in ss.choices})
    head = " | ".join(f"base lr (tuning seeds {ss.plan.tuning_seeds[0]}..{ss.plan.tuning_seeds[-1]})"
                      for ss in sets)
    lines = ["", '## The recipe: base lrs chosen on tuning seeds <a id="recipe"></a>', "",
             " ".join([
                 "Every section below trains with the paper's recipe unless its Setup line says otherwise",
                 "(the tabular theory at its preset lr, constant-lr sensitivity rows, the mechanism",
                 "study's per-n tuned lrs) (isocompute/reports/claims/recipe.py): Adam,",
                 "lr = base * sqrt(bp n / 256), KL",
                 f"({KL_COEF:g}) + entropy ({ENTROPY_COEF:g}) on Easy and neither on Hard and the mixes,",
                 "no warm-up (the simulator has none); each study's base lr is the point of the grid",
                 ", ".join(f"{v:g}" for v in plan.sqrt_lrs),
                 "with the best mean over its n of the top-budget record reward on tuning seeds that no",
                 "section reports. Constant-lr rows are labelled sensitivity rows.",
             ]), "",
             f"| study | dataset | regularisation | {head} |", "|---|---|---|" + "---|" * len(sets)]
    for name in names:
        st = studies_of_name(sets, name)
        base = dict(st.base)
        reg = ", ".join(f"{k} {base[k]:g}" for k in ("kl_coef", "entropy_coef") if base.get(k)) or "none"
        cells = [ss.choices[name].text() if name in ss.choices else "-" for ss in sets]
        lines.append(f"| {name.split('/', 1)[1]} | {st.dataset} | {reg} | " + " | ".join(cells) + " |")
    return lines


def studies_of_name(sets: list[SeedSet], name: str):
    """The tuned StudySpec called `name` in the first seed set that declares it."""
    for ss in sets:
        live = [s for s in SECTIONS if ss.plan.backend in s.backends]
        for s in live:
            for st in s.studies(ss.plan):
                if st.name == name:
                    return st
    raise KeyError(name)


def runs_text(computed: tuple[int, int, float] | None) -> str:
    """' (12 of 16,520 runs computed now, the rest reused from its results directory; running all of them
    took 994 s of worker time)'."""
    if computed is None:
        return ""
    new, total, wall = computed
    return (f" ({new:,} of {total:,} runs computed now, the rest reused from its results directory; running "
            f"all of them took {wall:,.0f} s of worker time)")


def render(plan: ClaimsMode, outcomes: list[Outcome], seconds: float, results: Path | None = None,
           sets: list[SeedSet] | None = None, docs: bool = False,
           computed: tuple[int, int, float] | None = None) -> str:
    """The report's Markdown (`docs`: the committed copy, whose quoted command says `--docs`; `computed`:
    computed_runs, so the time it quotes says how much of it was running studies)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sets = sets or []
    rep = len(sets) > 1
    cmd = command_line(plan, results, docs, rep)
    sizes = f"d = d_val = {plan.d} unless stated" if plan.d else "the backend's d and d_val"
    tops = section_tops(plan, [o.section for o in outcomes])
    top_text = "; ".join(f"{b} for {', '.join(keys)}" for b, keys in tops.items())
    if rep:
        seeds = (f"Seeds: {len(sets)} disjoint sets of {plan.seeds} ("
                 + " and ".join(ss.plan.seeds_text() for ss in sets)
                 + "), each paired across n (problem_seed = seed); every verdict is made on each set and "
                 "stands only where they agree, else it reads 'does not replicate' with both.")
    else:
        seeds = f"Seeds: {plan.seeds} ({plan.seeds_text()}), paired across n (problem_seed = seed)."
    lines = [
        f"# Claims report ({plan.name} mode, {plan.backend} backend{f', lm {plan.lm}' if plan.lm else ''})",
        "",
        " ".join([
            f"Generated by `{cmd}` on {now} in {seconds:.0f} s{runs_text(computed)}.",
            "Every number below is computed from runs of the declared studies of "
            "`isocompute/reports/claims/` (one",
            "results directory through `studies.declared`: RunConfig -> sweep -> executor -> ResultStore);",
            "nothing is typed by hand. n* is always read by the estimator of `isocompute fit` and the",
            "gallery (studies/fit/nstar.py): the n with the best seed-mean record reward at the budget, and",
            "the set of n whose 90% interval (runs resampled) reaches the best's, printed 'a-b tie' where",
            "the seeds cannot tell them apart.",
            seeds,
            "Each verdict's rule names its key quantity and judges its interval",
            "(isocompute/reports/claims/judge.py): 'reproduced' only where the 95% interval clears the",
            "rule's threshold, 'not reproduced' only where it clears the opposite one, else 'inconclusive';",
            f"'no difference' rules are equivalence tests (TOST, margin ±{EQUIVALENCE_MARGIN:g}); every",
            "margin, and when it was chosen, is in the Margins section, and the verdict at margin 0 stands",
            "beside every verdict a margin changes. Beside",
            "every n*, the stake: what n* gains over the best small n, with its interval.",
            f"Top budgets (rollouts): {top_text}; {sizes}; B_p = {plan.bp} unless stated. 'record' =",
            "best-so-far reward up to the budget (oracle early stopping), 'final' = reward when the",
            "budget is spent; verdicts use the record and show the final beside. Every lr, base lr and arm",
            "(best small and large n of a contrast) is chosen on seeds that are not reported",
            "(isocompute/reports/claims/selection.py: 2-fold cross-fitting, or separate tuning seeds).",
            "Growth of n* counts only where n* is determined: a rise from one budget's set to a",
            "later one's that every later set stays above (its factor the least the sets show).",
        ]),
    ]
    if plan.name != "full":
        lines += [
            "",
            "**Quick mode**: small budgets, few seeds and small problem sets, for CI. Verdicts here "
            "test the machinery, not the science; see the full report.",
        ]
    lines += ["", "## Verdicts", ""]
    zeros = any(o.zero != o.verdict for o in outcomes if o.numbers is not None)
    zcol = (" at margin 0 |", "---|") if zeros else ("", "")
    if rep:
        lines += ["| claim | " + " | ".join(f"seeds {ss.plan.seeds_text()}" for ss in sets) + " | verdict |"
                  + zcol[0], "|---|" + "---|" * (len(sets) + 1) + zcol[1]]
        for o in outcomes:
            per = [b[1] for b in o.by_set] or ["refused"] * len(sets)
            lines.append(f"| [{o.section.title}](#{o.section.key}) | " + " | ".join(per)
                         + f" | {o.verdict} |" + (f" {zero_cell(o)} |" if zeros else ""))
    else:
        lines += ["| claim | verdict |" + zcol[0], "|---|---|" + zcol[1]]
        lines += [f"| [{o.section.title}](#{o.section.key}) | {o.verdict} |"
                  + (f" {zero_cell(o)} |" if zeros else "") for o in outcomes]
    if zeros:
        lines += ["", "At margin 0: the same rules with every 'large n wins' threshold (and finding 7's "
                  "overfitting threshold) set to 0, equivalence rules unchanged; 'same' where the verdict "
                  "does not change. The margins were chosen after data that bear on them (Margins)."]
    titles = {o.section.key: o.section.key for o in outcomes}
    share = shared_text({o.section.key: o.ceiling for o in outcomes if o.ceiling}, titles)
    if share:
        lines += ["", share]
    lines += margin_lines([o.section for o in outcomes if o.numbers is not None])
    lines += recipe_lines(sets)
    for o in outcomes:
        s = o.section
        lines += ["", f'## {s.title} <a id="{s.key}"></a>', "", f"Paper: {s.paper}", ""]
        if o.numbers is None:
            lines += [f"**Verdict: refused.** {o.reason}"]
            continue
        lines += [f"Setup: {o.setup}", ""] + s.body(o.numbers)
        at0 = f"At margin 0: {o.zero}. " if o.zero != o.verdict else ""
        if len(o.by_set) > 1:
            lines += ["", f"**Verdict: {o.verdict}.** {at0}" + " ".join(
                f"Seeds {seeds_}: {v}. {why}" for seeds_, v, why in o.by_set)]
            lines += ["", f"(Tables above: seeds {o.by_set[0][0]}.)"]
        else:
            lines += ["", f"**Verdict: {o.verdict}.** {at0}{o.reason}"]
        if o.ceiling:
            lines += ["", section_note(o.ceiling)]
    return "\n".join(lines) + "\n"


def zero_cell(o: Outcome) -> str:
    """The verdicts table's margin-0 cell: 'same', or the verdict at margin 0 (per set where they differ)."""
    if o.numbers is None or o.zero == o.verdict:
        return "same"
    per = [v for _, v in o.zero_by_set]
    return o.zero if len(set(per)) <= 1 else f"{o.zero} ({' / '.join(per)})"


def margin_lines(sections) -> list[str]:
    """The Margins section: every rule of the sections with its kind and margin (by name), then each named
    margin's provenance once (judge.PROVENANCE: when it was chosen, relative to which data)."""
    lines = ["", '## Margins <a id="margins"></a>', "",
             "Every rule the verdicts read and its margin; below the table, when each margin was chosen "
             "relative to the data it judges (isocompute/reports/claims/judge.py, PROVENANCE):", "",
             "| section | rule | kind | margin |", "|---|---|---|---|"]
    used = {}
    for s in sections:
        for r in s.rules:
            pv = r.provenance
            if pv is not None:
                used[pv.name] = pv
            lines.append(f"| {s.key} | {r.quantity} | {r.kind} | "
                         + (f"{pv.name} = {pv.value:g}" if pv else "0 (none)") + " |")
    lines += [""] + [f"- {pv.text()}." for pv in used.values()]
    return lines


MECHANISMS_RESULTS = Path("results/claims/sim")


def mechanisms_report(quick: bool, results: Path, jobs: int, out: Path, echo=None,
                      docs: bool = False) -> str:
    """The mechanisms section alone, rendered as its own report (the committed copy: docs/MECHANISMS.md,
    `docs`); the full claims report includes it through SECTIONS. Marked blocks that other generators keep
    in `out` are carried over (kept_blocks)."""
    plan = MODES[("sim", quick)]
    md, _ = build_report(plan, results, jobs, echo=echo, sections=(MECHANISMS,))
    lines = md.splitlines()
    # the report's general paragraph describes the claims plan's sizes; this section states its own
    lines[0] = f"# Mechanism study ({plan.name} mode)"
    cmd = " ".join(["isocompute report mechanisms"] + (["--quick"] if quick else [])
                   + ([f"--results {results}"] if results != MECHANISMS_RESULTS else [])
                   + (["--docs"] if docs else []))
    lines[2] = (f"Generated by `{cmd}` (the mechanisms section of `isocompute report claims`, alone); every "
                "number is computed from the runs of its declared studies; sizes in the Setup line.")
    return "\n".join(lines) + "\n" + kept_blocks(out)


def kept_blocks(out: Path) -> str:
    """Marked blocks other generators write into this file (`isocompute report groupstd --link`), kept across
    a regeneration: each is theirs to rewrite, not this report's to drop."""
    old = out.read_text() if out.is_file() else ""
    blocks = re.finditer(r"<!-- (\w+):begin[^>]*-->.*?<!-- \1:end -->", old, flags=re.S)
    return "".join("\n" + m.group(0) + "\n" for m in blocks)
