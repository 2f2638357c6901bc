"""`isocompute report tiny-study`: the click command over isocompute.reports.tiny_study (the declared study
and its stages) and tiny_study_report (docs/TINY_STUDY.md, its figure and README block)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from isocompute.reports import tiny_study as ts
from isocompute.reports.tiny_study_report import (
    COMMITTED,
    QUICK_PATHS,
    README_BEGIN,
    README_END,
    readme_paragraph,
    render,
    summary,
    write_figure,
)
from studies.cli_kit.output import emit_json
from studies.cli_kit.params import dir_option, file_option
from studies.config import StudiesError
from studies.files import atomic_write_text, check_output_dir, check_output_file, write_marked_block


@click.command("tiny-study")
@click.option(
    "--stage",
    type=click.Choice(ts.STAGES),
    default=None,
    help="Run this stage's missing runs into the store first (resumable), then regenerate the "
    "report. Without it the report is regenerated from the store alone (seconds). Order: "
    + ", ".join(ts.STAGES)
    + ".",
)
@click.option(
    "--quick",
    is_flag=True,
    help="The quick plan (seconds, for CI): runs every stage of it into results/tiny-study-quick and "
    "writes results/TINY_STUDY-quick.md; the machinery, not the science.",
)
@dir_option("--store", help="Results directory (default docs/tiny_study/store, the committed one; --quick: "
            "results/tiny-study-quick).")
@file_option("--out",
             help="Markdown report (default docs/TINY_STUDY.md; --quick: results/TINY_STUDY-quick.md).")
@file_option("--fig", help="Figure (default docs/figs/tiny_study.png; none with --quick unless given).")
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="Worker processes of a stage (one run each; a tiny-LM run uses one core).",
)
@click.option("--progress/--no-progress", default=True, help="A progress bar of a stage's runs (stderr).")
@click.option("--json", "as_json", is_flag=True, help="Print the stages and verdicts as one JSON object.")
def tiny_study(
    stage: str | None,
    quick: bool,
    store: Path | None,
    out: Path | None,
    fig: Path | None,
    jobs: int,
    progress: bool,
    as_json: bool,
) -> None:
    """The preregistered tiny-LM allocation study (docs/TINY_STUDY.md): run a stage, regenerate the report,
    its figure and README block from the store."""
    t0 = time.perf_counter()
    plan = ts.QUICK if quick else ts.FULL
    paths = QUICK_PATHS if quick else COMMITTED
    given_store = store
    store = store or paths["store"]
    out = out or paths["out"]
    if fig is None and not quick:
        fig = COMMITTED["fig"]
    check_output_file(out)
    if fig is not None:
        check_output_file(fig)

    def say(line: str) -> None:
        click.echo(line, err=True)
    try:
        if stage is not None or quick:
            check_output_dir(store, what="--store")
            for st in [stage] if stage else ts.STAGES:
                ts.run_stage(plan, st, store, jobs=jobs, progress=progress, say=say)
        x = ts.measure(plan, store)
    except StudiesError as e:
        raise click.UsageError(str(e)) from None
    cmd = " ".join(
        ["isocompute report tiny-study"]
        + (["--quick"] if quick else [])
        + ([f"--store {given_store}"] if given_store not in (None, paths["store"]) else [])
    )
    if fig is not None:
        write_figure(x, fig)
    atomic_write_text(out, render(x, cmd, fig, out, time.perf_counter() - t0))
    if not quick and out == COMMITTED["out"] and Path("README.md").is_file():
        write_marked_block(Path("README.md"), README_BEGIN, README_END, readme_paragraph(x, out))
    if as_json:
        emit_json(summary(x))
    else:
        click.echo(f"wrote {out}")
