"""`isocompute report tiny-stage2`: the click command over isocompute.reports.tiny_stage2 (stage 2 of the
tiny-LM study: declaration, stages, verdict) and tiny_stage2_report (docs/TINY_STAGE2.md and its figure)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from isocompute.reports import tiny_stage2 as s2
from isocompute.reports.tiny_stage2_report import (
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


@click.command("tiny-stage2")
@click.option(
    "--stage",
    type=click.Choice(s2.STAGES),
    default=None,
    help="Run this stage's missing runs into the store first (resumable), then regenerate the report. "
    "Without it the report is regenerated from the store alone (seconds). Stages: "
    + ", ".join(s2.STAGES) + " (easy-extra runs only where the extra-seed rule calls for it).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="The quick plan (seconds, for CI): runs every stage of it into results/tiny-stage2-quick and "
    "writes results/TINY_STAGE2-quick.md; the machinery, not the science.",
)
@dir_option("--store", help="Results directory (default docs/tiny_study/stage2, the committed one; --quick: "
            "results/tiny-stage2-quick).")
@file_option("--out", help="Markdown report (default docs/TINY_STAGE2.md; --quick: "
             "results/TINY_STAGE2-quick.md).")
@file_option("--fig", help="Figure (default docs/figs/tiny_stage2.png; none with --quick unless given).")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Worker processes of a stage (one run each; a tiny-LM run uses one core).")
@click.option("--progress/--no-progress", default=True, help="A progress bar of a stage's runs (stderr).")
@click.option("--json", "as_json", is_flag=True, help="Print each arm's runs and verdict as one JSON object.")
def tiny_stage2(stage: str | None, quick: bool, store: Path | None, out: Path | None, fig: Path | None,
                jobs: int, progress: bool, as_json: bool) -> None:
    """Stage 2 of the tiny-LM study (docs/TINY_STAGE2.md): does n change the ceiling or only the speed? Run
    a stage, regenerate the report and its figure from the store."""
    t0 = time.perf_counter()
    plan = s2.QUICK if quick else s2.FULL
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
            for st in [stage] if stage else s2.STAGES:
                s2.run_stage(plan, st, store, jobs=jobs, progress=progress, say=say)
        x = s2.measure(plan, store, None if quick else COMMITTED["stage1"])
    except StudiesError as e:
        raise click.UsageError(str(e)) from None
    cmd = " ".join(["isocompute report tiny-stage2"] + (["--quick"] if quick else [])
                   + ([f"--store {given_store}"] if given_store not in (None, paths["store"]) else []))
    if fig is not None:
        write_figure(x, fig)
    atomic_write_text(out, render(x, cmd, fig, out, time.perf_counter() - t0))
    if not quick and out == COMMITTED["out"] and Path("README.md").is_file():
        write_marked_block(Path("README.md"), README_BEGIN, README_END, readme_paragraph(x, out))
    if as_json:
        emit_json(summary(x))
    else:
        click.echo(f"wrote {out}")
