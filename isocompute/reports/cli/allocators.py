"""`isocompute report allocators`: the click command over isocompute.reports.allocators (run a stage of the
allocators study, then regenerate docs/ALLOCATORS.md and its figures from the stores)."""

from __future__ import annotations

from pathlib import Path

import click

from isocompute.reports import alloc_study
from isocompute.reports.allocators import COMMITTED, QUICK_DOC, write_report
from studies.cli_kit.params import OutPath
from studies.config import StudiesError
from studies.files import FIGURE_SUFFIXES, check_output_dir, check_output_file


@click.command("allocators")
@click.option("--stage", type=click.Choice(alloc_study.STAGES), default=None,
              help="Run this stage's missing runs first (resumable), then regenerate the document. Without "
              "it the document is regenerated from the stores alone. Order: tune, report.")
@click.option("--plan", "which", type=click.Choice(["sim", "tiny"]), default=None,
              help="With --stage: the plan whose stage runs (default both).")
@click.option("--part", default=None, metavar="KEY",
              help="With --stage: one part of the plan, e.g. tabular/easy or tiny/hard (default all).")
@click.option("--quick", is_flag=True,
              help="The quick plans (seconds, CI): every stage into results/allocators-quick and "
              "results/ALLOCATORS-quick.md; the machinery, not the science.")
@click.option("--store", type=OutPath(file_okay=False, path_type=Path), default=None,
              help="The simulator plan's results directory (default results/allocators-tuned).")
@click.option("--tiny-store", type=OutPath(file_okay=False, path_type=Path), default=None,
              help="The tiny-LM plan's results directory (default docs/allocators/tiny_store, committed).")
@click.option("--doc", type=OutPath(dir_okay=False, path_type=Path), default=None,
              help="Markdown report to write (default docs/ALLOCATORS.md).")
@click.option("--fig", type=OutPath(dir_okay=False, path_type=Path), default=None,
              help="Figure of the simulator parts (default docs/figs/allocators.png; none with --quick).")
@click.option("--tiny-fig", type=OutPath(dir_okay=False, path_type=Path), default=None,
              help="Figure of the tiny-LM parts (default docs/figs/allocators_tiny.png; none with --quick).")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Worker processes of a stage.")
@click.option("--progress/--no-progress", default=True, help="A progress bar of a stage's runs (stderr).")
def allocators(stage: str | None, which: str | None, part: str | None, quick: bool, store: Path | None,
               tiny_store: Path | None, doc: Path | None, fig: Path | None, tiny_fig: Path | None, jobs: int,
               progress: bool) -> None:
    """The allocators study (every arm at its tuned base lr under the sqrt rule; the simulator presets and
    the tiny LM): run a stage, then regenerate docs/ALLOCATORS.md and its figures from the stores."""
    plans = alloc_study.QUICK if quick else alloc_study.PLANS
    stores = {"sim": store or plans["sim"].store, "tiny": tiny_store or plans["tiny"].store}
    doc = doc or (QUICK_DOC if quick else COMMITTED["doc"])
    if not quick:
        fig = fig or COMMITTED["fig"]
        tiny_fig = tiny_fig or COMMITTED["tiny_fig"]
    check_output_file(doc, what="--doc")
    for f, what in ((fig, "--fig"), (tiny_fig, "--tiny-fig")):
        if f is not None:
            check_output_file(f, what=what, suffixes=FIGURE_SUFFIXES, kind="figure")
    if part is not None and (stage is None or which is None):
        raise click.UsageError("--part needs --stage and --plan")

    def say(line: str) -> None:
        click.echo(line, err=True)

    try:
        todo = [(w, st) for w in ("sim", "tiny") for st in ([stage] if stage else alloc_study.STAGES)
                if (stage is not None and which in (None, w)) or quick]
        for w, st in todo:
            check_output_dir(stores[w], what="--store" if w == "sim" else "--tiny-store")
            for p in ([plans[w].part(part)] if part else plans[w].parts):
                alloc_study.run_stage(plans[w], p, st, stores[w], jobs=jobs, progress=progress, say=say)
        cmd = "isocompute report allocators" + (" --quick" if quick else "")
        write_report(plans["sim"], stores["sim"], plans["tiny"], stores["tiny"], doc, fig, tiny_fig, cmd)
    except StudiesError as e:
        raise click.UsageError(str(e)) from None
    click.echo(f"wrote {doc}")
