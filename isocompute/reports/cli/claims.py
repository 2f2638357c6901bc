"""`isocompute report claims` and `isocompute report mechanisms`: the click commands over
isocompute.reports.claims.report (run or reuse the declared studies, write the claims report or its mechanisms
section alone)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click

from isocompute.reports.claims.common import MODES
from isocompute.reports.claims.report import (
    MECHANISMS_RESULTS,
    build_report,
    default_results,
    mechanisms_report,
)
from isocompute.reports.cli.destinations import docs_option, docs_path
from studies.cli_kit.params import dir_option, file_option, jobs_option
from studies.config import StudiesError
from studies.files import atomic_write_text, check_output_dir, check_output_file

HEADLINE = Path("docs/figs/headline.png")
"""README's headline figure: the committed report's (`--docs`) finding-1 figure."""


def headline_path(out: Path) -> Path:
    """Where a report written to `out` puts its headline figure: beside it, `<stem>-headline.png`."""
    return out.with_name(f"{out.stem}-headline.png")


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
@file_option("--out",
             help="Markdown file to write (default: results/CLAIMS-<mode>.md, e.g. results/CLAIMS-quick.md "
                  "with --quick); the numbers the README quotes go beside it as .json, the headline figure "
                  "of finding 1 as -headline.png (with --docs: docs/figs/headline.png, README's figure).")
@docs_option()
@dir_option("--results",
            help="Results directory of the studies (finished runs are reused; default "
                 "results/claims/BACKEND).")
@click.option("--lm", type=click.Choice(["smollm2", "tiny"]), default=None,
              help="Model of --backend llm: smollm2 (default: the CPU-sized SmolLM2 preset) or tiny (the "
              "shipped 0.2M-parameter LM; bp 16, n 2..32 to 2^14 rollouts: claims.common.TINY_QUICK).")
@click.option("--seed-offset", type=click.IntRange(0, 10**6), default=0, show_default=True,
              help="Report on seeds K..K+S-1 (S the mode's seed count); the recipe's tuning seeds shift by K "
              "too. With --replicate the second set starts at K+S.")
@click.option("--replicate/--no-replicate", default=None,
              help="Also run the next disjoint seed set (K+S..K+2S-1) and let a verdict stand only where "
              "both sets agree (default: on for the full report, off with --quick and on --backend llm).")
@jobs_option()
@click.option("--progress/--no-progress", default=False, help="Progress bar of the runs on stderr.")
def claims(
    quick: bool, backend: str, lm: str | None, out: Path | None, to_docs: bool, results: Path | None,
    seed_offset: int, replicate: bool | None, jobs: int, progress: bool,
) -> None:
    """Run (or reuse) the studies behind each paper claim and write a Markdown report with verdicts."""
    if lm is not None and backend != "llm":
        raise click.UsageError("--lm takes --backend llm")
    plan = MODES[("tiny" if lm == "tiny" else backend, quick)]
    plan = replace(plan, seed_offset=seed_offset)
    if replicate is None:
        replicate = plan.name == "full"
    if to_docs and (quick or backend != "sim"):
        raise click.UsageError("--docs writes docs/CLAIMS.md, the full simulator report: not with --quick or "
                               "--backend llm (use --out)")
    out = docs_path("docs/CLAIMS.md", to_docs, out) or out or Path(f"results/CLAIMS-{plan.name}.md")
    results = results or default_results(plan)
    figure = HEADLINE if to_docs else headline_path(out)
    # every destination is checked before the studies run, so a bad path never costs them
    check_output_file(out)
    check_output_file(figure, what="headline figure", suffixes=(".png",), kind="figure")
    check_output_dir(results, what="--results")
    try:
        md, outcomes = build_report(
            plan, results, jobs, echo=lambda s: click.echo(s, err=True), progress=progress,
            replicate_on=replicate, docs=to_docs, headline=figure,
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


@click.command("mechanisms")
@click.option("--quick", is_flag=True, help="The quick sizes (machinery only, for CI).")
@file_option("--out", help="Markdown file to write (default: results/MECHANISMS-full.md, or "
             "results/MECHANISMS-quick.md with --quick).")
@docs_option()
@dir_option("--results", default=MECHANISMS_RESULTS, show_default=True,
            help="Results directory of the studies (finished runs are reused).")
@jobs_option()
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
