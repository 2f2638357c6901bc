"""`isocompute report claims`: the claims report, made from declared studies through the one study pipeline.

Every section declares the StudySpecs it needs; the report runs all of them at once into one results
directory (studies.declared.run_studies: RunConfig -> sweep -> executor -> ResultStore), records in-run
measurements beside the tables (probes), then asks each section to measure its numbers from the tables and to
judge them by its written rule. No number in the report is typed by hand; sections share runs, never state.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import click

from isocompute.reports.claims.allocation import F2, F3, F4, F9
from isocompute.reports.claims.common import MODES, VERDICTS, ClaimsMode, Section, budget_text
from isocompute.reports.claims.measurements import MEASUREMENTS
from isocompute.reports.claims.mechanisms import MECHANISMS
from isocompute.reports.claims.nstar import F1, F6, F10, F11, THEORY
from isocompute.reports.claims.pass1 import F5, F7, F8
from isocompute.reports.destinations import docs_option, docs_path
from studies.config import StudiesError
from studies.declared import Tables, run_studies
from studies.files import atomic_write_text, check_output_dir, check_output_file
from studies.store import ResultStore

SECTIONS: tuple[Section, ...] = (THEORY, F1, F2, F3, F4, F5, F6, F7, F8, F9, F10, F11, MEASUREMENTS,
                                 MECHANISMS)


@dataclass
class Outcome:
    """One section's result: its numbers and verdict, or the one line why it was refused on this backend."""

    section: Section
    setup: str = ""
    numbers: dict | None = None
    verdict: str = "refused"
    reason: str = ""


def studies_of(sections, plan: ClaimsMode) -> dict:
    """Unique declared studies of the sections (by name; two sections naming one study declare it equally)."""
    out = {}
    for s in sections:
        for st in s.studies(plan):
            if st.name in out and out[st.name] != st:
                raise RuntimeError(f"study {st.name!r} is declared differently by two sections")
            out[st.name] = st
    return out


def build_report(
    plan: ClaimsMode,
    results: Path,
    jobs: int | None = None,
    echo=None,
    progress: bool = False,
    sections: tuple[Section, ...] = SECTIONS,
    docs: bool = False,
) -> tuple[str, list[Outcome]]:
    """Run or reuse every study of the sections that apply to the plan's backend, measure, judge, render
    (`docs`: the report is the committed copy, and its quoted command says `--docs`)."""
    echo = echo or (lambda s: None)
    t0 = time.perf_counter()
    live = [s for s in sections if plan.backend in s.backends]
    studies = studies_of(live, plan)
    echo(f"{len(studies)} studies, {sum(st.seeds for st in studies.values())}+ runs ({plan.name})")
    tplan = run_studies(
        studies,
        results,
        plan.presets,
        plan.backend,
        jobs,
        progress,
        study="claims",
        desc="claims runs",
    )
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
        if verdict not in VERDICTS:
            raise RuntimeError(f"section {s.key} gave verdict {verdict!r}, not one of {VERDICTS}")
        outcomes.append(Outcome(s, s.setup(plan), nums, verdict, reason))
        echo(f"{s.key}: {verdict}")
    return render(plan, outcomes, time.perf_counter() - t0, results, docs=docs), outcomes


def default_results(plan: ClaimsMode) -> Path:
    """results/claims/<backend>, or results/claims/<lm> for a plan on another model of the llm backend."""
    return Path("results/claims") / (plan.lm or plan.backend)


def command_line(plan: ClaimsMode, results: Path | None = None, docs: bool = False) -> str:
    """The `isocompute report claims ...` line that regenerates a report of this plan and results."""
    return (
        "isocompute report claims"
        + (f" --backend {plan.backend}" if plan.backend != "sim" else "")
        + (f" --lm {plan.lm}" if plan.lm else "")
        + (" --quick" if plan.name != "full" else "")
        + (f" --results {results}" if results is not None
           and Path(results) != default_results(plan) else "")
        + (" --docs" if docs else "")
    )


def render(plan: ClaimsMode, outcomes: list[Outcome], seconds: float, results: Path | None = None,
           docs: bool = False) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    cmd = command_line(plan, results, docs)
    sizes = f"d = d_val = {plan.d}" if plan.d else "the backend's d and d_val"
    lines = [
        f"# Claims report ({plan.name} mode, {plan.backend} backend{f', lm {plan.lm}' if plan.lm else ''})",
        "",
        " ".join([
            f"Generated by `{cmd}` on {now} in {seconds:.0f} s.",
            "Every number below is computed from runs of the declared studies of "
            "`isocompute/reports/claims/` (one",
            "results directory through `studies.declared`: RunConfig -> sweep -> executor -> ResultStore);",
            "nothing is typed by hand. n* is always read by the estimator of `isocompute fit` and the",
            "gallery (studies/fit/nstar.py): the n with the best seed-mean record reward at the budget, and",
            "the set of n whose 90% interval (runs resampled) reaches the best's, printed 'a-b tie' where",
            "the seeds cannot tell them apart.",
            f"Seeds: {plan.seeds} (0..{plan.seeds - 1}), paired across n (problem_seed = seed); ± is a 95%",
            f"t-interval over seeds. Top budget {budget_text(plan.top)} rollouts for finding 1 and theory,",
            f"{budget_text(plan.side_top)} elsewhere; {sizes}; B_p = {plan.bp} unless stated. 'record' =",
            "best-so-far reward up to the budget (oracle early stopping), 'final' = reward when the",
            "budget is spent; verdicts that use one show the other beside it. Every lr, base lr and arm",
            "(best small and large n of a contrast) is chosen on seeds that are not reported",
            "(isocompute/reports/claims/selection.py: 2-fold cross-fitting, or the tuning seeds of the "
            "mechanism",
            "study). Growth of n* counts only where n* is determined: a rise from one budget's set to a",
            "later one's that every later set stays above (its factor the least the sets show).",
        ]),
    ]
    if plan.name != "full":
        lines += [
            "",
            "**Quick mode**: small budgets, few seeds and small problem sets, for CI. Verdicts here "
            "test the machinery, not the science; see the full report.",
        ]
    lines += ["", "## Verdicts", "", "| claim | verdict |", "|---|---|"]
    lines += [f"| [{o.section.title}](#{o.section.key}) | {o.verdict} |" for o in outcomes]
    for o in outcomes:
        s = o.section
        lines += ["", f'## {s.title} <a id="{s.key}"></a>', "", f"Paper: {s.paper}", ""]
        if o.numbers is None:
            lines += [f"**Verdict: refused.** {o.reason}"]
            continue
        lines += [f"Setup: {o.setup}", ""] + s.body(o.numbers) + ["", f"**Verdict: {o.verdict}.** {o.reason}"]
    return "\n".join(lines) + "\n"


@click.command("claims")
@click.option("--quick", is_flag=True, help="Small budgets and 3 seeds (CI, <= 5 min on 2 cores).")
@click.option(
    "--backend",
    type=click.Choice(["sim", "llm"]),
    default="sim",
    show_default=True,
    help="Engine of the studies; on llm the CPU-sized real-model preset (sections that need the "
    "simulator are refused in one line).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Markdown file to write (default: results/CLAIMS-<mode>.md, e.g. results/CLAIMS-quick.md with "
    "--quick); the numbers the README quotes go beside it as .json.",
)
@docs_option()
@click.option(
    "--results",
    "results",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory of the studies (finished runs are reused; default results/claims/BACKEND).",
)
@click.option("--lm", type=click.Choice(["smollm2", "tiny"]), default=None,
              help="Model of --backend llm: smollm2 (default: the CPU-sized SmolLM2 preset) or tiny (the "
              "shipped 0.2M-parameter LM; bp 16, n 2..32 to 2^14 rollouts: claims.common.TINY_QUICK).")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True, help="Worker processes.")
@click.option("--progress/--no-progress", default=False, help="Progress bar of the runs on stderr.")
def claims(
    quick: bool, backend: str, lm: str | None, out: Path | None, to_docs: bool, results: Path | None,
    jobs: int, progress: bool,
) -> None:
    """Run (or reuse) the studies behind each paper claim and write a Markdown report with verdicts."""
    if lm is not None and backend != "llm":
        raise click.UsageError("--lm takes --backend llm")
    plan = MODES[("tiny" if lm == "tiny" else backend, quick)]
    if to_docs and (quick or backend != "sim"):
        raise click.UsageError("--docs writes docs/CLAIMS.md, the full simulator report: not with --quick or "
                               "--backend llm (use --out)")
    out = docs_path("docs/CLAIMS.md", to_docs, out) or out or Path(f"results/CLAIMS-{plan.name}.md")
    results = results or default_results(plan)
    # both destinations are checked before the studies run, so a bad path never costs them
    check_output_file(out)
    check_output_dir(results, what="--results")
    try:
        md, outcomes = build_report(
            plan, results, jobs, echo=lambda s: click.echo(s, err=True), progress=progress, docs=to_docs
        )
    except StudiesError as e:
        raise click.UsageError(str(e)) from None
    atomic_write_text(out, md)
    # the numbers the README's science paragraph quotes (isocompute.reports.readme), beside the report
    from isocompute.reports.readme import summary_of

    atomic_write_text(out.with_suffix(".json"), json.dumps(summary_of(plan, outcomes), indent=1) + "\n")
    for o in outcomes:
        click.echo(f"{o.section.key:10s} {o.verdict}")
    click.echo(f"wrote {out}")


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


@click.command("mechanisms")
@click.option("--quick", is_flag=True, help="The quick sizes (machinery only, for CI).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown file to write (default: results/MECHANISMS-full.md, or "
              "results/MECHANISMS-quick.md with --quick).")
@docs_option()
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=MECHANISMS_RESULTS,
              show_default=True, help="Results directory of the studies (finished runs are reused).")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True, help="Worker processes.")
def mechanisms(quick: bool, out: Path | None, to_docs: bool, results: Path, jobs: int) -> None:
    """Run (or reuse) the mechanism study (which simulator ingredient makes n*(C) rise under a tuned lr) and
    write its section alone as a report."""
    if to_docs and quick:
        raise click.UsageError("--docs writes docs/MECHANISMS.md, the full study: not with --quick "
                               "(use --out)")
    out = docs_path("docs/MECHANISMS.md", to_docs, out) or out or Path(
        f"results/MECHANISMS-{'quick' if quick else 'full'}.md")
    check_output_file(out)
    check_output_dir(results, what="--results")
    md = mechanisms_report(quick, results, jobs, out, echo=lambda s: click.echo(s, err=True), docs=to_docs)
    atomic_write_text(out, md)
    click.echo(f"wrote {out}")
